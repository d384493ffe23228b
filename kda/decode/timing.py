"""A decode step on the simulated chip: one work item's phase graph, recorded once per shape and precision,
replayed for every item of the batch on the event model (npusim/model/engine.py).

A worker (a block, or one AIV of it) is a "sequence" of the event model and its items are that sequence's
"chunks", in order; blocks beyond the chip's cores wait for a free core. An item of one Vector phase runs as
three nodes on its worker's pipes, MTE2 (the loads), the Vector unit and MTE3 (the stores), linked to the
next item by the kernel's loop rule (kda/decode/design.py); an item of several phases (Cube and Vector) is
the phase graph with its hand-offs, the next item in the other ping/pong slot. Every load and store shares
the chip's HBM bandwidth with the other workers (or L2's, for a benchmark that times the state warm in L2).

The bound of a step, each term the time it would take alone:
    launch     the profile's launch overhead of one kernel
    HBM        the design's GM traffic (every item's loads and stores) at the chip's HBM bandwidth
    Vector     the busiest worker's items as its loop runs them (no contention), where their Vector (or
               Cube) time is the larger part: serial items n (l + c + s), the store behind the next load
               n (c + max(l, s)), two in flight n max(l, c, s); l and s its loads and stores at its own
               DataCopy rates (msKPP's tables)
    transfers  the same, where the loads and stores are the larger part
and the HBM floor: the state read and written once, with q, k, v, g, beta and o, at the HBM bandwidth (no
design moves less; the HBM term is the floor where a design reads nothing twice).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import torch
import torch.nn.functional as F

from npusim import Executor, PhaseGraph, Precision
from npusim.chip.profile import Profile
from npusim.model.engine import Run, simulate
from npusim.model.template import HBM, L2, PHASE, Node, Template, build_template
from npusim.record.graph import CUBE
from npusim.record.precision import itemsize

from kda.decode.design import AIV0, AIV_PAIRS, AIVS, DOUBLE, SERIAL, STORE_BEHIND, DecodeDesign
from kda.decode.programs.steps import GATE

LAUNCH, FLOOR, VECTOR, TRANSFERS = "launch", "HBM", "Vector", "transfers"


@dataclass(frozen=True)
class DecodeShape:
    """One decode step: `batch` sequences, `tokens` tokens each (1, or MTP's few), `value_heads` states per
    sequence sharing `heads` q/k heads (grouped value heads when value_heads > heads)."""
    batch: int
    heads: int
    value_heads: int
    d_k: int = 128
    d_v: int = 128
    tokens: int = 1

    @property
    def states(self) -> int:
        return self.batch * self.value_heads

    def text(self) -> str:
        heads = f"H={self.heads}" + (f" HV={self.value_heads}" if self.value_heads != self.heads else "")
        return f"B={self.batch} T={self.tokens} {heads} K={self.d_k} V={self.d_v}"


@dataclass(frozen=True)
class Types:
    """Where each tensor lives in GM: q, k, v and o (`io`), g and beta (`gate`), the state."""
    io: str = "bf16"
    gate: str = "fp32"
    state: str = "fp32"


def item_inputs(design: DecodeDesign, shape: DecodeShape, options: tuple[str, ...], dtype=torch.float32) -> dict:
    """Random inputs of one work item (one value head, or one tile of its columns), for recording."""
    gen = torch.Generator().manual_seed(0)
    def rnd(*s):
        return torch.randn(*s, generator=gen, dtype=dtype)
    T, K = shape.tokens, shape.d_k
    V = design.v_tile or shape.d_v
    gate_width = 1 if design.gate == "gdn" else K
    state = (1, V, K) if design.state_layout == "vk" else (1, K, V)
    inputs = {"q": F.normalize(rnd(1, T, K), dim=-1), "k": F.normalize(rnd(1, T, K), dim=-1), "v": rnd(1, T, V),
              "g": F.logsigmoid(rnd(1, T, gate_width)), "beta": torch.sigmoid(rnd(1, T)),
              "S_in": rnd(*state) * 0.1, "scale": K ** -0.5, "options": options}
    if GATE in options:
        inputs["A_log"] = rnd(1, 1)
        inputs["dt_bias"] = rnd(1, gate_width)
    return inputs


def precision_of(design: DecodeDesign, types: Types) -> Precision:
    """Hand-offs in the design's type; the state and the output stored in theirs."""
    return Precision(design.handoff, {"S_out": types.state, "o": types.io}, state=types.state)


def input_types(types: Types) -> dict[str, str]:
    return {"q": types.io, "k": types.io, "v": types.io, "g": types.gate, "beta": types.gate,
            "S_in": types.state, "A_log": "fp32", "dt_bias": "fp32"}


def record(design: DecodeDesign, shape: DecodeShape, types: Types, options: tuple[str, ...]) -> PhaseGraph:
    """The phase graph of one work item (it depends on the item's shapes and types only)."""
    return _record(design, replace(shape, batch=1, heads=1, value_heads=1), types, options)


@lru_cache(maxsize=256)
def _record(design: DecodeDesign, shape: DecodeShape, types: Types, options: tuple[str, ...]) -> PhaseGraph:
    inputs = item_inputs(design, shape, options)
    ex = Executor(design.program, precision_of(design, types), input_types=input_types(types))
    sizes = {"chunk_size": shape.tokens, "d_k": shape.d_k, "d_v": design.v_tile or shape.d_v}
    return ex.record(inputs, None, shapes=sizes)


def on_chip(profile: Profile, design: DecodeDesign) -> Profile:
    """The chip as the kernel uses it: a Vector-only kernel's workers are the AIVs (one Vector unit each);
    AIV0-only kernels use one Vector unit per core; BUFFER_NUM inside an item is the design's. A decode
    item's GM tiles are contiguous (one head's state, one token's rows), so no strided-row cost."""
    chip, isa, core = profile.chip, profile.isa, profile.core
    if design.buffers is not None:
        core = replace(core, buffer_num=design.buffers)
    if design.workers in (AIVS, AIV_PAIRS):
        chip = replace(chip, ai_cores=chip.ai_cores * chip.vec_per_core, vec_per_core=1)
    elif design.workers == AIV0:
        chip = replace(chip, vec_per_core=1)
    return replace(profile, chip=chip, core=core, isa=replace(isa, gm_burst_cycles=0.0))


def item_template(graph: PhaseGraph, profile: Profile, design: DecodeDesign, warm: bool = False) -> Template:
    """The timed nodes of one item (see the module docstring); `warm`: its GM traffic shares L2, not HBM."""
    tpl = build_template(graph, profile, check=bool(graph.syncs))
    if not graph.syncs and all(n.pipe is not None and n.pipe.tiles == 1 for n in tpl.nodes):
        tpl = _pipes_as_nodes(tpl, loop_of(tpl, design))
    if warm:
        tpl = replace(tpl, nodes=tuple(replace(n, shared=L2) if n.shared == HBM else n for n in tpl.nodes))
    return tpl


def loop_of(tpl: Template, design: DecodeDesign) -> str:
    """The design's loop rule, or SERIAL where two items in flight (DOUBLE) do not fit the unit's memory."""
    if design.loop == DOUBLE and any(2 * p.peak_bytes > p.capacity_bytes for p in tpl.plans):
        return SERIAL
    return design.loop


def _pipes_as_nodes(tpl: Template, loop: str) -> Template:
    """The phases of one unit as load, compute and store nodes (MTE2, the unit, MTE3): a phase's store
    overlaps the next phase's compute; the loop rule links one item to the next."""
    nodes: list[Node] = []
    loads: list[int] = []
    comps: list[int] = []
    stores: list[int] = []
    for node, plan in zip(tpl.nodes, tpl.plans):
        pipe = node.pipe
        if pipe is None:
            raise ValueError(f"decode: phase {node.name} has no pipe segments (a template built without pipes)")
        lb, sb = round(plan.load_bytes), round(plan.store_bytes)
        deps = list(comps[-1:])
        if lb:
            loads.append(len(nodes))
            deps.append(len(nodes))
            nodes.append(Node(len(nodes), PHASE, f"{node.name}:load", "L", "mte2", pipe.load_us, pipe.load_us,
                              0.0, 0.0, lb, lb, (), shared=HBM))
        comps.append(len(nodes))
        nodes.append(Node(len(nodes), PHASE, node.name, node.label, node.resource, pipe.compute_us, pipe.compute_us,
                          0.0, 0.0, 0, 0, tuple(deps), work_us=pipe.compute_us))
        if sb:
            stores.append(len(nodes))
            nodes.append(Node(len(nodes), PHASE, f"{node.name}:store", "S", "mte3", pipe.store_us, pipe.store_us,
                              0.0, 0.0, sb, sb, (comps[-1],), shared=HBM))
    first = loads[0] if loads else comps[0]
    if loop == SERIAL:                  # everything of this item before the next item's first load
        war = tuple((x, first) for x in stores + comps[-1:])
    elif loop == STORE_BEHIND:          # the input buffer once read, the output buffer once stored
        war = ((comps[-1], first),) + tuple((x, comps[0]) for x in stores)
    else:
        war = ()
    release = (stores or comps)[-1] if loop == DOUBLE else None
    return replace(tpl, nodes=tuple(nodes), state_edges=(), war_edges=war, state_mode=None, state_sync=None,
                   slot_release=release)


@dataclass
class DecodeRun:
    design: DecodeDesign
    shape: DecodeShape
    types: Types
    profile: Profile                # as the kernel uses it (on_chip)
    run: Run
    counts: tuple[int, ...]         # items of each worker
    floor_bytes: int                # unique GM bytes of the step
    item_compute_us: float          # one item's Vector and Cube time (the larger of the two)
    item_load_us: float             # one item's loads at the worker's own rates
    item_store_us: float            # and its stores
    item_bytes: int = 0             # one item's GM loads and stores (padded rows, re-reads included)
    loop: str = ""                  # the loop rule the items ran with (kda/decode/design.py)
    warm: bool = False

    @property
    def launch_us(self) -> float:
        return self.profile.chip.launch_overhead_us

    @property
    def latency_us(self) -> float:
        return self.run.latency_us

    @property
    def device_us(self) -> float:
        return self.run.makespan_us

    @property
    def bandwidth_gbps(self) -> float:
        """The chip-wide rate the state moves at: L2's for a warm state, else HBM's."""
        return self.profile.memory.l2_bandwidth_gbps if self.warm else self.profile.memory.chip_bandwidth_gbps

    @property
    def floor_us(self) -> float:
        return self.floor_bytes / (self.bandwidth_gbps * 1e3)

    @property
    def traffic_bytes(self) -> int:
        return self.items * self.item_bytes

    @property
    def traffic_us(self) -> float:
        return self.traffic_bytes / (self.bandwidth_gbps * 1e3)

    @property
    def worker_us(self) -> float:
        """The busiest worker's items as its loop runs them, without contention (the module docstring)."""
        n, ld, c, s = max(self.counts), self.item_load_us, self.item_compute_us, self.item_store_us
        if self.loop == STORE_BEHIND:
            return n * (c + max(ld, s)) + min(ld, s)
        if self.loop in (DOUBLE, "ping/pong"):
            return n * max(ld, c, s) + (ld + c + s - max(ld, c, s))
        return n * (ld + c + s)

    @property
    def worker_term(self) -> str:
        return VECTOR if self.item_compute_us >= self.item_load_us + self.item_store_us else TRANSFERS

    def terms(self) -> dict[str, float]:
        return {LAUNCH: self.launch_us, FLOOR: self.traffic_us, self.worker_term: self.worker_us}

    @property
    def bound(self) -> str:
        """The largest of the terms: what the step waits for most."""
        terms = self.terms()
        return max(terms, key=lambda name: terms[name])

    @property
    def workers(self) -> int:
        return len(self.counts)

    @property
    def items(self) -> int:
        return sum(self.counts)


def floor_bytes(shape: DecodeShape, types: Types, gate_width: int | None = None) -> int:
    """GM bytes a step must move at least: the state in and out, each token's q, k (per q/k head), v, g,
    beta and o once."""
    s, T = shape, shape.tokens
    io, gate, state = itemsize(types.io), itemsize(types.gate), itemsize(types.state)
    g = s.d_k if gate_width is None else gate_width
    per_token = 2 * s.heads * s.d_k * io + s.value_heads * (2 * s.d_v * io + g * gate + gate)
    return s.batch * (2 * s.value_heads * s.d_k * s.d_v * state + T * per_token)


def types_for(design: DecodeDesign, io: str = "bf16", state: str = "fp32") -> Types:
    """The GM types a design runs with: a measured kernel's own, else the asked ones."""
    return Types(design.io_dtype or io, design.gate_dtype, state)


def options_for(design: DecodeDesign, options: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The in-kernel options a design runs: a measured kernel's fixed set, else the asked ones."""
    return tuple(design.options) if design.options is not None else tuple(options)


STEADY = 8      # items a worker runs in the event model before its period is extrapolated


def replay(tpl: Template, chip: Profile, counts: list[int], trace: bool = False, exact: bool = True) -> Run:
    """The items on the event model. Not `exact` (a long sweep) and beyond 2 x STEADY items on the busiest
    worker, the model runs the last 2 x STEADY and the last STEADY of them, and the rest is extrapolated at
    the period the model settles into between the two: within 3.5 % of the full replay on every design here
    (tests/decode/test_decode_timing.py holds it to that)."""
    n = max(counts)
    if trace or exact or n <= 2 * STEADY:
        return simulate(tpl, chip, chunks=counts, sequences=len(counts), trace=trace)
    cut = n - 2 * STEADY
    a = simulate(tpl, chip, chunks=[c - cut for c in counts], sequences=len(counts), trace=False)
    b = simulate(tpl, chip, chunks=[c - cut - STEADY for c in counts], sequences=len(counts), trace=False)
    period = (a.makespan_us - b.makespan_us) / STEADY
    return replace(a, makespan_us=a.makespan_us + cut * period, chunks=n, chunk_counts=tuple(counts))


@lru_cache(maxsize=512)
def _template(design: DecodeDesign, shape: DecodeShape, types: Types, options: tuple[str, ...], profile: Profile,
              warm: bool) -> tuple[Template, Profile, PhaseGraph]:
    graph = record(design, shape, types, options)
    chip = on_chip(profile, design)
    tpl = item_template(graph, chip, design, warm)
    return tpl, chip, graph


def time_step(design: DecodeDesign, shape: DecodeShape, profile: Profile, *, types: Types = Types(),
              options: tuple[str, ...] = (), warm: bool = False, trace: bool = False,
              exact: bool = True) -> DecodeRun:
    """The step's latency on `profile`: its items over the kernel's workers on the event model (`exact`:
    every item replayed; otherwise a long worker's period extrapolated, see `replay`)."""
    options = options_for(design, options)
    item = replace(shape, batch=1, heads=1, value_heads=1)
    tpl, chip, graph = _template(design, item, types, options, profile, warm)
    if design.loop == DOUBLE and tpl.slot_release is not None:
        chip = replace(chip, workspace=replace(chip.workspace, slots=2))
    items = shape.states * design.tiles_per_head(shape.d_v)
    cores = profile.chip.ai_cores
    counts = design.worker_items(items, cores, cores * profile.chip.vec_per_core)
    run = replay(tpl, chip, counts, trace, exact)
    unit_us = {u: sum(p.timing.tiles * p.timing.compute_us for p in tpl.plans if p.unit == u) for u in ("vec", CUBE)}
    load = sum(p.timing.tiles * p.timing.load_us for p in tpl.plans)
    store = sum(p.timing.tiles * p.timing.store_us for p in tpl.plans)
    item_bytes = round(sum(p.load_bytes + p.store_bytes for p in tpl.plans))
    gate_width = 1 if design.gate == "gdn" else None
    split = not graph.syncs and all(p.tiles == 1 for p in tpl.plans)
    loop = loop_of(tpl, design) if split else "ping/pong" if graph.syncs else "tiled, serial"
    return DecodeRun(design, shape, types, chip, run, tuple(counts), floor_bytes(shape, types, gate_width),
                     max(unit_us.values()), load, store, item_bytes, loop, warm)
