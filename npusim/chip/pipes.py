"""A phase as load (MTE2) / compute / store (MTE3 from UB, FixPipe from L0C) segments, tile by tile.

Per tile: l = its GM loads / MTE2 rate, c = its compute, s = its GM stores / MTE3 or FixPipe rate. Over n
tiles with BUFFER_NUM = b:
    b = 1, or serial mode:  n (l + c + s)                     every segment after the one before
    b >= 2:                 l + c + s + (n - 1) max(l, c, s)  the three pipes overlap tile by tile; the
                                                              slowest sets the pace, the rest is hidden
The closed form is the makespan of the three-stage pipeline with b buffers per queue (`schedule` gives the
segments, and tests hold it to the closed form). Hand-offs through the workspace stay on the sync links
(template.py); what moves here is the phase's own GM traffic: inputs it loads, results it stores, and the
whole buffers a tiled phase loads again (capacity.py). When transfers of other cores share HBM, the
engine stretches l and s by the factor its share gives.

The number of tiles: the fewest that fit (capacity.py); with b >= 2 a kernel may cut finer to overlap more,
so the plan takes, among the fitting counts 2^k up to one column per tile, the one with the least busy time
(each tile repeats the per-instruction overheads and dependent steps).

A grouped work item (capacity.py) may also iterate its value heads in parts: the segments are then
parts x tiles; a grouped op runs once per segment on its share, a shared op (on q/k alone) once per segment
on its tile's share (made again in each part); the shared buffers it loads (q, k) are loaded once per tile
for all parts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from npusim.chip import isa
from npusim.chip.capacity import (
    TILE,
    capacity_bytes,
    fitting_tilings,
    footprint,
    heads_per_part,
    held,
    l0_tiles,
    l0_use,
    max_tiles,
    memory_name,
    part_of,
    reload_bytes,
    share,
    tile_bytes,
)
from npusim.chip.cost import op_us
from npusim.chip.lanes import larger
from npusim.chip.profile import Profile
from npusim.record.graph import CUBE, Phase
from npusim.record.ops import MATMUL

MTE2, MTE3, FIXPIPE = "mte2", "mte3", "fixpipe"
PIPE_NAME = {MTE2: "MTE2", MTE3: "MTE3", FIXPIPE: "FixPipe"}


@dataclass(frozen=True)
class PipeTiming:
    tiles: int
    buffers: int
    load_us: float             # per tile, own rate
    compute_us: float          # per tile
    store_us: float            # per tile, own rate
    store_pipe: str            # MTE3 (Vector) or FIXPIPE (Cube)

    @property
    def overlaps(self) -> bool:
        """Whether the pipes overlap at all: double buffering and more than one tile."""
        return self.buffers >= 2 and self.tiles > 1

    @property
    def io_us(self) -> float:
        """All loads and stores at the core's own rates."""
        return self.tiles * (self.load_us + self.store_us)

    def busy_us(self, stretch: float = 1.0, serial: bool = False) -> float:
        ld, c, s = self.load_us * stretch, self.compute_us, self.store_us * stretch
        if serial or self.buffers < 2 or self.tiles == 1:
            return self.tiles * (ld + c + s)
        return ld + c + s + (self.tiles - 1) * larger(ld, c, s)

    def schedule(self, stretch: float = 1.0, serial: bool = False) -> list[tuple[str, int, float, float]]:
        """(pipe, tile, start, end) of every segment from the phase's start: pipe MTE2, "compute" or the
        store pipe. Tile i loads into buffer i mod b once tile i - b is computed, computes once loaded and
        once tile i - b's result has been stored, and stores after tile i - 1's store."""
        ld, c, s = self.load_us * stretch, self.compute_us, self.store_us * stretch
        b = 1 if serial or self.buffers < 2 else self.buffers
        out: list[tuple[str, int, float, float]] = []
        le, ce, se = [], [], []
        t_prev = 0.0
        for i in range(self.tiles):
            if b == 1:
                start = t_prev
                le.append(start + ld)
                ce.append(le[i] + c)
                se.append(ce[i] + s)
                t_prev = se[i]
            else:
                ls = max(le[i - 1] if i else 0.0, ce[i - b] if i >= b else 0.0)
                le.append(ls + ld)
                cs = max(le[i], ce[i - 1] if i else 0.0, se[i - b] if i >= b else 0.0)
                ce.append(cs + c)
                se.append(max(ce[i], se[i - 1] if i else 0.0) + s)
            out += [(MTE2, i, le[i] - ld, le[i]), ("compute", i, ce[i] - c, ce[i]), (self.store_pipe, i, se[i] - s, se[i])]
        return out


