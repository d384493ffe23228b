"""The discrete-event model (SimPy): AI cores with one Cube unit, a group of Vector units and two
hand-off links each, replaying a per-chunk template (template.py) for many chunks and sequences.

Nothing is hand-placed. Sequence s runs on AI core s mod cores (waves when there are more sequences than
cores, as `for (h = GetBlockIdx(); h < H; h += GetBlockNum())` does); a core takes its sequences one after
another, the next one starting while the previous one drains. On each core every unit and link serves its
ready nodes oldest chunk first; a node is ready when its dependencies are done and, for a chunk's first
node, when a ping/pong slot is free. A sync holds its link for bytes / bandwidth, then its fixed latency
passes without holding anything.

The cores share the chip's bandwidth: a phase's GM traffic goes through HBM and a hand-off through L2.
A transfer that starts while n others use the same resource gets at most 1/(n+1) of the chip-wide rate
and never more than its core's own rate (its share is fixed when it starts), so contention shows once
the cores together ask for more than the chip gives. Serial mode runs every node of a core after the
one before it: no overlap at all. A replay larger than limits.py allows is refused before it starts.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import simpy

from npusim.chip.profile import Profile
from npusim.model.limits import check_replay
from npusim.model.run import Run
from npusim.model.template import HBM, L2, OWN, PHASE, RIDE, STATE, SYNC, Node, Template, build_template, shared_rate
from npusim.model.trace import Log, Trace, TraceEvent, copy_trace
from npusim.record.graph import PhaseGraph

__all__ = ["HBM", "L2", "OWN", "PHASE", "RIDE", "STATE", "SYNC", "Log", "Node", "Run", "Template", "Trace",
           "TraceEvent", "build_template", "simulate"]


class _Share:
    """A chip-wide bandwidth shared by the transfers using it at once. A transfer that starts while
    transfers of total multiplicity `active` are under way, together with the m - 1 identical transfers
    of the other cores of its class, gets at most 1/(active + m) of the chip-wide rate (fixed when it
    starts), and never more than its core's own rate."""
    __slots__ = ("rate", "ends", "active", "busy", "seen")

    def __init__(self, rate: float):
        self.ends: list[tuple[float, int]] = []
        self.rate, self.active, self.busy, self.seen = rate, 0, 0.0, -1

    def transfer_us(self, now: float, nbytes: int, own_us: float, m: int) -> float:
        ends = self.ends
        while ends and ends[0][0] <= now:
            self.active -= heapq.heappop(ends)[1]
        self.seen = self.active
        t = max(own_us, nbytes * (self.active + m) / self.rate)
        heapq.heappush(ends, (now + t, m))
        self.active += m
        self.busy += m * nbytes / self.rate
        return t


class _Server:
    """One unit or link of a core: a heap of ready nodes (oldest chunk first) and whether it is busy."""
    __slots__ = ("ready", "running", "pending", "busy")

    def __init__(self) -> None:
        self.ready: list[int] = []
        self.running = False
        self.pending = False          # waiting in _Model.waiting to be dispatched
        self.busy = 0.0


def core_order(seqs: Sequence[int], counts, interleave: int) -> list[tuple[int, int, int]]:
    """(sequence, chunk, lane) in the order a core takes them: `interleave` sequences at a time, their chunks
    alternating (s0 c0, s1 c0, s0 c1, ...); `counts[s]` is sequence s's number of chunks."""
    out: list[tuple[int, int, int]] = []
    for g in range(0, len(seqs), interleave):
        group = seqs[g:g + interleave]
        for t in range(max(counts[s] for s in group)):
            out.extend((s, t, lane) for lane, s in enumerate(group) if t < counts[s])
    return out


