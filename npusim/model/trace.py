"""What the event model ran: every node with its unit, core, sequence, chunk, times and bytes (as rows, or as
arrays: Columns); and what it decided (Log), when a replay is recorded for re-timing."""
from __future__ import annotations

from array import array
from dataclasses import dataclass, field, fields

import numpy as np

from npusim.model.template import PHASE, Template


@dataclass(frozen=True)
class TraceEvent:
    index: int                # node index in the template
    kind: str                 # "phase", "sync" or "state"
    name: str
    label: str
    unit: str                 # the resource: "cube", "vec", "link:vec->cube", ...
    core: int
    seq: int                  # sequence (batch x head, flattened)
    chunk: int
    start: float              # us
    busy_end: float           # resource released (a sync's transfer done)
    end: float                # done (a sync's fixed latency passed)
    nbytes: int
    slot: int                 # ping/pong slot of the chunk (-1: none)
    stretch: float = 1.0      # a phase's GM transfers, stretched by HBM contention (pipes.py)


@dataclass
class Trace:
    """Every node the model ran, as columns in completion order; `events()` gives rows."""
    template: Template
    node: list[int] = field(default_factory=list)
    core: list[int] = field(default_factory=list)
    seq: list[int] = field(default_factory=list)
    chunk: list[int] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    busy_end: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)
    slot: list[int] = field(default_factory=list)
    occupancy: list[tuple[float, int, int, int]] = field(default_factory=list)   # (t, core, slot, bytes)
    stretch: list[float] = field(default_factory=list)
    _rows: list[TraceEvent] | None = field(default=None, repr=False, compare=False)    # events(), made once

    def __len__(self) -> int:
        return len(self.node)

    def add(self, node: int, core: int, seq: int, chunk: int, start: float, busy_end: float, end: float,
            nbytes: int, slot: int, stretch: float = 1.0) -> None:
        self.node.append(node)
        self.core.append(core)
        self.seq.append(seq)
        self.chunk.append(chunk)
        self.start.append(start)
        self.busy_end.append(busy_end)
        self.end.append(end)
        self.nbytes.append(nbytes)
        self.slot.append(slot)
        self.stretch.append(stretch)

    def events(self) -> list[TraceEvent]:
        """Rows sorted by (start, core, sequence, chunk, node): made once per trace (the report, the overlap
        metrics and every plot ask), again only if events were added since; shared: read it, do not change it."""
        if self._rows is None or len(self._rows) != len(self.node):
            self._rows = self._make_rows()
        return self._rows

    def _make_rows(self) -> list[TraceEvent]:
        heads = [(n.kind, n.name, n.label, n.resource) for n in self.template.nodes]
        cols = list(zip(self.node, self.core, self.seq, self.chunk, self.start, self.busy_end, self.end,
                        self.nbytes, self.slot, self.stretch))
        keys = list(zip(self.start, self.core, self.seq, self.chunk, self.node))
        rows = []
        for i in sorted(range(len(keys)), key=keys.__getitem__):   # stable: as sorting the rows by that key
            n, c, s, t, b, be, e, nb, sl, x = cols[i]
            rows.append(_event(dict(zip(_FIELDS, (n, *heads[n], c, s, t, b, be, e, nb, sl, x)))))
        return rows


_FIELDS = tuple(f.name for f in fields(TraceEvent))


def _event(values: dict) -> TraceEvent:
    """A TraceEvent from its fields by name, as its constructor makes it, without the frozen dataclass's
    per-field checks (a trace makes one per node run)."""
    row = object.__new__(TraceEvent)
    object.__setattr__(row, "__dict__", values)
    return row


class Columns:
    """A trace's events as arrays in its order (no per-event object made); `unit` indexes `units`; `trace`
    keeps the values as the trace holds them (its lists), for figures reported as they are."""

    def __init__(self, tr: Trace) -> None:
        self.trace = tr
        nodes = tr.template.nodes
        self.units = sorted({n.resource for n in nodes})
        self.node = node = np.asarray(tr.node, dtype=np.int64)
        self.unit = np.array([self.units.index(n.resource) for n in nodes], dtype=np.int64)[node]
        self.phase = np.array([n.kind == PHASE for n in nodes], dtype=bool)[node]
        self.core, self.seq, self.chunk = (np.asarray(v, dtype=np.int64) for v in (tr.core, tr.seq, tr.chunk))
        self.start, self.busy_end, self.end = (np.asarray(v, dtype=np.float64)
                                               for v in (tr.start, tr.busy_end, tr.end))
        self.pos = np.arange(len(node))
        # merged ends are those floats; an int among the ends (a hand-made trace) takes the events' path
        self.float_ends = set(map(type, tr.end)) | set(map(type, tr.busy_end)) <= {float}

    def __len__(self) -> int:
        return len(self.node)

    def first(self, among: np.ndarray, by_start: bool = True) -> int:
        """The first of the events `among` (a mask) in the order of Trace.events(): by start, core, sequence,
        chunk, node, then position in the trace."""
        keys = (self.pos[among], self.node[among], self.chunk[among], self.seq[among], self.core[among])
        return int(self.pos[among][np.lexsort(keys + ((self.start[among],) if by_start else ()))[0]])


@dataclass
class Log:
    """What a replay decided, in the order it decided it (npusim/model/whatif/retime.py re-times it for other
    profiles): every node started, as (core, instance * n + node, the multiplicity of the transfers it
    found under way on its chip-wide bandwidth, or -1 where it moved no bytes over one); every slot
    granted on a release, as (core, released instance); the simulated cores as (core, its sequences, copies).
    `starts` and `grants` are flat arrays of those triples and pairs."""
    cores: list[tuple[int, list[int], int]]
    starts: array = field(default_factory=lambda: array("q"))
    grants: array = field(default_factory=lambda: array("q"))


def copy_trace(trace: Trace, members: dict[int, list[int]]) -> Trace:
    """The representative cores' trace, repeated for every core of their class (sequences renumbered)."""
    out = Trace(trace.template)
    cols = (trace.node, trace.core, trace.seq, trace.chunk, trace.start, trace.busy_end, trace.end,
            trace.nbytes, trace.slot, trace.stretch)
    for c in sorted(c for ms in members.values() for c in ms):
        r = next(r for r, ms in members.items() if c in ms)
        for n, c0, s, t, st, be, e, nb, sl, x in zip(*cols):
            if c0 == r:
                out.add(n, c, s - r + c, t, st, be, e, nb, sl, x)
        out.occupancy.extend((t, c, slot, b) for t, c0, slot, b in trace.occupancy if c0 == r)
    return out
