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
NEAR_US = 0.01              # a phase this far outside a time window has no segment or sample inside it
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


def segments(run: Run, lo: float = -math.inf, hi: float = math.inf, items=None) -> list[Segment]:
    """Every load and store segment of the run's phases that end after `lo` and start before `hi` (and are
    of a work item (sequence, chunk) in `items`, when given)."""
    nodes, tr = run.template.nodes, run.traced()
    out: list[Segment] = []
    for k, c, s, t, st, be, x in zip(tr.node, tr.core, tr.seq, tr.chunk, tr.start, tr.busy_end, tr.stretch):
        nd = nodes[k]
        if nd.kind != PHASE or nd.pipe is None or nd.pipe.io_us <= 0 or be < lo or st > hi:
            continue
        if items is not None and (s, t) not in items:
            continue
        for pipe, tile, a, b in nd.pipe.schedule(x, run.serial):
            if pipe != "compute" and b > a:
                out.append(Segment(c, nd.resource, pipe, nd.name, s, t, tile, st + a, st + b))
    out.sort(key=lambda g: (g.start, g.core, g.row))
    return out


def memory_samples(run: Run, hi: float = math.inf) -> list[tuple[float, int, str, float, float]]:
    """(t, core, memory track, KiB held, KiB capacity) when each phase starts (its tiles' bytes per unit)
    and ends (0): the counter track of what the phases hold; of the phases that start by `hi`."""
    plans = {p.phase: p for p in run.template.plans}
    nodes, tr = run.template.nodes, run.traced()
    out = []
    for k, c, st, be in zip(tr.node, tr.core, tr.start, tr.busy_end):
        nd = nodes[k]
        if nd.kind != PHASE or nd.name not in plans or st > hi:
            continue
        p = plans[nd.name]
        track = "L1 KiB" if p.unit == CUBE else "UB KiB per AIV"
        cap = p.capacity_bytes / KIB
        out.append((st, c, track, p.tile_bytes / KIB, cap))
        out.append((be, c, track, 0.0, cap))
    out.sort(key=lambda x: (x[0], x[3]))        # a phase ending frees its memory before the next one starts
    return out


def chrome_events(run: Run, pid_of: dict[int, int], first_tid: int, slice_event, ns, ts, part=None,
                  items=None) -> tuple[list[dict], dict[int, str]]:
    """Chrome trace events (chrome_trace.py passes its slice maker and time converters): one thread per
    pipe row with a slice per tile's load or store, and the counter tracks of UB and L1 use. Returns the
    events and the names of the threads they use (those the whole run uses). With a `part`
    (trace_part.Part), only its events: the segments of the work items in `items` when given, else those
    that overlap the part's window, and the samples in the window."""
    out: list[dict] = []
    rows: dict[str, int] = {}
    hi = math.inf if part is None else part.end + NEAR_US
    if has_pipes(run):
        rows = {name: first_tid + i for i, name in enumerate(ROW_ORDER)}
        for g in segments(run, hi=hi if items is None else math.inf, items=items):
            if g.core not in pid_of:
                continue
            args = {"phase": g.phase, "chunk": g.chunk, "sequence": g.seq, "tile": g.tile, "pipe": PIPE_NAME[g.pipe],
                    "start_us": g.start, "end_us": g.end}
            ev = slice_event(f"{g.phase} t{g.tile}[c{g.chunk}]", f"pipe,{g.pipe}", pid_of[g.core], rows[g.row],
                             ns(g.start), ns(g.end), args)
            if part is None or items is not None or part.overlaps(ev["ts"], ev["dur"]):
                out.append(ev)
    samples: dict[tuple[int, str, int], dict] = {}
    for t, c, track, held, cap in memory_samples(run, hi):
        if c not in pid_of:
            continue
        args = {"held": held, **({"capacity": cap} if math.isfinite(cap) else {})}
        samples[(c, track, ns(t))] = args            # the last value at an instant wins
    for (c, track, n), args in sorted(samples.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        if part is None or part.overlaps(ts(n)):
            out.append({"name": track, "ph": "C", "pid": pid_of[c], "tid": first_tid + len(rows), "ts": ts(n),
                        "args": args})
    used = used_rows(run) if pid_of else set()
    return out, {tid: name for name, tid in rows.items() if name in used}


def used_rows(run: Run) -> set[str]:
    """The pipe rows that carry a segment of the run."""
    if not has_pipes(run):
        return set()
    nodes = run.template.nodes
    first: dict[int, float] = {}
    for k, x in zip(run.traced().node, run.traced().stretch):
        first.setdefault(k, x)
    out = set()
    for k, x in first.items():
        nd = nodes[k]
        if nd.kind != PHASE or nd.pipe is None or nd.pipe.io_us <= 0:
            continue
        for pipe, _tile, a, b in nd.pipe.schedule(x, run.serial):
            if pipe != "compute" and b > a:
                out.add(f"{'Cube' if nd.resource == CUBE else 'Vec'} {PIPE_NAME[pipe]}")
    return out
