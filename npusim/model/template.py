"""From a recorded PhaseGraph to the timed per-chunk template the event model replays.

Each recorded step becomes a node with its durations on a profile and its dependencies:
  - intra-chunk: a phase waits for the syncs into it and for the previous phase of its unit;
  - state: the next chunk's readers of the state wait for the phase that makes it, through a hand-off that
    rides on an existing sync of the right direction or, if none precedes the reader (or `state_handoff`
    is "own"), a sync of its own;
  - write-after-read: a chunk may not overwrite a resident tensor before the previous chunk's readers are
    done with it;
  - a ping/pong slot: taken when the chunk's first node starts, freed after `slot_release`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from npusim.chip import isa
from npusim.chip.capacity import TILE
from npusim.chip.pipes import PhasePlan, PipeTiming, plan_phase
from npusim.chip.profile import Profile
from npusim.model.workspace import WorkspaceUse, analyse, check_fits
from npusim.record.graph import CUBE, VEC, Phase, PhaseGraph, Sync

PHASE, SYNC, STATE = "phase", "sync", "state"
RIDE, OWN = "ride", "own"
HBM, L2 = "hbm", "l2"          # chip-wide resources: GM traffic of phases, workspace hand-offs


@dataclass(frozen=True)
class Node:
    index: int
    kind: str                 # PHASE, SYNC or STATE (an own state hand-off)
    name: str                 # "A", "sync3", "state"
    label: str                # "A", "③", "S"
    resource: str             # "cube", "vec", "link:vec->cube", "link:cube->vec"
    busy_us: float            # resource held, for chunks after a sequence's first (no contention)
    busy_first_us: float      # same, for a sequence's first chunk (no state hand-off yet)
    delay_us: float           # after the resource is released (a sync's fixed latency)
    delay_first_us: float
    nbytes: int               # bytes moved: a sync's payload (the state included where it rides), a phase's GM traffic
    nbytes_first: int
    deps: tuple[int, ...]     # intra-chunk
    slot_add: int = 0         # transient bytes written into the chunk's slot when it starts
    slot_free: int = 0        # transient bytes that die when it ends
    work_us: float = 0.0      # compute part of busy_us (phases); the rest moves nbytes at the core's rate
    shared: str | None = None # HBM or L2: the chip-wide bandwidth its bytes share with other cores
    pipe: PipeTiming | None = None  # a phase's load / compute / store segments (pipes.py)


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
    plans: tuple[PhasePlan, ...] = ()           # per phase: capacity, tiles, pipes (pipes.py)

    @property
    def n(self) -> int:
        return len(self.nodes)


def build_template(graph: PhaseGraph, profile: Profile, state_handoff: str = RIDE, check: bool = True,
                   capacity: str = TILE) -> Template:
    """Turn a recorded graph into timed nodes and dependency edges for `profile`. A phase that does not fit
    its unit's memory is tiled (`capacity` "tile") or refused ("refuse": CapacityError)."""
    if state_handoff not in (RIDE, OWN):
        raise ValueError(f"state_handoff must be {RIDE!r} or {OWN!r}, got {state_handoff!r}")
    # a phase that no tiling fits says so before the workspace plan does (capacity.py)
    plan_of = {p.name: plan_phase(p, profile, capacity, graph.program) for p in graph.phases}
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

    syncs_into: dict[str, list[int]] = {}
    for k, s in enumerate(order):
        if isinstance(s, Sync):
            syncs_into.setdefault(s.consumer, []).append(k)
    latency = profile.sync.latency_us
    def link_us(nbytes, direction, payloads=None):
        return _link_us(profile, nbytes, direction, payloads)
    nodes: list[Node] = []
    plans: list[PhasePlan] = []
    last_on_unit: dict[str, int] = {}
    state_node = None
    for k, s in enumerate(order):
        if isinstance(s, Phase):
            deps = list(syncs_into.get(s.name, []))
            if s.unit in last_on_unit:
                deps.append(last_on_unit[s.unit])
            if own_before is not None and s.name == cross_reader:
                deps.append(state_node)
            last_on_unit[s.unit] = k
            plan = plan_of[s.name]
            plans.append(plan)
            pipe = plan.timing
            work = pipe.tiles * pipe.compute_us
            gm = round(plan.load_bytes + plan.store_bytes)
            t = pipe.busy_us()
            nodes.append(Node(k, PHASE, s.name, s.name, s.unit, t, t, 0.0, 0.0, gm, gm, tuple(sorted(set(deps))),
                              slot_add[k], slot_free[k], work, HBM, pipe))
        elif isinstance(s, Sync):
            extra = state.nbytes if ride_at is not None and order[k] is steps[ride_at] else 0
            sizes = [(p.nbytes, p.dtype) for p in s.payload]
            nodes.append(Node(k, SYNC, s.name, s.label, f"link:{s.direction}",
                              link_us(s.nbytes + extra, s.direction, sizes + ([(extra, state.dtype)] if extra else [])),
                              link_us(s.nbytes, s.direction, sizes),
                              latency, latency, s.nbytes + extra, s.nbytes,
                              (node_of_phase[s.producer],), slot_add[k], slot_free[k], 0.0, L2))
        else:   # an own state hand-off: nothing to do in a sequence's first chunk (the state is a GM input)
            state_node = k
            src = units[state.producer]
            dst = CUBE if src == VEC else VEC
            nodes.append(Node(k, STATE, "state", "S", f"link:{src}->{dst}",
                              link_us(state.nbytes, f"{src}->{dst}", [(state.nbytes, state.dtype)]),
                              0.0, latency, 0.0, state.nbytes, 0, (), 0, 0, 0.0, L2))

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
        writer = next(step_node[i] for i, s in enumerate(steps) if isinstance(s, Sync) and name in s.tensors)
        for r in meta.readers:
            war_edges.append((node_of_phase[r], writer))
    if state is not None and state_sync is not None:
        for r in state.readers:
            war_edges.append((node_of_phase[r], state_sync))
    release = step_node[use.slot_release_step] if use.slot_release_step is not None else None
    return Template(graph, tuple(nodes), tuple(sorted(set(state_edges))), tuple(sorted(set(war_edges))),
                    (RIDE if ride_at is not None else OWN if own_before is not None else None), state_sync,
                    release, use.resident_bytes, use, tuple(plans))


