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

import weakref
from dataclasses import asdict, dataclass, replace

import numpy as np

from npusim.model.engine import PHASE, Run
from npusim.model.trace import Columns
from npusim.output.critical_path import CriticalPath, critical_path

Interval = tuple[float, float]
CUBE_UNIT, VEC_UNIT = "cube", "vec"


# ---- interval arithmetic on sorted, disjoint lists -------------------------------------------------------

def merge(intervals) -> list[Interval]:
    """Union of intervals as a sorted list of disjoint ones (touching intervals join; empty ones vanish)."""
    ivs = sorted([(a, b) for a, b in intervals if b > a])
    if not ivs:
        return []
    out: list[Interval] = []
    lo, hi = ivs[0]
    for a, b in ivs:
        if a > hi:
            out.append((lo, hi))
            lo, hi = a, b
        elif b > hi:
            hi = b
    out.append((lo, hi))
    return out


def _merge_sorted(a: np.ndarray, b: np.ndarray, at: np.ndarray, starts: list) -> list[Interval]:
    """merge() of intervals already sorted by (start, end), none empty: the same union, vectorised; each
    start is `starts[at]`, the value as given."""
    reach = np.maximum.accumulate(b)                  # each run's end: the largest end so far
    first = np.flatnonzero(np.r_[True, a[1:] > reach[:-1]])
    last = np.r_[first[1:] - 1, len(a) - 1]
    return list(zip([starts[i] for i in at[first].tolist()], reach[last].tolist()))


def _merge_groups(key: np.ndarray, a: np.ndarray, b: np.ndarray, starts: list) -> dict[int, list[Interval]]:
    """merge() of each group's intervals, by group key (a key whose intervals are all empty maps to []);
    `starts` are the starts as given (a, as floats)."""
    out: dict[int, list[Interval]] = {k: [] for k in np.unique(key).tolist()}
    at = np.flatnonzero(b > a)
    at = at[np.lexsort((b[at], a[at], key[at]))]
    key, a, b = key[at], a[at], b[at]
    cuts = np.flatnonzero(key[1:] != key[:-1]) + 1
    for lo, hi in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(key)].tolist()):
        if hi > lo:
            out[int(key[lo])] = _merge_sorted(a[lo:hi], b[lo:hi], at[lo:hi], starts)
    return out


def total(merged: list[Interval]) -> float:
    return sum(b - a for a, b in merged)


def intersect(x: list[Interval], y: list[Interval]) -> list[Interval]:
    """Intersection of two merged lists."""
    out, i, j, nx, ny = [], 0, 0, len(x), len(y)
    while i < nx and j < ny:
        (xa, xb), (ya, yb) = x[i], y[j]
        a = ya if ya > xa else xa                 # max(xa, ya), min(xb, yb): the same one on ties
        b = yb if yb < xb else xb
        if b > a:
            out.append((a, b))
        if xb < yb:
            i += 1
        else:
            j += 1
    return out


def subtract(x: list[Interval], y: list[Interval]) -> list[Interval]:
    """x minus y, both merged."""
    out, j, ny = [], 0, len(y)
    for a, b in x:
        while j < ny and y[j][1] <= a:
            j += 1
        k, cur = j, a
        while k < ny and y[k][0] < b:
            ya, yb = y[k]
            if ya > cur:
                out.append((cur, ya))
            if yb > cur:
                cur = yb
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