class _Core:
    """One AI core: its instances (sequence, chunk) in order, dependency counters, servers and slots.

    With `interleave` = N the core takes its sequences N at a time and alternates their chunks
    (s0 c0, s1 c0, s0 c1, s1 c1, ...), each filling the others' hand-off gaps; every lane (position in
    the group) has a resident region of its own, so write-after-read edges link a lane's instances, and
    the core's workspace holds the profile's ping/pong slots once per lane (Run.slots), granted in the
    alternating order."""

    def __init__(self, model: "_Model", index: int, seqs: list[int], copies: int = 1):
        self.model, self.index, self.copies = model, index, copies
        n_lanes = model.interleave
        order = core_order(seqs, model.chunk_counts, n_lanes)
        self.inst_seq, self.inst_chunk, lane_of = ([x[i] for x in order] for i in range(3))
        n_inst = len(self.inst_seq)
        self.inst_first = [t == 0 for t in self.inst_chunk]
        # successors in other instances: the same sequence's next chunk (state), the lane's next instance (WAR)
        self.next_state, self.next_war = [-1] * n_inst, [-1] * n_inst
        last_of_seq: dict[int, int] = {}
        last_of_lane: dict[int, int] = {}
        for i, (s, lane) in enumerate(zip(self.inst_seq, lane_of)):
            if s in last_of_seq:
                self.next_state[last_of_seq[s]] = i
            if lane in last_of_lane:
                self.next_war[last_of_lane[lane]] = i
            last_of_seq[s], last_of_lane[lane] = i, i
        self.servers = {r: _Server() for r in model.resources}
        self.server_of = [self.servers[r] for r in model.resource_of]
        self.slot_of = [-1] * n_inst
        self.stretch: dict[tuple[int, int], float] = {}   # (instance, node) -> HBM stretch of its pipes (trace)
        slots = model.slots * min(n_lanes, len(seqs))          # the profile's ping/pong for each lane in use
        self.slot_bytes = [0] * max(slots, 1)
        if model.serial:
            model.env.process(model.run_serial(self))
            return
        n = model.n
        self.remaining = model.in_intra * n_inst
        for i in range(n_inst):
            for succ, into in ((self.next_war[i], model.in_war), (self.next_state[i], model.in_state)):
                if succ >= 0:
                    base = succ * n
                    for k in range(n):
                        self.remaining[base + k] += into[k]
        self.free_slots = list(range(slots)) if model.use_slots else []
        self.next_grant = 0
        if model.use_slots:
            for i in range(n_inst):
                self.remaining[i * n] += 1
        for nid, left in enumerate(self.remaining):
            if left == 0:
                self.push(nid)
        if model.use_slots:                  # a grant releases the chunk's first node
            while self.free_slots and self.next_grant < n_inst:
                self.grant()

    def grant(self) -> None:
        i = self.next_grant
        self.next_grant += 1
        self.slot_of[i] = self.free_slots.pop(0)
        self.dec(i * self.model.n)

    def push(self, nid: int) -> None:
        server = self.server_of[nid % self.model.n]
        heapq.heappush(server.ready, nid)
        if not server.running and not server.pending:
            # start once the current event is handled, so that every node it readies competes by age
            server.pending = True
            self.model.waiting.append((self, server))

    def dec(self, nid: int) -> None:
        self.remaining[nid] -= 1
        if self.remaining[nid] == 0:
            self.push(nid)


