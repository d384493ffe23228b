"""The discrete-event model (SimPy): AI cores with one Cube unit, a group of Vector units and two
hand-off links, replaying a recorded PhaseGraph for many chunks and sequences.

Nothing is hand-placed. Each recorded step becomes a node of a per-chunk template with
  - intra-chunk dependencies: a phase waits for the syncs into it and for the previous phase of its unit;
  - state dependencies: the next chunk's readers of the state wait for the phase that makes it, through a
    hand-off that rides on an existing sync of the right direction or, if none precedes the reader, is a
    sync of its own;
  - write-after-read dependencies: a chunk may not overwrite a resident tensor before the previous chunk's
    readers are done with it;
  - a ping/pong slot: a chunk takes one when its first phase starts and frees it when its last transient
    tensor dies, so chunk t+2 waits for chunk t.
Each unit (and each link) serves its ready nodes oldest chunk first. A sync holds its link for
bytes / bandwidth, then its fixed latency passes without holding anything. In serial mode every node
of a core waits for the one before it: no overlap at all.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import simpy

from .cost import phase_us
from .graph import CUBE, VEC, Phase, PhaseGraph, Sync
from .profile import Profile
from .workspace import WorkspaceUse, analyse, check_fits

PHASE, SYNC, STATE = "phase", "sync", "state"
RIDE, OWN = "ride", "own"


@dataclass(frozen=True)
class Node:
    index: int
    kind: str                 # PHASE, SYNC or STATE (an own state hand-off)
    name: str                 # "A", "sync3", "state"
    label: str                # "A", "③", "S"
    resource: str             # "cube", "vec", "link:vec->cube", "link:cube->vec"
    busy_us: float            # resource held, for chunks after a sequence's first
    busy_first_us: float      # same, for a sequence's first chunk (no state hand-off yet)
    delay_us: float           # after the resource is released (a sync's fixed latency)
    delay_first_us: float     # same, for a sequence's first chunk
    nbytes: int               # payload bytes (syncs), state bytes included where it rides
    nbytes_first: int
    deps: tuple[int, ...]     # intra-chunk
    slot_add: int = 0         # transient bytes written into the chunk's slot when it starts
    slot_free: int = 0        # transient bytes that die when it ends


@dataclass(frozen=True)
class Template:
    graph: PhaseGraph
    nodes: tuple[Node, ...]
    state_edges: tuple[tuple[int, int], ...]    # (node in chunk t-1, node in chunk t), same sequence
    war_edges: tuple[tuple[int, int], ...]      # (node in previous chunk on the core, node in this one)
    state_mode: str | None                      # RIDE, OWN or None (no state)
    state_sync: int | None                      # node index that carries the state hand-off
    slot_release: int | None                    # node after which the slot is free (None: no slot used)
    resident_bytes: int
    workspace: WorkspaceUse

    @property
    def n(self) -> int:
        return len(self.nodes)


def build_template(graph: PhaseGraph, profile: Profile, state_handoff: str = RIDE, check: bool = True) -> Template:
    """Turn a recorded graph into timed nodes and dependency edges for `profile`."""
    if state_handoff not in (RIDE, OWN):
        raise ValueError(f"state_handoff must be {RIDE!r} or {OWN!r}, got {state_handoff!r}")
    use = analyse(graph)
    if check:
        check_fits(graph, use, profile.workspace)
    steps = list(graph.steps)
    units = {s.name: s.unit for s in steps if isinstance(s, Phase)}

    # Where the state hand-off goes: the first reader on the other unit than the state's producer.
    state = graph.state
    ride_at: int | None = None        # step index of the sync it rides on
    own_before: int | None = None     # step index of the reader an own hand-off precedes
    cross_reader = None
    if state is not None:
        src_unit = units[state.producer]
        cross = [r for r in state.readers if units[r] != src_unit]
        if cross:
            cross_reader = cross[0]
            reader_at = next(i for i, s in enumerate(steps) if isinstance(s, Phase) and s.name == cross_reader)
            candidates = [i for i, s in enumerate(steps[:reader_at])
                          if isinstance(s, Sync) and s.direction.startswith(src_unit)]
            if state_handoff == RIDE and candidates:
                ride_at = candidates[-1]
            else:
                own_before = reader_at

    order: list[Phase | Sync | str] = []
    for i, s in enumerate(steps):
        if i == own_before:
            order.append(STATE)
        order.append(s)
    pos = {id(s): k for k, s in enumerate(order)}
    node_of_phase = {s.name: pos[id(s)] for s in steps if isinstance(s, Phase)}
    step_node = {i: pos[id(s)] for i, s in enumerate(steps)}

    slot_add = [0] * len(order)
    slot_free = [0] * len(order)
    for lt in use.lifetimes:
        if lt.placement == "slot":
            slot_add[step_node[lt.start]] += lt.nbytes
            slot_free[step_node[lt.end]] += lt.nbytes

    nodes: list[Node] = []
    last_on_unit: dict[str, int] = {}
    syncs_into: dict[str, list[int]] = {}
    for k, s in enumerate(order):
        if isinstance(s, Sync):
            syncs_into.setdefault(s.consumer, []).append(k)
    state_node = None
    for k, s in enumerate(order):
        if isinstance(s, Phase):
            deps = list(syncs_into.get(s.name, []))
            if s.unit in last_on_unit:
                deps.append(last_on_unit[s.unit])
            if own_before is not None and s.name == cross_reader:
                deps.append(state_node)
            last_on_unit[s.unit] = k
            t = phase_us(s, profile)
            nodes.append(Node(k, PHASE, s.name, s.name, s.unit, t, t, 0.0, 0.0, 0, 0, tuple(sorted(set(deps))),
                              slot_add[k], slot_free[k]))
        elif isinstance(s, Sync):
            extra = state.nbytes if ride_at is not None and order[k] is steps[ride_at] else 0
            nodes.append(Node(k, SYNC, s.name, s.label, f"link:{s.direction}",
                              profile.transfer_us(s.nbytes + extra), profile.transfer_us(s.nbytes),
                              profile.sync.latency_us, profile.sync.latency_us, s.nbytes + extra, s.nbytes,
                              (node_of_phase[s.producer],), slot_add[k], slot_free[k]))
        else:   # an own state hand-off: costs nothing in a sequence's first chunk (the state is a GM input)
            state_node = k
            src = units[state.producer]
            dst = CUBE if src == VEC else VEC
            nodes.append(Node(k, STATE, "state", "S", f"link:{src}->{dst}", profile.transfer_us(state.nbytes),
                              0.0, profile.sync.latency_us, 0.0, state.nbytes, 0, ()))

    state_edges: list[tuple[int, int]] = []
    state_sync = None
    if state is not None:
        producer = node_of_phase[state.producer]
        if ride_at is not None:
            state_sync = step_node[ride_at]
        elif own_before is not None:
            state_sync = state_node
        if state_sync is not None:
            state_edges.append((producer, state_sync))
        for r in state.readers:
            if units[r] == units[state.producer]:
                state_edges.append((producer, node_of_phase[r]))
    war_edges: list[tuple[int, int]] = []
    for name, meta in graph.tensors.items():
        if meta.placement != "resident":
            continue
        writer = next(step_node[i] for i, s in enumerate(steps)
                      if isinstance(s, Sync) and name in s.tensors)
        for r in meta.readers:
            war_edges.append((node_of_phase[r], writer))
    if state is not None and state_sync is not None:
        for r in state.readers:
            war_edges.append((node_of_phase[r], state_sync))
    release = step_node[use.slot_release_step] if use.slot_release_step is not None else None
    return Template(graph, tuple(nodes), tuple(sorted(set(state_edges))), tuple(sorted(set(war_edges))),
                    (RIDE if ride_at is not None else OWN if own_before is not None else None), state_sync,
                    release, use.resident_bytes, use)


@dataclass(frozen=True)
class TraceEvent:
    index: int                # node index in the template
    kind: str                 # PHASE, SYNC or STATE
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

    def __len__(self) -> int:
        return len(self.node)

    def events(self) -> list[TraceEvent]:
        """Rows sorted by (start, core, sequence, chunk, node)."""
        nodes = self.template.nodes
        rows = [TraceEvent(n, nodes[n].kind, nodes[n].name, nodes[n].label, nodes[n].resource, c, s, t, b, be, e,
                           nb, sl)
                for n, c, s, t, b, be, e, nb, sl in zip(self.node, self.core, self.seq, self.chunk, self.start,
                                                        self.busy_end, self.end, self.nbytes, self.slot)]
        rows.sort(key=lambda r: (r.start, r.core, r.seq, r.chunk, r.index))
        return rows


@dataclass
class Run:
    """The outcome of one simulation."""
    template: Template
    profile: Profile
    serial: bool
    chunks: int
    sequences: int
    cores_used: int
    makespan_us: float                  # first node start to last node end, over all cores
    busy_us: dict[tuple[int, str], float]
    trace: Trace | None

    @property
    def latency_us(self) -> float:
        return self.makespan_us + self.profile.chip.launch_overhead_us


class _Server:
    __slots__ = ("ready", "idle", "busy")

    def __init__(self):
        self.ready: list[int] = []
        self.idle: simpy.Event | None = None
        self.busy = 0.0


class _Core:
    """One AI core: its instances (sequence, chunk) in order, dependency counters, servers and slots."""

    def __init__(self, model: "_Model", index: int, seqs: list[int]):
        tpl = model.tpl
        self.model, self.index = model, index
        self.inst_seq = [s for s in seqs for _ in range(model.chunks)]
        self.inst_chunk = [t for _ in seqs for t in range(model.chunks)]
        n, n_inst = tpl.n, len(self.inst_seq)
        self.servers = {r: _Server() for r in model.resources}
        self.remaining = [0] * (n * n_inst)
        self.slot_of = [-1] * n_inst
        self.free_slots = list(range(model.slots)) if model.use_slots else []
        self.next_grant = 0
        self.slot_bytes = [0] * max(model.slots, 1)
        for i in range(n_inst):
            base = i * n
            for k in range(n):
                self.remaining[base + k] = model.in_intra[k]
            if model.serial:
                for k in range(n):
                    self.remaining[base + k] = 0 if (i == 0 and k == 0) else 1
                continue
            if i > 0:
                for k in range(n):
                    self.remaining[base + k] += model.in_war[k]
                if self.inst_seq[i] == self.inst_seq[i - 1]:
                    for k in range(n):
                        self.remaining[base + k] += model.in_state[k]
            if model.use_slots:
                self.remaining[base] += 1
        for r, server in self.servers.items():
            model.env.process(model.serve(self, r, server))
        for nid, left in enumerate(self.remaining):
            if left == 0:
                self.push(nid)
        if model.use_slots:                  # a grant releases the chunk's first node
            while self.free_slots and self.next_grant < n_inst:
                self._grant()

    def _grant(self) -> None:
        i = self.next_grant
        self.next_grant += 1
        self.slot_of[i] = self.free_slots.pop(0)
        self.dec(i * self.model.tpl.n)

    def push(self, nid: int) -> None:
        server = self.servers[self.model.tpl.nodes[nid % self.model.tpl.n].resource]
        heapq.heappush(server.ready, nid)
        if server.idle is not None and not server.idle.triggered:
            server.idle.succeed()

    def dec(self, nid: int) -> None:
        self.remaining[nid] -= 1
        if self.remaining[nid] == 0:
            self.push(nid)


class _Model:
    def __init__(self, tpl: Template, profile: Profile, chunks: int, sequences: int, serial: bool, trace: bool):
        self.tpl, self.profile, self.chunks, self.serial = tpl, profile, chunks, serial
        self.env = simpy.Environment()
        n = tpl.n
        self.resources = sorted({node.resource for node in tpl.nodes})
        self.in_intra = [len(node.deps) for node in tpl.nodes]
        self.out_intra: list[list[int]] = [[] for _ in range(n)]
        for node in tpl.nodes:
            for d in node.deps:
                self.out_intra[d].append(node.index)
        self.in_state = [0] * n
        self.out_state: list[list[int]] = [[] for _ in range(n)]
        for a, b in tpl.state_edges:
            self.in_state[b] += 1
            self.out_state[a].append(b)
        self.in_war = [0] * n
        self.out_war: list[list[int]] = [[] for _ in range(n)]
        for a, b in tpl.war_edges:
            self.in_war[b] += 1
            self.out_war[a].append(b)
        self.slots = profile.workspace.slots
        self.use_slots = tpl.slot_release is not None and not serial
        cores = min(profile.chip.ai_cores, sequences)
        self.trace = Trace(tpl) if trace else None
        self.cores = [_Core(self, c, list(range(c, sequences, cores))) for c in range(cores)]

    def serve(self, core: _Core, resource: str, server: _Server):
        env, tpl, n = self.env, self.tpl, self.tpl.n
        nodes = tpl.nodes
        while True:
            while not server.ready:
                server.idle = env.event()
                yield server.idle
                server.idle = None
            nid = heapq.heappop(server.ready)
            i, k = divmod(nid, n)
            node = nodes[k]
            first = core.inst_chunk[i] == 0
            busy = node.busy_first_us if first else node.busy_us
            delay = node.delay_first_us if first else node.delay_us
            start = env.now
            if node.slot_add and self.trace is not None:
                self._occupancy(core, i, node.slot_add)
            yield env.timeout(busy)
            server.busy += busy
            if delay:
                env.timeout(delay).callbacks.append(
                    lambda _ev, core=core, nid=nid, start=start, busy_end=start + busy: self.complete(core, nid, start, busy_end))
            else:
                self.complete(core, nid, start, start + busy)

    def _occupancy(self, core: _Core, inst: int, delta: int) -> None:
        slot = max(core.slot_of[inst], 0)       # serial mode: one chunk at a time, in slot 0
        core.slot_bytes[slot] += delta
        self.trace.occupancy.append((self.env.now, core.index, slot, core.slot_bytes[slot]))

    def complete(self, core: _Core, nid: int, start: float, busy_end: float) -> None:
        n = self.tpl.n
        i, k = divmod(nid, n)
        node = self.tpl.nodes[k]
        if self.trace is not None:
            tr = self.trace
            tr.node.append(k)
            tr.core.append(core.index)
            tr.seq.append(core.inst_seq[i])
            tr.chunk.append(core.inst_chunk[i])
            tr.start.append(start)
            tr.busy_end.append(busy_end)
            tr.end.append(self.env.now)
            tr.nbytes.append(node.nbytes_first if core.inst_chunk[i] == 0 else node.nbytes)
            tr.slot.append(core.slot_of[i])
            if node.slot_free:
                self._occupancy(core, i, -node.slot_free)
        base = i * n
        if self.serial:
            if nid + 1 < len(core.remaining):
                core.dec(nid + 1)
            return
        for d in self.out_intra[k]:
            core.dec(base + d)
        if i + 1 < len(core.inst_seq):
            nxt = base + n
            for d in self.out_war[k]:
                core.dec(nxt + d)
            if core.inst_seq[i + 1] == core.inst_seq[i]:
                for d in self.out_state[k]:
                    core.dec(nxt + d)
        if k == self.tpl.slot_release and self.use_slots:
            core.free_slots.append(core.slot_of[i])
            core.free_slots.sort()
            if core.next_grant < len(core.inst_seq):
                core._grant()


def simulate(graph_or_template: PhaseGraph | Template, profile: Profile, *, chunks: int, sequences: int = 1,
             serial: bool = False, state_handoff: str = RIDE, trace: bool = True) -> Run:
    """Replay the phase graph for `chunks` chunks of each of `sequences` sequences (batch x heads).

    Sequence s runs on AI core s mod cores; a core takes its sequences one after another (the next one
    may start while the previous one drains). Returns the makespan, per-unit busy time and the trace."""
    if chunks < 1 or sequences < 1:
        raise ValueError(f"chunks and sequences must be >= 1, got {chunks} and {sequences}")
    tpl = graph_or_template if isinstance(graph_or_template, Template) else build_template(
        graph_or_template, profile, state_handoff)
    model = _Model(tpl, profile, chunks, sequences, serial, trace)
    model.env.run()
    stuck = [c.index for c in model.cores if any(r > 0 for r in c.remaining)]
    if stuck:
        raise RuntimeError(f"the event model deadlocked on core {stuck[0]}: a dependency cycle in the template")
    busy = {(c.index, r): s.busy for c in model.cores for r, s in c.servers.items()}
    makespan = model.env.now
    return Run(tpl, profile, serial, chunks, sequences, len(model.cores), makespan, busy, model.trace)