@dataclass(frozen=True)
class PhasePlan:
    """How a phase runs on its unit: its memory use against capacity, its tiles, its pipe timing."""
    phase: str
    unit: str
    memory: str                # "UB" (per AIV) or "L1"
    peak_bytes: float          # untiled, one buffer per tensor, per unit
    peak_live: tuple[tuple[str, float], ...]
    capacity_bytes: float
    tiles: int
    fit_tiles: int             # the fewest tiles that fit
    tile_bytes: float          # per unit, with the streamed tiles' buffer copies
    tile_shape: tuple[int, ...] | None
    reload_bytes: int          # extra GM traffic per chunk from tiling
    load_bytes: float          # per chunk, padded, reloads included
    store_bytes: float
    l0: dict
    l0_tiles: int
    timing: PipeTiming
    parts: int = 1             # a grouped work item's value heads iterated in this many parts (capacity.py)
    group: int = 1             # value heads of the work item
    loads: tuple[tuple[str, float], ...] = ()    # GM bytes loaded per chunk, per buffer (reloads included)
    fit_busy_us: float = 0.0   # the busy time at the fewest fitting tiles: what the finer cut saves against it

    @property
    def busy_us(self) -> float:
        return self.timing.busy_us()

    def to_dict(self) -> dict:
        t = self.timing
        return {"phase": self.phase, "unit": self.unit, "memory": self.memory + (" per AIV" if self.unit != CUBE else ""),
                "peak_bytes": self.peak_bytes, "capacity_bytes": self.capacity_bytes if math.isfinite(self.capacity_bytes) else None,
                "peak_tensors": dict(self.peak_live), "tiles": self.tiles, "fewest_fitting_tiles": self.fit_tiles,
                "fewest_fitting_busy_us": self.fit_busy_us,
                "tile_bytes": self.tile_bytes,
                "tile_shape": list(self.tile_shape) if self.tile_shape else None, "reload_bytes": self.reload_bytes,
                "load_bytes": self.load_bytes, "store_bytes": self.store_bytes, "store_pipe": PIPE_NAME[t.store_pipe],
                "buffers": t.buffers, "load_us": t.load_us * t.tiles, "compute_us": t.compute_us * t.tiles,
                "store_us": t.store_us * t.tiles, "busy_us": t.busy_us(), "serial_busy_us": t.busy_us(serial=True),
                "l0_bytes": self.l0, "l0_tiles": self.l0_tiles,
                **({"value_heads": self.group, "value_heads_per_part": heads_per_part(self.group, self.parts)}
                   if self.group > 1 else {})}


def _grouped_op(op, group: int) -> bool:
    lead = op.lead if op.kind == MATMUL else (op.shape[0] if len(op.shape) > 1 else 0)
    return group > 1 and lead == group


def tile_compute_us(phase: Phase, profile: Profile, tiles: int, parts: int = 1) -> float:
    """One tile's compute: its share of the work, with every instruction's overhead and dependent steps. With
    the group in parts, one segment's: a grouped op's share of parts x tiles, a shared op's share of the tiles
    (made again in every part)."""
    if tiles == 1 and parts == 1:
        return sum(op_us(op, phase.unit, profile) for op in phase.ops)
    if parts == 1:
        return sum(op_us(replace(op, macs=op.macs / tiles, elements=op.elements / tiles), phase.unit, profile)
                   for op in phase.ops)
    group, total = phase.group, 0.0
    for op in phase.ops:
        n = tiles * parts if _grouped_op(op, group) else tiles
        total += op_us(replace(op, macs=op.macs / n, elements=op.elements / n), phase.unit, profile)
    return total


