"""A decode design: a phase program for one work item and how the kernel lays the items over the chip.

A work item is the state of one (sequence, value head), or a tile of its value columns, for the T tokens of
one step. The kernel's launch decides who runs the items:

    CORES      a mix kernel: a block is an AI core, its two Vector units split every item's columns
    AIV0       a mix kernel whose second Vector unit returns at once: a block is an AI core, one AIV works
    AIVS       a Vector-only kernel: a block is one AIV (48 on the 910B2), each with whole items
    AIV_PAIRS  a mix kernel whose blocks are AI cores but whose workers are their AIVs (cid * 2 + vid)

Blocks beyond the chip's cores start as cores free up (waves); a block takes items either by a grid stride
(item i goes to worker i mod workers) or in contiguous ranges (AscendC tiling: items // blocks each, one more
for the first items % blocks); with items of one cost both give the same counts.

How a worker's items follow one another (`loop`), read from the kernel's synchronisation:

    SERIAL         the next item's state load waits for this item's state store (a PIPE_ALL at the top of
                   the loop, or a fence MTE3 -> MTE2 on the one state tile)
    STORE_BEHIND   separate input and output buffers, one each: the next load starts once this item's
                   compute has read its input, and the next compute once this item's store has left
    DOUBLE         two state buffers each way: loads run ahead, the pipes overlap item by item
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from npusim.record.program import PhaseProgram

CORES, AIV0, AIVS, AIV_PAIRS = "cores", "aiv0", "aivs", "aiv_pairs"
WORKERS = (CORES, AIV0, AIVS, AIV_PAIRS)
STRIDE, RANGES = "stride", "ranges"
SERIAL, STORE_BEHIND, DOUBLE = "serial", "store_behind", "double"
LOOPS = (SERIAL, STORE_BEHIND, DOUBLE)


def one_per_item(items: int, cores: int, aivs: int) -> int:
    """One block per item, up to every AI core."""
    return max(1, min(items, cores))


def one_per_item_aiv(items: int, cores: int, aivs: int) -> int:
    """One block per item, up to every AIV (a Vector-only kernel)."""
    return max(1, min(items, aivs))


@dataclass(frozen=True)
class DecodeDesign:
    name: str
    program: PhaseProgram
    description: str
    workers: str = CORES
    loop: str = DOUBLE
    assign: str = STRIDE
    v_tile: int = 0                       # an item is this many value columns of the state (0: all of them)
    blocks: Callable[[int, int, int], int] | None = None  # (items, AI cores, AIVs) -> blocks launched;
                                          # None: one per item, up to every core (every AIV for AIVS)
    state_layout: str = "kv"              # "kv": S [K, V] (FLA's); "vk": S [V, K] (sglang's pool)
    io_dtype: str | None = None           # q, k, v, o in GM (None: the inputs' type)
    gate_dtype: str = "fp32"              # g and beta in GM
    handoff: str = "fp32"                 # the type of Cube <-> Vector hand-offs (designs with both)
    state_dtypes: tuple[str, ...] = ("fp32", "bf16")
    options: tuple[str, ...] | None = None   # in-kernel options the kernel always runs (None: as asked)
    gate: str = "kda"                     # "kda": a decay per key channel; "gdn": one per head
    tokens: tuple[int, int] = (1, 64)     # tokens per step it takes (MTP: more than one)
    head_dim: int | None = None           # the only K = V it takes (a kernel with a fixed tile), None: any
    buffers: int | None = 1               # BUFFER_NUM inside an item (1: the item is one tile; the loop
                                          # rule overlaps items); None: the profile's
    source: str = ""                      # where it is read from (a measured kernel's repository and commit)
    notes: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self):
        if self.workers not in WORKERS:
            raise ValueError(f"decode design {self.name}: workers must be one of {', '.join(WORKERS)}")
        if self.loop not in LOOPS:
            raise ValueError(f"decode design {self.name}: loop must be one of {', '.join(LOOPS)}")
        if self.assign not in (STRIDE, RANGES):
            raise ValueError(f"decode design {self.name}: assign must be {STRIDE!r} or {RANGES!r}")

    def tiles_per_head(self, d_v: int) -> int:
        return 1 if not self.v_tile else -(-d_v // self.v_tile)

    def worker_items(self, items: int, cores: int, aivs: int) -> list[int]:
        """Items each worker runs, in worker order (a worker per block; two per block with AIV_PAIRS)."""
        rule = self.blocks or (one_per_item_aiv if self.workers == AIVS else one_per_item)
        blocks = max(1, rule(items, cores, aivs))
        workers = blocks * (2 if self.workers == AIV_PAIRS else 1)
        if self.assign == STRIDE:
            counts = [len(range(w, items, workers)) for w in range(workers)]
        else:                             # AscendC tiling: items // workers each, one more for the first ones
            counts = [items // workers + (w < items % workers) for w in range(workers)]
        return [c for c in counts if c > 0]
