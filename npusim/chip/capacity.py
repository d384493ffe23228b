"""What a phase holds on its unit, against the unit's capacity; how many tiles it needs when it does not fit.

The data-flow checker records, per phase, every buffer the phase holds (graph.Local): GM inputs from their
first load, workspace hand-offs and the state from their first read, results from the op that makes them
(in fp32), each until its last use in the phase, or to the phase's end if it outlives the phase (a hand-off,
a kept tensor, a result). Views share their tensor's buffer. The peak is the largest sum of live buffers
over the phase's ops, on:
  - a Vector phase: the Unified Buffer of one AIV; the core's Vector units split the phase, so each holds
    1/vec_per_core of it;
  - a Cube phase: L1. Each matmul's operands and result are also held against L0A, L0B and L0C; a matmul
    that does not fit there is cut into L0 tiles from L1 (MTE1), which costs no GM traffic.

Tiling. A phase that does not fit is cut into n tiles along the last axis of its buffers. A buffer that
every tile needs whole (a matmul's left operand, the matrix of a triangular solve, one reduced along its
last axis) is held whole in every tile and, if it comes from GM, the workspace or the state, loaded again
for every tile after the first: these are the extra GM round trips. With BUFFER_NUM = b (b >= 2) a tiled
phase holds b copies of each tile it streams in or out (the queues' buffers). Each row of a tile is padded
to the DataCopy alignment (32 B on A2), in the buffer and on the way. No tiling fits when even one-column
tiles do not (then one line names the phase, the buffers and the bytes).

Grouped value heads. A phase recorded for a work item of G value heads that share one q/k head
(Phase.group = G) holds two kinds of buffer: grouped ones, whose leading axis is the group (anything made
from v, g, beta or the state), and shared ones (q, k and what is made from them alone). When the phase does
not fit whole, it may also iterate the group in `parts`, ceil(G / parts) value heads at a time: each part
holds its slice of every grouped buffer (and cuts it into column tiles as above). The parts run inside each
column tile: the shared buffers the phase loads (q and k) are loaded once per tile, as without groups, and
held while every part uses them (a q/k tile loaded once for its G value heads: no extra GM traffic); what
the phase makes from them alone is made again in each part, which holds it as its own. With one part the
phase is tiled exactly as above.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from npusim.chip.profile import Profile
from npusim.errors import NpuSimError
from npusim.record.graph import CUBE, UNIT_LABEL, Local, Phase
from npusim.record.ops import MATMUL

TILE, REFUSE = "tile", "refuse"
CAPACITY_MODES = (TILE, REFUSE)
KIB = 1024
STREAMED = ("gm", "workspace", "state")


class CapacityError(NpuSimError):
    """A phase does not fit its unit's memory (refused, or no tiling fits)."""


@dataclass(frozen=True)
class Footprint:
    nbytes: float                          # per unit (per AIV for a Vector phase)
    live: tuple[tuple[str, float], ...]    # buffers live at the peak, with their bytes per unit


def memory_name(unit: str) -> str:
    return "L1" if unit == CUBE else "UB"


def capacity_bytes(phase: Phase, profile: Profile) -> float:
    return (profile.core.l1_kib if phase.unit == CUBE else profile.core.ub_kib) * KIB


def share(phase: Phase, profile: Profile) -> int:
    """How many units split the phase: the core's Vector units, or the one Cube."""
    return 1 if phase.unit == CUBE else profile.chip.vec_per_core


def _rows_width(local: Local) -> tuple[int, int]:
    width = local.shape[-1] if local.shape else 1
    numel = math.prod(local.shape) if local.shape else 1
    return numel // max(width, 1), max(width, 1)


