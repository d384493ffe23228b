"""python benchmarks/launch_in_region.py

How much launch a device-timed region holds, read from rows no fit holds out: MegaGDN-PTO's stage kernels
(kda/validation/megagdn.csv, `gdn_pto`, L = 4096 and 8192, H = 16 and 32) are timed as PR 35's decode kernel
is, NPU events around one launch with the host running ahead and L2 flushed before each. A stage's work grows
with L, so 2 m(L = 4096) - m(L = 8192) is the part of its region that does not: the launch and whatever else
is fixed per call. The model's same difference holds its launch (`chip.launch_overhead_us`) and the kernel's
own fixed part; measured minus the model's own fixed part is the launch the region holds. Stages whose work is
large give differences of hundreds of microseconds either way (the model's error at two lengths, not a
launch); the cumsum stage, the least work per launch, is the one whose difference reads a launch.

Then the decode rows (kda/validation/decode.csv, every one held out: nothing here is fitted or chosen on
them): what each timed region holds, as its `timed` column says, and what the model charges each (the launch
and no host cost: a decode prediction is its makespan plus `chip.launch_overhead_us`).
"""
from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

from npusim import load_profile
from npusim.fit.measurements import read_measurements

from kda.kernels.registry import resolve

ROOT = Path(__file__).resolve().parent.parent
PROFILE = "ascend-910b2"
LENGTHS = (4096, 8192)


def fixed_part(short_us: float, long_us: float) -> float:
    """The part of a time that does not grow with the length, from the length and twice it."""
    return 2 * short_us - long_us


def dims(shape: str) -> tuple[int, int]:
    """(T, H) of a `B=..;T=..;H=..` shape."""
    kv = dict(re.findall(r"(\w+)=(\d+)", shape))
    return int(kv["T"]), int(kv["H"])


def pto_pairs(profile) -> list[tuple[str, int, float, float]]:
    """(stage, H, measured fixed part, the model's fixed part without its launch) of every PTO stage measured
    at both lengths, rows not held out only."""
    rows = [m for m in read_measurements(ROOT / "kda" / "validation" / "megagdn.csv")
            if m.kernel == "gdn_pto" and not m.held_out]
    by = {}
    for m in rows:
        T, H = dims(m.shape)
        by[(m.stage, H, T)] = (m.measured_us, resolve(m).predict(profile))
    launch = profile.chip.launch_overhead_us
    out = []
    for (stage, H, T), (m, p) in sorted(by.items()):
        if T == LENGTHS[0] and (stage, H, LENGTHS[1]) in by:
            m2, p2 = by[(stage, H, LENGTHS[1])]
            out.append((stage, H, fixed_part(m, m2), fixed_part(p, p2) - launch))
    return out


def main() -> int:
    profile = load_profile(PROFILE)
    launch = profile.chip.launch_overhead_us
    print(f"MegaGDN-PTO stages, not held out (NPU events, host ahead): the part of the region that does not grow "
          f"with L\n{'stage':<12}{'H':>4}{'measured':>10}{'model':>9}{'launch held':>13}")
    held = []
    for stage, H, measured, own in pto_pairs(profile):
        print(f"{stage:<12}{H:>4}{measured:>10.1f}{own + launch:>9.1f}{measured - own:>13.1f}")
        if stage == "cumsum":
            held.append(measured - own)
    print(f"(model = its kernel's own fixed part + the profile's launch, {launch:g} us)")
    print(f"cumsum, the least work per launch: the region holds {min(held):.1f}-{max(held):.1f} us of launch, "
          f"the model charges {launch:g} us")
    print("\nThe decode rows (held out): what the timed region holds, what the model charges")
    with open(ROOT / "kda" / "validation" / "decode.csv", encoding="utf-8") as f:
        groups: dict[str, list[str]] = {}
        for r in csv.DictReader(f):
            groups.setdefault(r["timed"].split(";")[0].split(" (")[0], []).append(r["id"])
    for timed, ids in groups.items():
        print(f"  {ids[0] if len(ids) == 1 else ids[0] + ' ..' + ids[-1].split('-', 1)[1]}: {timed}")
    print(f"  every row: makespan + chip.launch_overhead_us ({launch:g} us), no host cost")
    return 0


if __name__ == "__main__":
    sys.exit(main())