def _held(lo, phase: Phase, parts: int) -> bool:
    return held(lo, phase.group, parts)


def gm_loads(phase: Phase, tiles: int, align: float, parts: int = 1) -> dict[str, float]:
    """GM bytes each buffer loads per chunk, each tile's rows padded; whole buffers from GM once (a grouped
    phase in parts: each part its slice of a grouped buffer, a shared one once per tile for all parts)."""
    out: dict[str, float] = {}
    for lo in phase.locals:
        if lo.source == "gm":
            times = tiles if _held(lo, phase, parts) else tiles * parts
            n = lo.nbytes if lo.whole else times * tile_bytes(part_of(lo, phase.group, parts), tiles, align)
            out[lo.name] = out.get(lo.name, 0.0) + n
    return out


def _gm_bytes(phase: Phase, tiles: int, align: float, parts: int = 1) -> tuple[float, float]:
    """GM bytes loaded and stored per chunk, each tile's rows padded; whole buffers from GM once."""
    load = sum(gm_loads(phase, tiles, align, parts).values(), 0.0)
    store = 0.0
    stored = [lo for lo in phase.locals if lo.stored]
    made = sum(lo.nbytes for lo in stored)
    if made:                         # stored at the GM type: scale the fp32 buffers to the bytes written
        ratio = phase.gm_write_bytes / made
        for lo in stored:
            lo = replace(lo, nbytes=lo.nbytes * ratio)
            store += tiles * parts * tile_bytes(part_of(lo, phase.group, parts), tiles, align)
    elif phase.gm_write_bytes:
        store = phase.gm_write_bytes
    if not phase.locals:            # a phase recorded without buffers (built by hand): its GM bytes as they are
        load, store = phase.gm_read_bytes, phase.gm_write_bytes
    return load, store


def _rate(profile: Profile, pipe: str) -> float:
    return profile.pipe_gbps(pipe) * 1e3        # bytes per us


def _rows(local) -> int:
    """Strided rows of a GM tile: a [.., C, D] tile is C rows (one per token); a vector is one; a tile the
    recording knows the layout of (Local.segments) its runs of rows."""
    if local.segments:
        return local.segments
    shape = [d for d in local.shape if d > 1]
    return shape[-2] if len(shape) >= 2 else 1


def _isa_io_us(phase: Phase, profile: Profile, tiles: int, parts: int = 1) -> tuple[float, float, float]:
    """Per tile (per segment of a grouped phase in parts), with the [isa] table: MTE2 loads and MTE3 stores
    as one DataCopy per buffer, on each of the Vector units that split the phase (a whole buffer once, split
    over the tiles; a shared buffer held by a tile's parts once, spread over them); the Vector units'
    casts of 16-bit buffers to and from fp32. A Cube phase's results leave L0C through the FixPipe inside
    each matmul (isa.cube_op_cycles), so its store segment is empty."""
    cube = phase.unit == CUBE
    units = 1 if cube else profile.chip.vec_per_core
    align = profile.core.align_bytes
    load = cast = store = 0.0
    for lo in phase.locals:
        spread = parts if _held(lo, phase, parts) else 1     # a held buffer's load, over its tile's parts
        part = part_of(lo, phase.group, parts)
        numel = math.prod(part.shape) if part.shape else 1
        narrow = lo.nbytes / max(math.prod(lo.shape) if lo.shape else 1, 1) < 4
        if lo.source == "gm":
            nbytes = part.nbytes / tiles if lo.whole else tile_bytes(part, tiles, align)
            load += isa.load_cycles(profile, nbytes / units, to_l1=cube, rows=_rows(lo) / (1 if cube else units)) / spread
            if narrow and not cube:
                cast += isa.cast_cycles(profile, numel / tiles / units) / spread
    stored = [lo for lo in phase.locals if lo.stored]
    made = sum(lo.nbytes for lo in stored)
    if made and not cube:
        ratio = phase.gm_write_bytes / made
        for lo in stored:
            part = part_of(lo, phase.group, parts)
            numel = math.prod(part.shape) if part.shape else 1
            store += isa.store_cycles(profile, tile_bytes(replace(part, nbytes=part.nbytes * ratio), tiles, align) / units,
                                      from_l0c=False, rows=_rows(lo) / units)
            if ratio < 1:
                cast += isa.cast_cycles(profile, numel / tiles / units)
    us = profile.cycles_to_us
    return us(load), us(cast), us(store)