def tile_bytes(local: Local, tiles: int, align: float) -> float:
    """Bytes of one tile of `local` on the unit: rows x (its part of the last axis, padded)."""
    rows, width = _rows_width(local)
    itemsize = local.nbytes / max(rows * width, 1)
    w = width if local.whole else -(-width // tiles)
    row = w * itemsize
    if align <= 1 or row <= 0:
        return rows * row
    blocks = max(1, math.ceil(row / align - 1e-9))   # the tolerance keeps an exact multiple; never 0 blocks
    return rows * blocks * align


def grouped(local: Local, group: int) -> bool:
    """Whether `local` holds one slice per value head of a grouped work item (its leading axis is the group)."""
    return group > 1 and len(local.shape) > 1 and local.shape[0] == group


def heads_per_part(group: int, parts: int) -> int:
    return -(-group // max(parts, 1))


def held(local: Local, group: int, parts: int) -> bool:
    """A shared buffer a grouped phase in parts loads once per tile and holds for every part (q, k)."""
    return parts > 1 and local.source in STREAMED and not grouped(local, group)


def part_of(local: Local, group: int, parts: int) -> Local:
    """The slice of a grouped buffer one part of the group holds (the buffer itself with one part)."""
    if parts <= 1 or not grouped(local, group):
        return local
    heads = heads_per_part(group, parts)
    return replace(local, shape=(heads,) + tuple(local.shape[1:]), nbytes=local.nbytes // group * heads)


def group_parts(group: int) -> list[int]:
    """The ways to iterate a group of value heads: 1 part (all at once), then fewer heads per part, down to one."""
    out = []
    for heads in range(group, 0, -1):
        parts = -(-group // heads)
        if parts not in out:
            out.append(parts)
    return out


def max_tiles(phase: Phase) -> int:
    """Beyond one column per tile nothing gets smaller."""
    return max((_rows_width(lo)[1] for lo in phase.locals if not lo.whole), default=1)


def footprint(phase: Phase, tiles: int, buffers: int, align: float, units: int, parts: int = 1) -> Footprint:
    """The most the phase holds at once per unit, cut into `tiles` with `buffers` copies of streamed tiles
    (and, for a grouped work item, iterating its value heads in `parts`: shared buffers held throughout)."""
    group = getattr(phase, "group", 1)
    parts = parts if group > 1 else 1
    copies = min(buffers, tiles * parts)
    best = 0.0
    live: tuple[tuple[str, float], ...] = ()
    each = []                # (the local, held throughout, its bytes while live)
    for lo in phase.locals:
        if held(lo, group, parts):                           # shared: held by every part of its tile
            each.append((lo, True, tile_bytes(lo, tiles, align) * (1 if lo.whole else min(buffers, tiles)) / units))
        else:
            streamed = not lo.whole and (lo.source in STREAMED or lo.last >= phase.steps)
            each.append((lo, False, tile_bytes(part_of(lo, group, parts), tiles, align)
                         * (copies if streamed else 1) / units))
    for t in range(phase.steps + 1):
        items = [(lo.name, b) for lo, always, b in each if always or lo.first <= t <= lo.last]
        total = sum(b for _, b in items)
        if total > best:
            best, live = total, tuple(items)
    return Footprint(best, live)


def reload_bytes(phase: Phase, tiles: int) -> int:
    """Extra GM traffic of a tiled phase: whole buffers from GM, the workspace or the state, loaded again
    for every tile after the first (a grouped phase in parts: each part's slice of a grouped one, a shared
    one once for all parts)."""
    return (tiles - 1) * sum(lo.nbytes for lo in phase.locals if lo.whole and lo.source in STREAMED)


def l0_use(phase: Phase) -> dict[str, int]:
    """The largest left operand, right operand and fp32 result of the phase's matmuls, in bytes."""
    out = {"l0a": 0, "l0b": 0, "l0c": 0}
    for op in phase.ops:
        if op.kind == MATMUL and len(op.shape) == 3:
            m, n, k = op.shape
            out["l0a"] = max(out["l0a"], m * k * op.operand_bytes)
            out["l0b"] = max(out["l0b"], k * n * op.operand_bytes)
            out["l0c"] = max(out["l0c"], m * n * 4)
    return out


def l0_tiles(phase: Phase, profile: Profile) -> int:
    """L0 tiles the Cube cuts its largest matmul into (from L1, no GM traffic); 1 for a Vector phase."""
    if phase.unit != CUBE:
        return 1
    use = l0_use(phase)
    return max([1] + [math.ceil(use[k] / (getattr(profile.core, f"{k}_kib") * KIB))
                      for k in use if math.isfinite(getattr(profile.core, f"{k}_kib"))])


def fitting_tilings(phase: Phase, profile: Profile, buffers: int, program: str = "", mode: str = TILE,
                    group_split: bool = True) -> list[tuple[int, int]]:
    """(parts, tiles): for each way to iterate a grouped work item's value heads (one part first), the fewest
    column tiles that fit, where any do; [(1, 1)] if the phase fits whole. CapacityError if refused, or if no
    tiling fits in any of them."""
    if mode not in CAPACITY_MODES:
        raise ValueError(f"capacity mode must be one of {', '.join(CAPACITY_MODES)}, got {mode!r}")
    cap = capacity_bytes(phase, profile)
    if math.isinf(cap):
        return [(1, 1)]
    align, units = profile.core.align_bytes, share(phase, profile)
    group = getattr(phase, "group", 1)
    if footprint(phase, 1, buffers, align, units).nbytes <= cap:
        return [(1, 1)]
    where = f"{program + ': ' if program else ''}Phase {phase.label}"
    if mode == REFUSE:
        raise CapacityError(f"{where} holds {_describe(footprint(phase, 1, 1, align, units), cap, phase)} "
                            f"(--capacity tile would tile it)")
    top = max_tiles(phase)
    out = []
    for parts in (group_parts(group) if group_split else [1]):
        def fits(n, parts=parts):
            return footprint(phase, n, buffers, align, units, parts).nbytes <= cap
        if not fits(top):
            continue
        lo, hi = 0, 1                  # fits(lo) is False (or lo = 0); find the first n that fits
        while hi < top and not fits(hi):
            lo, hi = hi, min(2 * hi, top)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if fits(mid) else (mid, hi)
        out.append((parts, hi))
    if not out:
        last = group_parts(group)[-1] if group_split else 1
        heads = f", one value head of the {group} at a time," if last > 1 else ""
        raise CapacityError(f"{where} fits no tiling: even {top} tiles (one column of each split tensor){heads} "
                            f"hold {_describe(footprint(phase, top, buffers, align, units, last), cap, phase)}")
    return out


def _describe(fp: Footprint, cap: float, phase: Phase) -> str:
    per = " per AIV" if phase.unit != CUBE else ""
    items = ", ".join(f"{n} {b / KIB:.4g}" for n, b in sorted(fp.live, key=lambda x: -x[1])[:6])
    more = f" and {len(fp.live) - 6} more" if len(fp.live) > 6 else ""
    return (f"{fp.nbytes / KIB:.4g} KiB{per} ({items}{more} KiB), more than the {cap / KIB:g} KiB "
            f"{memory_name(phase.unit)} of {UNIT_LABEL[phase.unit]}")
