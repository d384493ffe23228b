"""The critical path of a run: walked back from the last event to the first, through whichever predecessor
freed each event last (a dependency, the state, a write-after-read edge, the slot grant or the unit itself);
what it is made of says what to shorten (sync time on it is the hand-off cost that no overlap hides)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from npusim.model.engine import PHASE, Run, core_order
from npusim.model.trace import Columns


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


def critical_path(run: Run, cols: Columns | None = None) -> CriticalPath:
    """Walk back from the event that ends last through the predecessor that freed each event last."""
    cols = cols if cols is not None else Columns(run.timed())
    if not len(cols):
        return CriticalPath(0.0, {}, 0.0, 0)
    waits = _Waits(run, cols)
    return _tally(_walk_back(cols, waits), waits.at, cols)


class _Waits:
    """What each event of a run (its position in the trace) waited for: its data, the state, the lane's
    write-after-read edges, a slot, the order of a serial run, and the event before it on its unit or link."""

    def __init__(self, run: Run, cols: Columns) -> None:
        tpl, tr = run.template, cols.trace
        self.run, self.tpl, self.n, self.tr = run, tpl, tpl.n, tr
        self.at = dict(zip(zip(tr.seq, tr.chunk, tr.node), range(len(cols))))
        on_core: dict[int, set[tuple[int, int]]] = {}
        for c, s, t in set(zip(tr.core, tr.seq, tr.chunk)):
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
        self.prev_on_unit = self._prev_on_unit(cols)
        self.grant_from = self._slot_grants(cols)

    @staticmethod
    def _prev_on_unit(cols: Columns) -> list[int]:
        """The same unit or link: the event before on it, by start time (then busy end, then the order of
        Trace.events()); -1 for the first."""
        order = np.lexsort((cols.pos, cols.node, cols.chunk, cols.seq, cols.busy_end, cols.start, cols.unit,
                            cols.core))
        same = (cols.core[order][1:] == cols.core[order][:-1]) & (cols.unit[order][1:] == cols.unit[order][:-1])
        prev = np.full(len(cols), -1, dtype=np.int64)
        prev[order[1:][same]] = order[:-1][same]
        return prev.tolist()

    def _slot_grants(self, cols: Columns) -> dict:
        """Slot grants: the j-th slot release on a core (in completion order) grants instance j + slots."""
        run, tpl, tr = self.run, self.tpl, self.tr
        grant_from: dict[tuple[int, int], int] = {}
        if run.serial or tpl.slot_release is None:
            return grant_from
        releases: dict[int, list] = {}
        for i in np.flatnonzero(cols.node == tpl.slot_release).tolist():     # in completion order
            releases.setdefault(tr.core[i], []).append(self.at[(tr.seq[i], tr.chunk[i], tr.node[i])])
        for core, lst in releases.items():
            slots = run.profile.workspace.slots * run.lanes(core)  # the profile's pair for each lane
            for j, e in enumerate(lst):
                if j + slots < len(self.insts[core]):
                    grant_from[(core, j + slots)] = e
        return grant_from

    def of(self, e: int) -> list:
        """(ready time, event, via) for everything e waited for."""
        at, tr = self.at, self.tr
        core, seq, chunk, index = tr.core[e], tr.seq[e], tr.chunk[e], tr.node[e]
        i = self.pos[(core, (seq, chunk))]
        if self.run.serial:
            return self._serial_order(e, i)
        out = []
        for d in self.tpl.nodes[index].deps:
            p = at[(seq, chunk, d)]
            out.append((tr.end[p], p, "data"))
        w = self.war_prev[core][(seq, chunk)]                   # the lane's instance before
        for a in self.war_in[index] if w is not None else ():
            p = at[(w[0], w[1], a)]
            out.append((tr.end[p], p, "war"))
        for a in self.state_in[index] if chunk > 0 else ():      # the sequence's chunk before
            p = at[(seq, chunk - 1, a)]
            out.append((tr.end[p], p, "state"))
        if index == 0 and (core, i) in self.grant_from:
            p = self.grant_from[(core, i)]
            out.append((tr.end[p], p, "slot"))
        p = self.prev_on_unit[e]
        if p >= 0:
            out.append((tr.busy_end[p], p, "unit"))
        return out

    def _serial_order(self, e: int, i: int) -> list:
        """A serial run: the node before in the chunk, or the last node of the core's instance before."""
        tr = self.tr
        k = tr.node[e] - 1
        if k >= 0:
            p = self.at.get((tr.seq[e], tr.chunk[e], k))
        elif i > 0:
            s, t = self.insts[tr.core[e]][i - 1]
            p = self.at.get((s, t, self.n - 1))
        else:
            p = None
        return [(tr.end[p], p, "order")] if p is not None else []


_RANK = {"data": 0, "state": 1, "war": 2, "slot": 3, "order": 4, "unit": 5}


def _walk_back(cols: Columns, waits: _Waits) -> list[Step]:
    """From the event that ends last, each time through the wait that freed the event last (ties: data
    first), with a wait step where nothing on the path ran."""
    last = cols.end == cols.end.max()
    cur = cols.first(last & (cols.start == cols.start[last].max()))
    tr, nodes = cols.trace, waits.tpl.nodes
    until, via = tr.end[cur], "end"
    steps = []
    while True:
        node, start = nodes[tr.node[cur]], tr.start[cur]
        steps.append(Step(node.kind, tr.node[cur], node.name, node.label, node.resource, tr.core[cur], tr.seq[cur],
                          tr.chunk[cur], start, until, via))
        cands = [c for c in waits.of(cur) if c[0] <= start + 1e-9]
        if not cands:
            break
        ready, p, via = max(cands, key=lambda c: (round(c[0], 9), -_RANK[c[2]]))
        if start - ready > 1e-9:                  # nothing on the path ran: the event waited
            steps.append(Step("wait", -1, "wait", "", "", tr.core[cur], tr.seq[cur], tr.chunk[cur], ready, start,
                              via))
        cur, until = p, ready
    steps.reverse()
    return steps


def _tally(steps: list[Step], at: dict, cols: Columns) -> CriticalPath:
    """The path's time by kind: each unit's phases, sync transfer and latency, and waiting."""
    by_kind: dict[str, float] = {}
    sync_us, syncs = 0.0, 0
    for s in steps:
        if s.kind == PHASE:
            _add(by_kind, s.unit, s.until - s.start)
        elif s.kind == "wait":
            _add(by_kind, "wait", s.until - s.start)
        else:
            busy_end = cols.trace.busy_end[at[(s.seq, s.chunk, s.index)]]
            transfer = min(s.until, busy_end) - s.start
            _add(by_kind, "sync transfer", transfer)
            _add(by_kind, "sync latency", s.until - s.start - transfer)
            sync_us += s.until - s.start
            syncs += 1
    first = min(cols.trace.start)
    if steps[0].start > first:
        _add(by_kind, "wait", steps[0].start - first)
    return CriticalPath(sum(by_kind.values()), by_kind, sync_us, syncs, tuple(steps))


def _add(d: dict, key: str, value: float) -> None:
    d[key] = d.get(key, 0.0) + value