def _timing(phase: Phase, profile: Profile, tiles: int, buffers: int,
            parts: int = 1) -> tuple[PipeTiming, float, float, int]:
    load, store = _gm_bytes(phase, tiles, profile.core.align_bytes, parts)
    extra = reload_bytes(phase, tiles)
    load += extra
    store_pipe = FIXPIPE if phase.unit == CUBE else MTE3
    segments = tiles * parts
    if isa.enabled(profile):
        lu, cu, su = _isa_io_us(phase, profile, tiles, parts)
        lu += extra / segments / (profile.isa.gm_l1_bytes_per_cycle if phase.unit == CUBE else
                                  profile.isa.gm_ub_bytes_per_cycle * profile.chip.vec_per_core) / (profile.chip.clock_ghz * 1e3)
        timing = PipeTiming(segments, buffers, lu, tile_compute_us(phase, profile, tiles, parts) + cu, su, store_pipe)
        return timing, load, store, extra
    lr, sr = _rate(profile, MTE2), _rate(profile, store_pipe)
    timing = PipeTiming(segments, buffers, (load / lr if load else 0.0) / segments,
                        tile_compute_us(phase, profile, tiles, parts), (store / sr if store else 0.0) / segments,
                        store_pipe)
    return timing, load, store, extra


def plan_phase(phase: Phase, profile: Profile, mode: str = TILE, program: str = "") -> PhasePlan:
    """Capacity, tiles and pipe timing of one phase (CapacityError where it is refused or cannot fit)."""
    buffers = profile.core.buffer_num
    cap = capacity_bytes(phase, profile)
    align, units = profile.core.align_bytes, share(phase, profile)
    tilings = fitting_tilings(phase, profile, buffers, program, mode)
    options = []
    for parts, need in tilings:
        options.append((parts, need))
        if buffers >= 2:               # finer tiles overlap more, and repeat every op's overhead per tile
            top, n = max_tiles(phase), 2
            while n <= top:
                if n > need and footprint(phase, n, buffers, align, units, parts).nbytes <= cap:
                    options.append((parts, n))
                n *= 2
    best, busy = None, {}
    for parts, n in options:
        cand = _timing(phase, profile, n, buffers, parts)
        busy[parts, n] = cand[0].busy_us()
        if best is None or cand[0].busy_us() < best[0][0].busy_us() - 1e-12:
            best = (cand, parts, n)
    (timing, load, store, extra), parts, tiles = best
    need = next(t for p, t in tilings if p == parts)
    peak = footprint(phase, 1, 1, align, units)
    tiled = footprint(phase, tiles, buffers, align, units, parts)
    split = [lo for lo in phase.locals if not lo.whole and not _held(lo, phase, parts)]
    shape = None
    if split:
        big = part_of(max(split, key=lambda lo: lo.nbytes), phase.group, parts)
        shape = tuple(big.shape[:-1]) + (-(-big.shape[-1] // tiles),) if big.shape else None
    loads = gm_loads(phase, tiles, align, parts)
    whole = [lo for lo in phase.locals if lo.whole and lo.source in ("gm", "workspace", "state")]
    for lo in whole:                   # reloads of whole buffers, by name
        loads[lo.name] = loads.get(lo.name, 0.0) + (tiles - 1) * lo.nbytes
    return PhasePlan(phase.name, phase.unit, memory_name(phase.unit), peak.nbytes, peak.live, cap, tiles, need,
                     tiled.nbytes, shape, extra, load, store, l0_use(phase), l0_tiles(phase, profile), timing,
                     parts, phase.group, tuple(sorted(loads.items())), busy[parts, need])
