"""A run's data-movement segments (pipes.py) as the trace and the Gantt chart draw them: per phase event,
its MTE2 loads and MTE3 / FixPipe stores tile by tile, and what the phase holds on its unit against the
unit's capacity (a counter track)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from npusim.chip.pipes import PIPE_NAME
from npusim.model.engine import PHASE, Run
from npusim.record.graph import CUBE

KIB = 1024
ROW_ORDER = ("Cube MTE2", "Cube FixPipe", "Vec MTE2", "Vec MTE3")


@dataclass(frozen=True)
class Segment:
    core: int
    unit: str           # the unit whose pipe it is: "cube" or "vec"
    pipe: str           # MTE2, MTE3 or FIXPIPE
    phase: str
    seq: int
    chunk: int
    tile: int
    start: float        # us, on the run's clock
    end: float

    @property
    def row(self) -> str:
        """The row it is drawn on: "Cube MTE2", "Vec MTE3", ..."""
        return f"{'Cube' if self.unit == CUBE else 'Vec'} {PIPE_NAME[self.pipe]}"


def has_pipes(run: Run) -> bool:
    """Whether any phase of the run moves data on a pipe of its own (not with the seed-doc profile)."""
    return any(n.pipe is not None and n.pipe.io_us > 0 for n in run.template.nodes)


def pipe_rows(run: Run) -> list[str]:
    """The pipe rows that carry segments, in drawing order ("Cube MTE2", "Cube FixPipe", "Vec MTE2", "Vec MTE3"):
    a row no phase moves data on is left out (on a chip whose matmuls drain L0C through the FixPipe inside
    their own cost, no Cube phase has a store segment)."""
    used = set()
    for n in run.template.nodes:
        t = n.pipe
        if n.kind != PHASE or t is None:
            continue
        unit = "Cube" if n.resource == CUBE else "Vec"
        if t.load_us > 0:
            used.add(f"{unit} MTE2")
        if t.store_us > 0:
            used.add(f"{unit} {PIPE_NAME[t.store_pipe]}")
    return [r for r in ROW_ORDER if r in used]


def segments(run: Run, lo: float = -math.inf, hi: float = math.inf) -> list[Segment]:
    """Every load and store segment of the run's phases that end after `lo` and start before `hi`."""
    nodes, tr = run.template.nodes, run.traced()
    out: list[Segment] = []
    for k, c, s, t, st, be, x in zip(tr.node, tr.core, tr.seq, tr.chunk, tr.start, tr.busy_end, tr.stretch):
        nd = nodes[k]
        if nd.kind != PHASE or nd.pipe is None or nd.pipe.io_us <= 0 or be < lo or st > hi:
            continue
        for pipe, tile, a, b in nd.pipe.schedule(x, run.serial):
            if pipe != "compute" and b > a:
                out.append(Segment(c, nd.resource, pipe, nd.name, s, t, tile, st + a, st + b))
    out.sort(key=lambda g: (g.start, g.core, g.row))
    return out


def memory_samples(run: Run) -> list[tuple[float, int, str, float, float]]:
    """(t, core, memory track, KiB held, KiB capacity) when each phase starts (its tiles' bytes per unit)
    and ends (0): the counter track of what the phases hold."""
    plans = {p.phase: p for p in run.template.plans}
    nodes, tr = run.template.nodes, run.traced()
    out = []
    for k, c, st, be in zip(tr.node, tr.core, tr.start, tr.busy_end):
        nd = nodes[k]
        if nd.kind != PHASE or nd.name not in plans:
            continue
        p = plans[nd.name]
        track = "L1 KiB" if p.unit == CUBE else "UB KiB per AIV"
        cap = p.capacity_bytes / KIB
        out.append((st, c, track, p.tile_bytes / KIB, cap))
        out.append((be, c, track, 0.0, cap))
    out.sort(key=lambda x: (x[0], x[3]))        # a phase ending frees its memory before the next one starts
    return out


def chrome_events(run: Run, pid_of: dict[int, int], first_tid: int, slice_event, ns, ts) -> tuple[list[dict], dict[int, str]]:
    """Chrome trace events (chrome_trace.py passes its slice maker and time converters): one thread per
    pipe row with a slice per tile's load or store, and the counter tracks of UB and L1 use. Returns the
    events and the names of the threads they use."""
    out: list[dict] = []
    rows: dict[str, int] = {}
    if has_pipes(run):
        rows = {name: first_tid + i for i, name in enumerate(ROW_ORDER)}
        for g in segments(run):
            if g.core not in pid_of:
                continue
            args = {"phase": g.phase, "chunk": g.chunk, "sequence": g.seq, "tile": g.tile, "pipe": PIPE_NAME[g.pipe],
                    "start_us": g.start, "end_us": g.end}
            out.append(slice_event(f"{g.phase} t{g.tile}[c{g.chunk}]", f"pipe,{g.pipe}", pid_of[g.core], rows[g.row],
                                   ns(g.start), ns(g.end), args))
    last: dict[tuple[int, str], float] = {}
    samples: dict[tuple[int, str, int], dict] = {}
    for t, c, track, held, cap in memory_samples(run):
        if c not in pid_of:
            continue
        args = {"held": held, **({"capacity": cap} if math.isfinite(cap) else {})}
        samples[(c, track, ns(t))] = args            # the last value at an instant wins
        last[(c, track)] = held
    for (c, track, n), args in sorted(samples.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        out.append({"name": track, "ph": "C", "pid": pid_of[c], "tid": first_tid + len(rows), "ts": ts(n),
                    "args": args})
    used = {tid: name for name, tid in rows.items() if any(e.get("tid") == tid for e in out)}
    return out, used