def _link_us(profile: Profile, nbytes: int, direction: str, payloads) -> float:
    """A hand-off's transfer time: bytes / sync bandwidth, or with the [isa] table one DataCopy per payload
    tensor out of the producer (MTE3 from each Vector unit's half; a Cube result already left L0C through
    the FixPipe in its matmul) and one into the consumer (MTE2 to L1, or to each Vector unit's UB), with the
    Vector side's cast of a 16-bit tensor."""
    if not isa.enabled(profile) or payloads is None:
        return profile.transfer_us(nbytes)
    units = profile.chip.vec_per_core
    cycles = 0.0
    for size, dtype in payloads:
        if size <= 0:
            continue
        narrow = dtype in ("bf16", "fp16")
        elements = size / (2 if narrow else 4) / units
        if direction.startswith("vec"):
            cycles += isa.store_cycles(profile, size / units, from_l0c=False) + isa.load_cycles(profile, size, to_l1=True)
        else:
            cycles += isa.load_cycles(profile, size / units, to_l1=False)
        if narrow:
            cycles += isa.cast_cycles(profile, elements)
    return profile.cycles_to_us(cycles)


def shared_rate(profile: Profile, shared: str | None) -> float:
    """Bytes per us of a chip-wide resource; inf where the profile models no contention."""
    if shared is None:
        return math.inf
    gbps = {HBM: profile.memory.chip_bandwidth_gbps, L2: profile.memory.l2_bandwidth_gbps}.get(shared, math.inf)
    return gbps * 1e3
