"""How much a run overlaps, by interval merging over its trace.

- Cube/Vector concurrency: the time both units of a core are busy at once (merged busy intervals, intersected).
- Idle gaps: each unit's gaps between merged busy intervals within its core's span.
- Exposed sync time: a hand-off in flight while Cube and Vector both idle.
- The critical path (critical_path.py).
- The steady-state period per chunk (from the last half of the chunks) against its bound: the busiest
  resource's work per chunk, or the dependency cycle per chunk through the state, whichever is longer.
  The bound holds in the long run; over a handful of chunks the measured period may still include the
  pipeline's fill and come out below it.

Generic: any program, any profile, serial or pipelined. Times in microseconds.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import asdict, dataclass, replace

from npusim.model.engine import PHASE, Run
from npusim.output.critical_path import CriticalPath, critical_path

Interval = tuple[float, float]
CUBE_UNIT, VEC_UNIT = "cube", "vec"


# ---- interval arithmetic on sorted, disjoint lists -------------------------------------------------------

def merge(intervals) -> list[Interval]:
    """Union of intervals as a sorted list of disjoint ones (touching intervals join; empty ones vanish)."""
    out: list[list[float]] = []
    for a, b in sorted((a, b) for a, b in intervals if b > a):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1][1] = b
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def total(merged: list[Interval]) -> float:
    return sum(b - a for a, b in merged)


def intersect(x: list[Interval], y: list[Interval]) -> list[Interval]:
    """Intersection of two merged lists."""
    out, i, j = [], 0, 0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if b > a:
            out.append((a, b))
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(x: list[Interval], y: list[Interval]) -> list[Interval]:
    """x minus y, both merged."""
    out, j = [], 0
    for a, b in x:
        while j < len(y) and y[j][1] <= a:
            j += 1
        k, cur = j, a
        while k < len(y) and y[k][0] < b:
            if y[k][0] > cur:
                out.append((cur, y[k][0]))
            cur = max(cur, y[k][1])
            k += 1
        if cur < b:
            out.append((cur, b))
    return out


def gaps(merged: list[Interval], lo: float, hi: float) -> list[Interval]:
    """The parts of [lo, hi] that `merged` leaves uncovered."""
    return subtract([(lo, hi)], merged) if hi > lo else []


# ---- metrics --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class UnitIdle:
    unit: str                 # "cube", "vec" (every Vector unit: they run in lockstep), "link:vec->cube", ...
    busy_us: float            # merged, summed over cores
    idle_us: float            # within each core's span, summed over cores
    gaps: int
    longest_gap_us: float
    longest_gap_at_us: float  # where the longest gap starts
    median_gap_us: float


@dataclass(frozen=True)
class Overlap:
    serial: bool
    cores: int
    span_us: float                     # sum over cores of (last end - first start)
    cube_busy_us: float
    vec_busy_us: float
    concurrent_us: float               # Cube and Vector busy at once, summed over cores
    exposed_sync_us: float             # a hand-off in flight while Cube and Vector both idle
    idle: dict[str, UnitIdle]
    critical: CriticalPath
    period_us: float | None            # steady-state time per chunk (None with a single chunk)
    period_chunks: tuple[int, int] | None   # the chunks it is measured over
    period_bound_us: float             # no schedule beats it per chunk
    period_bound_by: str               # what sets the bound: a resource, or "state chain"

    @property
    def concurrent_fraction(self) -> float:
        """Share of the span during which Cube and Vector both work."""
        return self.concurrent_us / self.span_us if self.span_us else 0.0

    @property
    def overlap_ratio(self) -> float:
        """Concurrent time over the less busy unit's time: 1 means the lighter unit is fully hidden."""
        lighter = min(self.cube_busy_us, self.vec_busy_us)
        return self.concurrent_us / lighter if lighter else 0.0

    @property
    def period_efficiency(self) -> float | None:
        return self.period_bound_us / self.period_us if self.period_us else None

    def to_dict(self, steps: bool = False) -> dict:
        d = asdict(self if steps else replace(self, critical=replace(self.critical, steps=())))  # no copy of them
        if not steps:
            d["critical"].pop("steps")
        d.update(concurrent_fraction=self.concurrent_fraction, overlap_ratio=self.overlap_ratio,
                 period_efficiency=self.period_efficiency)
        d["critical"]["sync_fraction"] = self.critical.sync_fraction
        return d


def busy_intervals(run: Run, events=None) -> dict[tuple[int, str], list[Interval]]:
    """Merged busy intervals per (core, unit or link): phases hold their unit to `end`, syncs their link to
    `busy_end` (the fixed latency after it holds nothing)."""
    raw: dict[tuple[int, str], list[Interval]] = {}
    for e in events or _events(run):
        raw.setdefault((e.core, e.unit), []).append((e.start, e.end if e.kind == PHASE else e.busy_end))
    return {k: merge(v) for k, v in raw.items()}


def inflight_intervals(run: Run, events=None) -> dict[int, list[Interval]]:
    """Merged intervals per core during which some hand-off is under way (transfer or fixed latency)."""
    raw: dict[int, list[Interval]] = {}
    for e in events or _events(run):
        if e.kind != PHASE:
            raw.setdefault(e.core, []).append((e.start, e.end))
    return {k: merge(v) for k, v in raw.items()}


_cache: dict[int, tuple] = {}        # id(run) -> (weak reference, events seen, metrics)