def busy_intervals(run: Run, cols: Columns | None = None) -> dict[tuple[int, str], list[Interval]]:
    """Merged busy intervals per (core, unit or link): phases hold their unit to `end`, syncs their link to
    `busy_end` (the fixed latency after it holds nothing)."""
    cols = cols if cols is not None else Columns(run.timed())
    if not cols.float_ends:
        return _merged_by(_events(run), lambda e: (e.core, e.unit), lambda e: e.end if e.kind == PHASE else e.busy_end)
    n = len(cols.units)
    merged = _merge_groups(cols.core * n + cols.unit, cols.start, np.where(cols.phase, cols.end, cols.busy_end),
                           cols.trace.start)
    return {(k // n, cols.units[k % n]): v for k, v in merged.items()}


def inflight_intervals(run: Run, cols: Columns | None = None) -> dict[int, list[Interval]]:
    """Merged intervals per core during which some hand-off is under way (transfer or fixed latency)."""
    cols = cols if cols is not None else Columns(run.timed())
    if not cols.float_ends:
        return _merged_by([e for e in _events(run) if e.kind != PHASE], lambda e: e.core, lambda e: e.end)
    sync = np.flatnonzero(~cols.phase)
    starts = cols.trace.start
    return _merge_groups(cols.core[sync], cols.start[sync], cols.end[sync], [starts[i] for i in sync.tolist()])


def _merged_by(events: list, key, end) -> dict:
    """merge() of the events' intervals from their start to end(e), by key(e)."""
    raw: dict = {}
    for e in events:
        raw.setdefault(key(e), []).append((e.start, end(e)))
    return {k: merge(v) for k, v in raw.items()}


def _spans(cols: Columns) -> dict[int, tuple[float, float]]:
    """Each core's first start and last end (each the trace's own value from the first event in time order
    that has it), the cores in the order they first start (ties: by core)."""
    out = {}
    tr = cols.trace
    for c in np.unique(cols.core).tolist():
        on = cols.core == c
        first = cols.first(on & (cols.start == cols.start[on].min()))
        out[c] = (tr.start[first], tr.end[cols.first(on & (cols.end == cols.end[on].max()))])
    return dict(sorted(out.items(), key=lambda kv: (kv[1][0], kv[0])))


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
    cols = Columns(run.timed())
    busy = busy_intervals(run, cols)
    inflight = inflight_intervals(run, cols)
    spans = _spans(cols)
    cores = sorted(spans)
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
    period, period_chunks = steady_period(run, cols)
    bound, bound_by = period_bound(run)
    return Overlap(run.serial, len(cores), sum(b - a for a, b in spans.values()),
                   idle[CUBE_UNIT].busy_us if CUBE_UNIT in idle else 0.0,
                   idle[VEC_UNIT].busy_us if VEC_UNIT in idle else 0.0,
                   concurrent, exposed, idle, critical_path(run, cols), period, period_chunks, bound, bound_by)


def steady_period(run: Run, cols: Columns | None = None) -> tuple[float | None, tuple[int, int] | None]:
    """Time per chunk over the last half of the chunks: (end of the last chunk - end of the middle one) /
    chunks between, averaged over the sequences of at least two chunks (each over its own chunks in a
    variable-length batch). None when no sequence has two; the chunks are those of the longest sequence."""
    ends = _chunk_ends(cols if cols is not None else Columns(run.timed()))
    count: dict[int, int] = {}
    for s, t in ends:
        count[s] = max(count.get(s, 0), t + 1)
    periods = [(ends[(s, n - 1)] - ends[(s, (n - 1) // 2)]) / (n - 1 - (n - 1) // 2)
               for s, n in sorted(count.items()) if n >= 2]
    longest = max(count.values(), default=0)
    if not periods:
        return None, None
    return sum(periods) / len(periods), ((longest - 1) // 2, longest - 1)


def _chunk_ends(cols: Columns) -> dict[tuple[int, int], float]:
    """Each (sequence, chunk)'s last end."""
    if not len(cols.end):
        return {}
    width = int(cols.chunk.max()) + 1
    key = cols.seq * width + cols.chunk
    order = np.lexsort((cols.end, key))                 # by (sequence, chunk), then end: each key's last is its max
    key, end = key[order], cols.end[order]
    last = np.r_[np.flatnonzero(key[1:] != key[:-1]), len(key) - 1]
    return {(k // width, k % width): e for k, e in zip(key[last].tolist(), end[last].tolist())}


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
