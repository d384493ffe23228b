"""How much a run overlaps, by interval merging over its trace.

- Cube/Vector concurrency: the time both units of a core are busy at once (merged busy intervals, intersected).
- Idle gaps: each unit's gaps between merged busy intervals within its core's span.
- Exposed sync time: a hand-off in flight while Cube and Vector both idle.
- The critical path: walked back from the last event to the first, through whichever predecessor freed
  each event last (a dependency, the state, a write-after-read edge, the slot grant or the unit itself);
  what it is made of says what to shorten (sync time on it is the hand-off cost that no overlap hides).
- The steady-state period per chunk (from the last half of the chunks) against its bound: the busiest
  resource's work per chunk, or the dependency cycle per chunk through the state, whichever is longer.
  The bound holds in the long run; over a handful of chunks the measured period may still include the
  pipeline's fill and come out below it.

Generic: any program, any profile, serial or pipelined. Times in microseconds.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import asdict, dataclass, field

from npusim.model.engine import PHASE, Run, core_order

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
class Step:
    """One event on the critical path and the part of it the path runs through."""
    kind: str                 # "phase", "sync", "state" or "wait" (nothing on the path ran)
    index: int                # node index in the template (-1 for a wait)
    name: str
    label: str
    unit: str
    core: int
    seq: int
    chunk: int
    start: float
    until: float              # the path leaves this event here (its end, or its busy_end for a unit link)
    via: str                  # how the next event on the path waited for it: "data", "state", "war", "slot",
                              # "unit" (the same unit or link was busy), "order" (serial mode)


@dataclass(frozen=True)
class CriticalPath:
    length_us: float                   # = the makespan
    by_kind: dict[str, float]          # "cube", "vec", "sync transfer", "sync latency", "wait"
    sync_us: float                     # transfer + latency of hand-offs on the path
    syncs: int                         # hand-offs on the path
    steps: tuple[Step, ...] = field(repr=False, default=())

    @property
    def sync_fraction(self) -> float:
        return self.sync_us / self.length_us if self.length_us else 0.0


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
        d = asdict(self)
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
    """All the overlap metrics of a run with a trace (computed once per run: the report, the JSON and the
    plots all ask)."""
    hit = _cache.get(id(run))
    if hit is not None and hit[0]() is run and hit[1] == len(run.trace or ()):
        return hit[2]
    result = _analyse(run)
    key = id(run)
    _cache[key] = (weakref.ref(run, lambda _ref, key=key: _cache.pop(key, None)), len(run.traced()), result)
    return result


def _analyse(run: Run) -> Overlap:
    events = _events(run)
    busy = busy_intervals(run, events)
    inflight = inflight_intervals(run, events)
    cores = sorted({e.core for e in events})
    spans = {c: (min(e.start for e in events if e.core == c), max(e.end for e in events if e.core == c))
             for c in cores}
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
    busiest = max(loads, key=loads.get)
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


def _engine_order(keys, interleave: int) -> tuple[list[tuple[int, int]], dict]:
    """A core's (seq, chunk) pairs in the engine's order, and each one's predecessor in its lane."""
    count: dict[int, int] = {}
    for s, _ in keys:
        count[s] = count.get(s, 0) + 1
    order, lane_prev, last = [], {}, {}
    for s, t, lane in core_order(sorted(count), count, interleave):
        lane_prev[(s, t)], last[lane] = last.get(lane), (s, t)
        order.append((s, t))
    return order, lane_prev


