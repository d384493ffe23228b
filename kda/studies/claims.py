"""The design document's own figures (004_631ba34979f5f6a7.txt), with their sections, so every report can
put what the simulator measures beside what the document claims. Nothing here feeds a computation."""
from typing import TypedDict


class Claim(TypedDict, total=False):
    syncs: int
    sync_kib: list[int]              # per hand-off
    total_kib: int
    sync_us: float
    cube_us: float
    vec_us: float
    latency_us: float                # per chunk
    macs: dict[str, int]             # per Cube phase
    total_macs: int
    vec_ops: dict[str, int]          # per Vector phase
    total_vec_ops: int
    source: str                      # the document's tables


CLAIMS: dict[str, Claim] = {
    "v1": {"syncs": 11, "latency_us": 17.0,
           "source": "table 9.2: 11 hand-offs, ~17 us, wrong state decay"},
    "v2": {"syncs": 11, "sync_kib": [48, 8, 8, 64, 16, 48, 40], "total_kib": 232,
           "sync_us": 13.3, "cube_us": 3.0, "vec_us": 0.5, "latency_us": 16.8,
           "source": "tables 4.3 (bytes; ⑦-⑪ given as 40 KB together), 7.2 (13.3 us), 7.3 (16.8 us)"},
    "v3": {"syncs": 6, "sync_kib": [80, 8, 8, 56, 24, 48], "total_kib": 224,
           "sync_us": 8.2, "cube_us": 3.0, "vec_us": 0.5, "latency_us": 11.7,
           "macs": {"B": 524_000, "D": 4_700_000, "F": 1_500_000}, "total_macs": 6_700_000,
           "vec_ops": {"A": 80_000, "C": 12_000, "E": 12_000, "G": 20_000}, "total_vec_ops": 124_000,
           "source": "tables 4.3 (bytes), 7.1 (FLOPs), 7.2 (8.2 us), 7.3 (11.7 us)"},
}