class _Model:
    def __init__(self, tpl: Template, profile: Profile, chunk_counts: list[int],
                 core_seqs: list[tuple[int, list[int], int]], serial: bool, trace: bool, interleave: int = 1,
                 record: bool = False):
        self.tpl, self.profile, self.serial = tpl, profile, serial
        self.log = Log(core_seqs) if record else None
        self.chunk_counts, self.interleave = chunk_counts, interleave
        self.env = simpy.Environment()
        n = self.n = tpl.n
        self.nodes = tpl.nodes
        self.resources = sorted({node.resource for node in tpl.nodes})
        self.resource_of = [node.resource for node in tpl.nodes]
        self.in_intra = [len(node.deps) for node in tpl.nodes]
        self.out_intra: list[list[int]] = [[] for _ in range(n)]
        for node in tpl.nodes:
            for d in node.deps:
                self.out_intra[d].append(node.index)
        self.in_state, self.out_state = edge_lists(tpl.state_edges, n)
        self.in_war, self.out_war = edge_lists(tpl.war_edges, n)
        self.slots = profile.workspace.slots
        self.use_slots = tpl.slot_release is not None and not serial
        self.shares = {r: _Share(shared_rate(profile, r)) for r in (HBM, L2)
                          if math.isfinite(shared_rate(profile, r))}
        self.share_of = [None if node.shared is None else self.shares.get(node.shared) for node in tpl.nodes]
        nodes = tpl.nodes     # flat per-node columns for the hot path: (first chunk, later chunks)
        # a phase's pipes (pipes.py): serial mode runs its segments in series; the overlapped ones are
        # re-timed when HBM contention stretches their transfers
        pipes = [x.pipe if x.pipe is not None and x.pipe.overlaps and not serial else None for x in nodes]
        busy = [x.pipe.busy_us(serial=True) if x.pipe is not None and serial else x.busy_us for x in nodes]
        self.busy_of = ([x.busy_first_us if x.pipe is None else b for x, b in zip(nodes, busy)], busy)
        self.pipe_of = pipes
        self.delay_of = ([x.delay_first_us for x in nodes], [x.delay_us for x in nodes])
        self.bytes_of = ([x.nbytes_first for x in nodes], [x.nbytes for x in nodes])
        self.work_of = [x.work_us for x in nodes]
        self.trace = Trace(tpl) if trace else None
        self.waiting: list[tuple[_Core, _Server]] = []     # idle servers with newly ready nodes
        self.cores = [_Core(self, c, seqs, copies) for c, seqs, copies in core_seqs]
        self.flush()

    def flush(self) -> None:
        """Start work on every idle unit that got ready nodes while the current event was handled."""
        waiting = self.waiting
        j = 0
        while j < len(waiting):          # dispatching may append more
            core, server = waiting[j]
            self.dispatch(core, server)
            j += 1
        waiting.clear()

    def busy_time(self, core: _Core, i: int, k: int, first: bool) -> float:
        """Time node k holds its unit or link from now, with chip-wide contention."""
        col = 0 if first else 1
        busy = self.busy_of[col][k]
        share = self.share_of[k]
        if self.log is not None:
            self.log.starts.extend((core.index, i * self.n + k, -1))
        if share is not None:
            nbytes = self.bytes_of[col][k]
            if nbytes:
                work, pipe = self.work_of[k], self.pipe_of[k]
                if pipe is None:
                    busy = work + share.transfer_us(self.env.now, nbytes, busy - work, core.copies)
                else:                    # the transfers stretch by the share; the pipes overlap them again
                    io = pipe.io_us
                    t = share.transfer_us(self.env.now, nbytes, io, core.copies)
                    if io > 0:
                        busy = pipe.busy_us(t / io)
                        if self.trace is not None and t > io:
                            core.stretch[(i, k)] = t / io
                    else:
                        busy += t
                if self.log is not None:
                    self.log.starts[-1] = share.seen
        return busy

    def dispatch(self, core: _Core, server: _Server) -> None:
        """Start the oldest ready node on an idle unit or link."""
        server.pending = False
        if server.running or not server.ready:
            return
        nid = heapq.heappop(server.ready)
        i, k = divmod(nid, self.n)
        first = core.inst_first[i]
        start = self.env.now
        if self.trace is not None and self.nodes[k].slot_add:
            self._occupancy(core, i, self.nodes[k].slot_add)
        busy = self.busy_time(core, i, k, first)
        server.running = True
        self.env.timeout(busy).callbacks.append(
            lambda _ev: self._released(core, server, nid, first, start, busy))

    def _released(self, core: _Core, server: _Server, nid: int, first: bool, start: float, busy: float) -> None:
        server.running = False
        server.busy += busy
        delay = self.delay_of[0 if first else 1][nid % self.n]
        if delay:
            self.env.timeout(delay).callbacks.append(lambda _ev: self._completed(core, nid, start, start + busy))
        else:
            self.complete(core, nid, start, start + busy)
        if server.ready and not server.pending:
            self.dispatch(core, server)
        self.flush()

    def _completed(self, core: _Core, nid: int, start: float, busy_end: float) -> None:
        self.complete(core, nid, start, busy_end)
        self.flush()

    def run_serial(self, core: _Core):
        """Serial mode: one node at a time on the core, in program order, chunk after chunk."""
        env = self.env
        for i in range(len(core.inst_seq)):
            first = core.inst_first[i]
            for k, node in enumerate(self.nodes):
                start = env.now
                if node.slot_add and self.trace is not None:
                    self._occupancy(core, i, node.slot_add)
                busy = self.busy_time(core, i, k, first)
                yield env.timeout(busy)
                core.server_of[k].busy += busy
                delay = node.delay_first_us if first else node.delay_us
                if delay:
                    yield env.timeout(delay)
                self._record(core, i, node, start, start + busy)

    def _occupancy(self, core: _Core, inst: int, delta: int) -> None:
        slot = max(core.slot_of[inst], 0)       # serial mode: one chunk at a time, in slot 0
        core.slot_bytes[slot] += delta
        if self.trace is not None:
            self.trace.occupancy.append((self.env.now, core.index, slot, core.slot_bytes[slot]))

    def _record(self, core: _Core, i: int, node: Node, start: float, busy_end: float) -> None:
        if self.trace is not None:
            first = core.inst_chunk[i] == 0
            self.trace.add(node.index, core.index, core.inst_seq[i], core.inst_chunk[i], start, busy_end,
                           self.env.now, node.nbytes_first if first else node.nbytes, core.slot_of[i],
                           core.stretch.pop((i, node.index), 1.0) if core.stretch else 1.0)
            if node.slot_free:
                self._occupancy(core, i, -node.slot_free)

    def complete(self, core: _Core, nid: int, start: float, busy_end: float) -> None:
        """A node is done: count it off its successors' dependencies (this chunk's, and the next one's)."""
        n = self.n
        i, k = divmod(nid, n)
        if self.trace is not None:
            self._record(core, i, self.nodes[k], start, busy_end)
        remaining, push = core.remaining, core.push
        base = nid - k
        for d in self.out_intra[k]:
            j = base + d
            remaining[j] -= 1
            if not remaining[j]:
                push(j)
        for succ, out in ((core.next_war[i], self.out_war[k]), (core.next_state[i], self.out_state[k])):
            if succ >= 0 and out:
                nxt = succ * n
                for d in out:
                    j = nxt + d
                    remaining[j] -= 1
                    if not remaining[j]:
                        push(j)
        if k == self.tpl.slot_release and self.use_slots:
            core.free_slots.append(core.slot_of[i])
            core.free_slots.sort()
            if core.next_grant < len(core.inst_seq):
                if self.log is not None:
                    self.log.grants.extend((core.index, i))
                core.grant()