def critical_path(run: Run, events=None) -> CriticalPath:
    """Walk back from the event that ends last through the predecessor that freed each event last."""
    tpl, events = run.template, events or _events(run)
    if not events:
        return CriticalPath(0.0, {}, 0.0, 0)
    n = tpl.n
    at = {(e.seq, e.chunk, e.index): e for e in events}
    insts: dict[int, list[tuple[int, int]]] = {}       # per core: (seq, chunk) in the engine's order
    for e in events:
        insts.setdefault(e.core, set()).add((e.seq, e.chunk))
    orders = {c: _engine_order(v, run.interleave) for c, v in insts.items()}
    insts = {c: o for c, (o, _) in orders.items()}
    war_prev = {c: w for c, (_, w) in orders.items()}
    pos = {(c, key): i for c, keys in insts.items() for i, key in enumerate(keys)}
    state_in: list[list[int]] = [[] for _ in range(n)]
    war_in: list[list[int]] = [[] for _ in range(n)]
    for a, b in tpl.state_edges:
        state_in[b].append(a)
    for a, b in tpl.war_edges:
        war_in[b].append(a)
    # the same unit or link: the event before on it, by start time
    prev_on_unit = {}
    by_unit: dict[tuple[int, str], list] = {}
    for e in events:
        by_unit.setdefault((e.core, e.unit), []).append(e)
    for lst in by_unit.values():
        lst.sort(key=lambda e: (e.start, e.busy_end))
        for a, b in zip(lst, lst[1:]):
            prev_on_unit[id(b)] = a
    # slot grants: the j-th slot release on a core (in completion order) grants instance j + slots
    grant_from: dict[tuple[int, int], object] = {}
    if not run.serial and tpl.slot_release is not None:
        releases: dict[int, list] = {}
        tr = run.traced()
        for k, core, seq, chunk in zip(tr.node, tr.core, tr.seq, tr.chunk):
            if k == tpl.slot_release:
                releases.setdefault(core, []).append(at[(seq, chunk, k)])
        for core, lst in releases.items():
            slots = run.profile.workspace.slots * run.lanes(core)  # the profile's pair for each lane
            for j, e in enumerate(lst):
                if j + slots < len(insts[core]):
                    grant_from[(core, j + slots)] = e

    def preds(e):
        """(ready time, event, via) for everything e waited for."""
        out = []
        i = pos[(e.core, (e.seq, e.chunk))]
        if run.serial:
            k = e.index - 1
            if k >= 0:
                p = at.get((e.seq, e.chunk, k))
            elif i > 0:
                s, t = insts[e.core][i - 1]
                p = at.get((s, t, n - 1))
            else:
                p = None
            return [(p.end, p, "order")] if p is not None else []
        for d in tpl.nodes[e.index].deps:
            p = at[(e.seq, e.chunk, d)]
            out.append((p.end, p, "data"))
        w = war_prev[e.core][(e.seq, e.chunk)]             # the lane's instance before
        for a in war_in[e.index] if w is not None else ():
            p = at[(w[0], w[1], a)]
            out.append((p.end, p, "war"))
        for a in state_in[e.index] if e.chunk > 0 else ():  # the sequence's chunk before
            p = at[(e.seq, e.chunk - 1, a)]
            out.append((p.end, p, "state"))
        if e.index == 0 and (e.core, i) in grant_from:
            p = grant_from[(e.core, i)]
            out.append((p.end, p, "slot"))
        p = prev_on_unit.get(id(e))
        if p is not None:
            out.append((p.busy_end, p, "unit"))
        return out

    rank = {"data": 0, "state": 1, "war": 2, "slot": 3, "order": 4, "unit": 5}
    cur = max(events, key=lambda e: (e.end, e.start))
    until, via = cur.end, "end"
    steps = []
    while True:
        steps.append(Step(cur.kind, cur.index, cur.name, cur.label, cur.unit, cur.core, cur.seq, cur.chunk, cur.start,
                          until, via))
        cands = [c for c in preds(cur) if c[0] <= cur.start + 1e-9]
        if not cands:
            break
        ready, p, via = max(cands, key=lambda c: (round(c[0], 9), -rank[c[2]]))
        if cur.start - ready > 1e-9:              # nothing on the path ran: the event waited
            steps.append(Step("wait", -1, "wait", "", "", cur.core, cur.seq, cur.chunk, ready, cur.start, via))
        cur, until = p, ready
    steps.reverse()
    by_kind: dict[str, float] = {}
    sync_us, syncs = 0.0, 0
    for s in steps:
        if s.kind == PHASE:
            _add(by_kind, s.unit, s.until - s.start)
        elif s.kind == "wait":
            _add(by_kind, "wait", s.until - s.start)
        else:
            e = at[(s.seq, s.chunk, s.index)]
            transfer = min(s.until, e.busy_end) - s.start
            _add(by_kind, "sync transfer", transfer)
            _add(by_kind, "sync latency", s.until - s.start - transfer)
            sync_us += s.until - s.start
            syncs += 1
    first = min(e.start for e in events)
    if steps[0].start > first:
        _add(by_kind, "wait", steps[0].start - first)
    return CriticalPath(sum(by_kind.values()), by_kind, sync_us, syncs, tuple(steps))


def _add(d: dict, key: str, value: float) -> None:
    d[key] = d.get(key, 0.0) + value


def _unit_order(unit: str):
    return ({CUBE_UNIT: 0, VEC_UNIT: 1}.get(unit, 2), unit)


def _events(run: Run):
    return run.traced().events()
