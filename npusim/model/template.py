"""From a recorded PhaseGraph to the timed per-chunk template the event model replays.

Each recorded step becomes a node with its durations on a profile and its dependencies:
  - intra-chunk: a phase waits for the syncs into it and for the previous phase of its unit;
  - state: the next chunk's readers of the state wait for the phase that makes it, through a hand-off that
    rides on an existing sync of the right direction or, if none precedes the reader (or `state_handoff`
    is "own"), a sync of its own;
  - write-after-read: a chunk may not overwrite a resident tensor before the previous chunk's readers are
    done with it;
  - a flag into the next item (`npu.sync(..., next_item=True)`, a depth-1 reverse flag): the next item's
    phase waits for it, an edge of the same kind, from the previous item on the core to this one (the engine
    refuses it where a core interleaves sequences: the edge would link a lane's items);
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
from npusim.record.graph import CUBE, VEC, Phase, PhaseGraph, StateSpec, Sync

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
    ride_at, own_before, cross_reader = _state_handoff(graph, steps, units, state_handoff)

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
    for k, item in enumerate(order):
        if isinstance(item, Sync) and not item.next_item:
            syncs_into.setdefault(item.consumer, []).append(k)
    nodes: list[Node] = []
    plans: list[PhasePlan] = []
    last_on_unit: dict[str, int] = {}
    state_node = None
    for k, item in enumerate(order):
        if isinstance(item, Phase):
            deps = list(syncs_into.get(item.name, []))
            if item.unit in last_on_unit:
                deps.append(last_on_unit[item.unit])
            if state_node is not None and item.name == cross_reader:
                deps.append(state_node)
            last_on_unit[item.unit] = k
            plans.append(plan_of[item.name])
            nodes.append(_phase_node(k, item, plan_of[item.name], deps=deps, slot_add=slot_add[k],
                                     slot_free=slot_free[k]))
        elif isinstance(item, Sync):
            rides = graph.state is not None and ride_at is not None and item is steps[ride_at]
            nodes.append(_sync_node(k, item, profile, riding=graph.state if rides else None,
                                    producer=node_of_phase[item.producer], slot_add=slot_add[k],
                                    slot_free=slot_free[k]))
        else:   # an own state hand-off: nothing to do in a sequence's first chunk (the state is a GM input)
            state_node = k
            nodes.append(_state_hand_off_node(k, _state_of(graph), units, profile))

    state_sync = step_node[ride_at] if ride_at is not None else state_node
    release = step_node[use.slot_release_step] if use.slot_release_step is not None else None
    return Template(graph=graph, nodes=tuple(nodes),
                    state_edges=_state_edges(graph, units, node_of_phase, state_sync),
                    war_edges=_war_edges(graph, steps, step_node, node_of_phase, state_sync),
                    state_mode=RIDE if ride_at is not None else OWN if own_before is not None else None,
                    state_sync=state_sync, slot_release=release, resident_bytes=use.resident_bytes,
                    workspace=use, plans=tuple(plans))


def _state_of(graph: PhaseGraph) -> StateSpec:
    if graph.state is None:
        raise ValueError(f"{graph.program}: a state hand-off node in a graph that carries no state")
    return graph.state


def _state_handoff(graph: PhaseGraph, steps: list, units: dict[str, str],
                   state_handoff: str) -> tuple[int | None, int | None, str | None]:
    """Where the state hand-off goes: the first reader on the other unit than the state's producer. Returns
    (the step index of the sync it rides on, the step index of the reader an own hand-off precedes, that
    reader's name); all None where the state is not read on the other unit."""
    state = graph.state
    if state is None:
        return None, None, None
    src_unit = units[state.producer]
    cross = [r for r in state.readers if units[r] != src_unit]
    if not cross:
        return None, None, None
    reader_at = next(i for i, s in enumerate(steps) if isinstance(s, Phase) and s.name == cross[0])
    candidates = [i for i, s in enumerate(steps[:reader_at]) if isinstance(s, Sync) and not s.next_item
                  and s.direction.startswith(src_unit)]
    if state_handoff == RIDE and candidates:
        return candidates[-1], None, cross[0]
    return None, reader_at, cross[0]


def _phase_node(k: int, phase: Phase, plan: PhasePlan, deps: list[int], slot_add: int, slot_free: int) -> Node:
    pipe = plan.timing
    gm = round(plan.load_bytes + plan.store_bytes)
    t = pipe.busy_us()
    return Node(index=k, kind=PHASE, name=phase.name, label=phase.name, resource=phase.unit,
                busy_us=t, busy_first_us=t, delay_us=0.0, delay_first_us=0.0, nbytes=gm, nbytes_first=gm,
                deps=tuple(sorted(set(deps))), slot_add=slot_add, slot_free=slot_free,
                work_us=pipe.tiles * pipe.compute_us, shared=HBM, pipe=pipe)


def _sync_node(k: int, sync: Sync, profile: Profile, riding: StateSpec | None, producer: int,
               slot_add: int, slot_free: int) -> Node:
    """A hand-off; `riding`: the state, where it rides on this one (not in a sequence's first chunk)."""
    extra = riding.nbytes if riding is not None else 0
    sizes = [(p.nbytes, p.dtype) for p in sync.payload]
    with_state = sizes + ([(extra, riding.dtype)] if riding is not None and extra else [])
    latency = profile.sync.latency_us
    return Node(index=k, kind=SYNC, name=sync.name, label=sync.label, resource=f"link:{sync.direction}",
                busy_us=_link_us(profile, sync.nbytes + extra, sync.direction, with_state),
                busy_first_us=_link_us(profile, sync.nbytes, sync.direction, sizes),
                delay_us=latency, delay_first_us=latency, nbytes=sync.nbytes + extra, nbytes_first=sync.nbytes,
                deps=(producer,), slot_add=slot_add, slot_free=slot_free, work_us=0.0, shared=L2)


def _state_hand_off_node(k: int, state: StateSpec, units: dict[str, str], profile: Profile) -> Node:
    src = units[state.producer]
    dst = CUBE if src == VEC else VEC
    return Node(index=k, kind=STATE, name="state", label="S", resource=f"link:{src}->{dst}",
                busy_us=_link_us(profile, state.nbytes, f"{src}->{dst}", [(state.nbytes, state.dtype)]),
                busy_first_us=0.0, delay_us=profile.sync.latency_us, delay_first_us=0.0,
                nbytes=state.nbytes, nbytes_first=0, deps=(), slot_add=0, slot_free=0, work_us=0.0, shared=L2)


def _state_edges(graph: PhaseGraph, units: dict[str, str], node_of_phase: dict[str, int],
                 state_sync: int | None) -> tuple[tuple[int, int], ...]:
    """(node in chunk t-1, node in chunk t): the state's producer to its hand-off and to its readers on the
    same unit."""
    state = graph.state
    if state is None:
        return ()
    producer = node_of_phase[state.producer]
    edges = [(producer, state_sync)] if state_sync is not None else []
    edges += [(producer, node_of_phase[r]) for r in state.readers if units[r] == units[state.producer]]
    return tuple(sorted(set(edges)))


def _war_edges(graph: PhaseGraph, steps: list, step_node: dict[int, int], node_of_phase: dict[str, int],
               state_sync: int | None) -> tuple[tuple[int, int], ...]:
    """Write after read: a resident tensor's (or the state's) readers in the previous chunk before its writer;
    and a flag into the next item before the phase that waits for it."""
    edges = [(step_node[i], node_of_phase[s.consumer]) for i, s in enumerate(steps)
             if isinstance(s, Sync) and s.next_item]
    for name, meta in graph.tensors.items():
        if meta.placement != "resident":
            continue
        writer = next(step_node[i] for i, s in enumerate(steps) if isinstance(s, Sync) and name in s.tensors)
        edges += [(node_of_phase[r], writer) for r in meta.readers]
    if graph.state is not None and state_sync is not None:
        edges += [(node_of_phase[r], state_sync) for r in graph.state.readers]
    return tuple(sorted(set(edges)))


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