def analyse(run: Run) -> Overlap:
    """All the overlap metrics of a run with a trace or a timeline (computed once per run: the report, the JSON
    and the plots all ask)."""
    hit = _cache.get(id(run))
    if hit is not None and hit[0]() is run and hit[1] == len(run.timed()):
        return hit[2]
    result = _analyse(run)
    key = id(run)

    def forget(_ref: object) -> None:
        _cache.pop(key, None)
    _cache[key] = (weakref.ref(run, forget), len(run.timed()), result)
    return result


def _analyse(run: Run) -> Overlap:
    events = _events(run)
    busy = busy_intervals(run, events)
    inflight = inflight_intervals(run, events)
    cores = sorted({e.core for e in events})
    spans: dict[int, tuple[float, float]] = {}
    for e in events:                      # each core's first start and last end, in one pass
        lo, hi = spans.get(e.core, (e.start, e.end))
        spans[e.core] = (min(lo, e.start), max(hi, e.end))
    units = sorted({u for _, u in busy}, key=_unit_order)
    concurrent = exposed = 0.0
    for c in cores:
        cube, vec = busy.get((c, CUBE_UNIT), []), busy.get((c, VEC_UNIT), [])
        concurrent += total(intersect(cube, vec))
        exposed += total(subtract(inflight.get(c, []), merge(cube + vec)))
    idle = {}
    for u in units:
        all_gaps = []
        for c in cores:
            all_gaps += gaps(busy.get((c, u), []), *spans[c])
        lengths = sorted(b - a for a, b in all_gaps)
        longest = max(all_gaps, key=lambda g: g[1] - g[0], default=(0.0, 0.0))
        idle[u] = UnitIdle(u, sum(total(busy.get((c, u), [])) for c in cores), sum(lengths), len(lengths),
                           longest[1] - longest[0], longest[0], lengths[len(lengths) // 2] if lengths else 0.0)
    period, period_chunks = steady_period(run, events)
    bound, bound_by = period_bound(run)
    return Overlap(run.serial, len(cores), sum(b - a for a, b in spans.values()),
                   idle[CUBE_UNIT].busy_us if CUBE_UNIT in idle else 0.0,
                   idle[VEC_UNIT].busy_us if VEC_UNIT in idle else 0.0,
                   concurrent, exposed, idle, critical_path(run, events), period, period_chunks, bound, bound_by)


def steady_period(run: Run, events=None) -> tuple[float | None, tuple[int, int] | None]:
    """Time per chunk over the last half of the chunks: (end of the last chunk - end of the middle one) /
    chunks between, averaged over the sequences of at least two chunks (each over its own chunks in a
    variable-length batch). None when no sequence has two; the chunks are those of the longest sequence."""
    ends: dict[tuple[int, int], float] = {}
    for e in events or _events(run):
        key = (e.seq, e.chunk)
        if e.end > ends.get(key, -math.inf):
            ends[key] = e.end
    count: dict[int, int] = {}
    for s, t in ends:
        count[s] = max(count.get(s, 0), t + 1)
    periods = [(ends[(s, n - 1)] - ends[(s, (n - 1) // 2)]) / (n - 1 - (n - 1) // 2)
               for s, n in sorted(count.items()) if n >= 2]
    longest = max(count.values(), default=0)
    if not periods:
        return None, None
    return sum(periods) / len(periods), ((longest - 1) // 2, longest - 1)


def period_bound(run: Run) -> tuple[float, str]:
    """A lower bound on the steady-state time per chunk: the busiest resource's work per chunk, or the
    dependency cycle per chunk through the state. In serial mode nothing overlaps: every node's time."""
    nodes = run.template.nodes
    if run.serial:
        return sum(n.busy_us + n.delay_us for n in nodes), "serial: every node"
    loads: dict[str, float] = {}
    for n in nodes:
        loads[n.resource] = loads.get(n.resource, 0.0) + n.busy_us
    busiest = max(loads, key=lambda r: loads[r])
    cycle = state_cycle_us(run.template)
    return (cycle, "state chain") if cycle > loads[busiest] else (loads[busiest], busiest)


def state_cycle_us(tpl, warm: int = 8, measure: int = 16) -> float:
    """Mean growth per chunk of the longest dependency path through the state (intra-chunk and state edges),
    measured after `warm` chunks: the period that no amount of overlap can beat."""
    n = tpl.n
    state_in: list[list[int]] = [[] for _ in range(n)]
    for a, b in tpl.state_edges:
        state_in[b].append(a)
    prev: list[float] | None = None
    marks = []
    for t in range(warm + measure + 1):
        fin = [0.0] * n
        for node in tpl.nodes:                       # program order is a topological order
            ready = max((fin[d] for d in node.deps), default=0.0)
            if prev is not None and state_in[node.index]:
                ready = max(ready, max(prev[a] for a in state_in[node.index]))
            dur = (node.busy_first_us + node.delay_first_us) if t == 0 else (node.busy_us + node.delay_us)
            fin[node.index] = ready + dur
        prev = fin
        if t in (warm, warm + measure):
            marks.append(max(fin))
    return (marks[1] - marks[0]) / measure if tpl.state_edges else 0.0


def _unit_order(unit: str):
    return ({CUBE_UNIT: 0, VEC_UNIT: 1}.get(unit, 2), unit)


def _events(run: Run):
    return run.timed().events()
