"""The critical path of a run: walked back from the last event to the first, through whichever predecessor
freed each event last (a dependency, the state, a write-after-read edge, the slot grant or the unit itself);
what it is made of says what to shorten (sync time on it is the hand-off cost that no overlap hides)."""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

from npusim.model.engine import PHASE, Run, core_order


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


def _engine_order(keys, interleave: int) -> tuple[list[tuple[int, int]], dict]:
    """A core's (seq, chunk) pairs in the engine's order, and each one's predecessor in its lane."""
    count: dict[int, int] = {}
    for s, _ in keys:
        count[s] = count.get(s, 0) + 1
    order: list[tuple[int, int]] = []
    lane_prev: dict[tuple[int, int], tuple[int, int] | None] = {}
    last: dict[int, tuple[int, int]] = {}
    for s, t, lane in core_order(sorted(count), count, interleave):
        lane_prev[(s, t)], last[lane] = last.get(lane), (s, t)
        order.append((s, t))
    return order, lane_prev


def critical_path(run: Run, events=None) -> CriticalPath:
    """Walk back from the event that ends last through the predecessor that freed each event last."""
    events = events or run.timed().events()
    if not events:
        return CriticalPath(0.0, {}, 0.0, 0)
    waits = _Waits(run, events)
    return _tally(_walk_back(events, waits), waits.at, events)


class _Waits:
    """What each event of a run waited for: its data, the state, the lane's write-after-read edges, a slot,
    the order of a serial run, and the event before it on its unit or link."""

    def __init__(self, run: Run, events: list) -> None:
        tpl = run.template
        self.run, self.tpl, self.n = run, tpl, tpl.n
        self.at = dict(zip(map(attrgetter("seq", "chunk", "index"), events), events))
        on_core: dict[int, set[tuple[int, int]]] = {}
        for c, s, t in set(map(attrgetter("core", "seq", "chunk"), events)):
            on_core.setdefault(c, set()).add((s, t))
        orders = {c: _engine_order(v, run.interleave) for c, v in on_core.items()}
        # per core: (seq, chunk) in the engine's order
        self.insts = {c: o for c, (o, _) in orders.items()}
        self.war_prev = {c: w for c, (_, w) in orders.items()}
        self.pos = {(c, key): i for c, keys in self.insts.items() for i, key in enumerate(keys)}
        self.state_in: list[list[int]] = [[] for _ in range(self.n)]
        self.war_in: list[list[int]] = [[] for _ in range(self.n)]
        for a, b in tpl.state_edges:
            self.state_in[b].append(a)
        for a, b in tpl.war_edges:
            self.war_in[b].append(a)
        self.prev_on_unit = self._prev_on_unit(events)
        self.grant_from = self._slot_grants()

    @staticmethod
    def _prev_on_unit(events: list) -> dict:
        """The same unit or link: the event before on it, by start time."""
        prev: dict = {}
        by_unit: dict[tuple[int, str], list] = {}
        for e in events:
            by_unit.setdefault((e.core, e.unit), []).append(e)
        by_time = attrgetter("start", "busy_end")
        for lst in by_unit.values():
            lst.sort(key=by_time)
            prev.update(zip(map(id, lst[1:]), lst))
        return prev

    def _slot_grants(self) -> dict:
        """Slot grants: the j-th slot release on a core (in completion order) grants instance j + slots."""
        run, tpl = self.run, self.tpl
        grant_from: dict[tuple[int, int], object] = {}
        if run.serial or tpl.slot_release is None:
            return grant_from
        releases: dict[int, list] = {}
        tr = run.timed()
        for k, core, seq, chunk in zip(tr.node, tr.core, tr.seq, tr.chunk):
            if k == tpl.slot_release:
                releases.setdefault(core, []).append(self.at[(seq, chunk, k)])
        for core, lst in releases.items():
            slots = run.profile.workspace.slots * run.lanes(core)  # the profile's pair for each lane
            for j, e in enumerate(lst):
                if j + slots < len(self.insts[core]):
                    grant_from[(core, j + slots)] = e
        return grant_from

    def of(self, e) -> list:
        """(ready time, event, via) for everything e waited for."""
        at = self.at
        i = self.pos[(e.core, (e.seq, e.chunk))]
        if self.run.serial:
            return self._serial_order(e, i)
        out = []
        for d in self.tpl.nodes[e.index].deps:
            p = at[(e.seq, e.chunk, d)]
            out.append((p.end, p, "data"))
        w = self.war_prev[e.core][(e.seq, e.chunk)]             # the lane's instance before
        for a in self.war_in[e.index] if w is not None else ():
            p = at[(w[0], w[1], a)]
            out.append((p.end, p, "war"))
        for a in self.state_in[e.index] if e.chunk > 0 else ():  # the sequence's chunk before
            p = at[(e.seq, e.chunk - 1, a)]
            out.append((p.end, p, "state"))
        if e.index == 0 and (e.core, i) in self.grant_from:
            p = self.grant_from[(e.core, i)]
            out.append((p.end, p, "slot"))
        p = self.prev_on_unit.get(id(e))
        if p is not None:
            out.append((p.busy_end, p, "unit"))
        return out

    def _serial_order(self, e, i: int) -> list:
        """A serial run: the node before in the chunk, or the last node of the core's instance before."""
        k = e.index - 1
        if k >= 0:
            p = self.at.get((e.seq, e.chunk, k))
        elif i > 0:
            s, t = self.insts[e.core][i - 1]
            p = self.at.get((s, t, self.n - 1))
        else:
            p = None
        return [(p.end, p, "order")] if p is not None else []


_RANK = {"data": 0, "state": 1, "war": 2, "slot": 3, "order": 4, "unit": 5}


def _walk_back(events: list, waits: _Waits) -> list[Step]:
    """From the event that ends last, each time through the wait that freed the event last (ties: data
    first), with a wait step where nothing on the path ran."""
    cur = max(events, key=attrgetter("end", "start"))
    until, via = cur.end, "end"
    steps = []
    while True:
        steps.append(Step(cur.kind, cur.index, cur.name, cur.label, cur.unit, cur.core, cur.seq, cur.chunk, cur.start,
                          until, via))
        cands = [c for c in waits.of(cur) if c[0] <= cur.start + 1e-9]
        if not cands:
            break
        ready, p, via = max(cands, key=lambda c: (round(c[0], 9), -_RANK[c[2]]))
        if cur.start - ready > 1e-9:              # nothing on the path ran: the event waited
            steps.append(Step("wait", -1, "wait", "", "", cur.core, cur.seq, cur.chunk, ready, cur.start, via))
        cur, until = p, ready
    steps.reverse()
    return steps


def _tally(steps: list[Step], at: dict, events: list) -> CriticalPath:
    """The path's time by kind: each unit's phases, sync transfer and latency, and waiting."""
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
    first = min(map(attrgetter("start"), events))
    if steps[0].start > first:
        _add(by_kind, "wait", steps[0].start - first)
    return CriticalPath(sum(by_kind.values()), by_kind, sync_us, syncs, tuple(steps))


def _add(d: dict, key: str, value: float) -> None:
    d[key] = d.get(key, 0.0) + value