def edge_lists(edges, n: int) -> tuple[list[int], list[list[int]]]:
    into = [0] * n
    out: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        into[b] += 1
        out[a].append(b)
    return into, out


def core_layout(counts: Sequence[int], ai_cores: int, symmetric: bool = True):
    """(each core's sequences: sequence s on core s mod cores; per simulated core, the cores that run alike,
    those whose sequences have the same chunk counts, or each core alone when not `symmetric`)."""
    sequences = len(counts)
    cores = min(ai_cores, sequences)
    layout = [(c, list(range(c, sequences, cores))) for c in range(cores)]
    members: dict[int, list[int]] = {}
    if symmetric:
        first_with: dict[tuple, int] = {}
        for c, seqs in layout:
            members.setdefault(first_with.setdefault(tuple(counts[c::cores]), c), []).append(c)   # seqs' counts
    else:
        members = {c: [c] for c, _ in layout}
    return layout, members


def simulate(graph_or_template: PhaseGraph | Template, profile: Profile, *, chunks: int | Sequence[int],
             sequences: int = 1, serial: bool = False, state_handoff: str = RIDE, trace: bool = True,
             symmetric: bool = True, interleave: int = 1, record: bool = False) -> Run:
    """Replay the phase graph for `chunks` chunks of each of `sequences` sequences (batch x heads); `chunks`
    may instead give each sequence its own count (a variable-length batch). Returns the makespan, per-unit
    busy time, chip-wide bandwidth use and (if asked) the trace.

    Sequence s runs on core s mod cores. `interleave` = N: a core alternates the chunks of N of its
    sequences at a time (see _Core). Cores whose sequences have the same chunk counts run in lockstep:
    each such class is simulated once, on its first core, with its transfers counted once per core of the
    class in the chip-wide shares, and the trace is copied to the other cores. `symmetric=False` simulates
    every core on its own; without contention both give the same timeline (tests/npusim/model/test_engine.py checks it).
    `record`: keep the replay's decisions (Run.log) for re-timing it on other profiles (retime.py)."""
    check_replay(chunks, sequences, profile.chip.ai_cores)          # before any list of that size is made
    counts = [chunks] * sequences if isinstance(chunks, int) else [int(c) for c in chunks]
    if sequences < 1 or len(counts) != sequences or min(counts) < 1:
        raise ValueError(f"chunks and sequences must be >= 1, got {chunks} and {sequences}")
    if interleave < 1:
        raise ValueError(f"interleave must be >= 1, got {interleave}")
    tpl = graph_or_template if isinstance(graph_or_template, Template) else build_template(
        graph_or_template, profile, state_handoff)
    if interleave > 1 and any(s.next_item for s in tpl.graph.syncs):
        raise ValueError(f"{tpl.graph.program}: a flag into the next item links a core's items one after "
                         f"another, but with {interleave} sequences interleaved its edge would link each "
                         f"sequence's own items: run it with interleave 1")
    cores = min(profile.chip.ai_cores, sequences)
    layout, members = core_layout(counts, profile.chip.ai_cores, symmetric)
    model = _Model(tpl, profile, counts, [(r, layout[r][1], len(ms)) for r, ms in members.items()], serial, trace,
                   interleave, record)
    model.env.run()
    if not serial:
        stuck = [c.index for c in model.cores if any(r > 0 for r in c.remaining)]
        if stuck:
            raise RuntimeError(f"the event model deadlocked on core {stuck[0]}: a dependency cycle in the template")
    busy: dict[tuple[int, str], float] = {}
    for core in model.cores:
        for c in members[core.index]:
            for res, server in core.servers.items():
                busy[(c, res)] = server.busy
    out = model.trace
    if out is not None and any(len(ms) > 1 for ms in members.values()):
        out = copy_trace(out, members)
    return Run(tpl, profile, serial, max(counts), sequences, cores, model.env.now, busy, out,
               {r: share.busy for r, share in model.shares.items()}, tuple(counts), interleave, model.log)
