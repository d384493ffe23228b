"""What a run yields: hand-offs per chunk, serial and pipelined latency, utilisation, bound, efficiency.

The bound is a true lower bound on the pipelined latency: no schedule beats the busiest resource's total
work, nor the longest dependency chain (which, over many chunks, runs through the state hand-off).
Write-after-read edges and slot limits are design choices, not data dependencies: they are left out of
the bound, so an efficiency below 1 shows what they cost.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from npusim.model.engine import RIDE, STATE, SYNC, Run, Template, simulate
from npusim.record.graph import PhaseGraph
from npusim.chip.lanes import larger
from npusim.chip.profile import Profile


@dataclass(frozen=True)
class SyncLine:
    label: str
    direction: str
    tensors: tuple[str, ...]
    nbytes: int
    redundant_bytes: int
    unused_bytes: int
    redundant: tuple[str, ...]       # "V: already in GM (an input)"
    unused: tuple[str, ...]
    time_us: float                   # fixed latency + bytes / bandwidth, without the state


@dataclass(frozen=True)
class StateLine:
    mode: str | None                 # "ride", "own" or None (no state)
    rides_on: str | None             # label of the sync it rides on
    nbytes: int
    dtype: str
    producer: str
    readers: tuple[str, ...]
    time_us: float                   # what it adds per chunk (bytes; plus the fixed latency if own)
    handoffs: int                    # over the run: (chunks - 1) per sequence


@dataclass
class Report:
    program: str
    profile: str
    transfer_dtype: str
    chunks: int
    sequences: int
    cores: int
    syncs: list[SyncLine]
    state: StateLine
    phase_us: dict[str, float]                   # per chunk, after the first
    macs_by_phase: dict[str, int]
    element_ops_by_phase: dict[str, int]
    serial_us: float
    pipelined_us: float
    bound_us: float
    bound_unit_us: float                         # busiest resource's total on the busiest core
    bound_unit: str
    bound_chain_us: float                        # longest dependency chain of one sequence
    busy_us: dict[str, float]                    # per resource, summed over cores
    utilization: dict[str, float]                # per resource: busy / (cores x makespan)
    launch_us: float
    ai_cores: int = 1                            # the chip's cores (cores above: those with work)
    waves: int = 1                               # sequences per core, rounded up
    roofline_us: float = 0.0                     # all MACs / (ai_cores x Cube rate): the chip's Cube bound
    chip_utilization: dict[str, float] = field(default_factory=dict)    # busy / (ai_cores x makespan)
    shared_utilization: dict[str, float] = field(default_factory=dict)  # HBM / L2 bytes over chip rate / makespan
    assumptions: dict[str, str] = field(default_factory=dict)

    @property
    def roofline_efficiency(self) -> float:
        """Cube roofline / pipelined latency: how close the design runs to the chip's matrix peak."""
        return self.roofline_us / self.pipelined_us

    @property
    def syncs_per_chunk(self) -> int:
        return len(self.syncs)

    @property
    def sync_bytes_per_chunk(self) -> list[int]:
        return [s.nbytes for s in self.syncs]

    @property
    def redundant_bytes_per_chunk(self) -> int:
        return sum(s.redundant_bytes for s in self.syncs)

    @property
    def unused_bytes_per_chunk(self) -> int:
        return sum(s.unused_bytes for s in self.syncs)

    @property
    def sync_us_per_chunk(self) -> float:
        """Time in intra-chunk syncs per chunk, as in serial mode (the state hand-off apart)."""
        return sum(s.time_us for s in self.syncs)

    @property
    def speedup(self) -> float:
        return self.serial_us / self.pipelined_us

    @property
    def efficiency(self) -> float:
        return self.bound_us / self.pipelined_us

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(roofline_efficiency=self.roofline_efficiency, syncs_per_chunk=self.syncs_per_chunk, sync_bytes_per_chunk=self.sync_bytes_per_chunk,
                 redundant_bytes_per_chunk=self.redundant_bytes_per_chunk,
                 unused_bytes_per_chunk=self.unused_bytes_per_chunk, sync_us_per_chunk=self.sync_us_per_chunk,
                 speedup=self.speedup, efficiency=self.efficiency)
        return d


def chain_us(tpl: Template, chunks: int) -> float:
    """Longest dependency path through `chunks` chunks of one sequence (intra-chunk and state edges)."""
    n = tpl.n
    state_in: list[list[int]] = [[] for _ in range(n)]
    for a, b in tpl.state_edges:
        state_in[b].append(a)
    prev: list[float] | None = None
    for t in range(chunks):
        first = t == 0
        fin = [0.0] * n
        for node in tpl.nodes:        # program order is a topological order
            ready = larger(0.0, *(fin[d] for d in node.deps))
            if prev is not None and state_in[node.index]:
                ready = larger(ready, *(prev[a] for a in state_in[node.index]))
            dur = (node.busy_first_us + node.delay_first_us) if first else (node.busy_us + node.delay_us)
            fin[node.index] = ready + dur
        prev = fin
    return larger(*prev)


def unit_loads(tpl: Template, chunks: int, sequences_on_core: int) -> dict[str, float]:
    loads: dict[str, float] = {}
    for node in tpl.nodes:
        per_seq = node.busy_first_us + (chunks - 1) * node.busy_us
        loads[node.resource] = loads.get(node.resource, 0.0) + per_seq * sequences_on_core
    return loads


def build_report(pipelined: Run, serial: Run) -> Report:
    tpl, profile = pipelined.template, pipelined.profile
    graph: PhaseGraph = tpl.graph
    chunks, sequences, cores = pipelined.chunks, pipelined.sequences, pipelined.cores_used
    lines = []
    for s in graph.syncs:
        lines.append(SyncLine(s.label, s.direction, s.tensors, s.nbytes, s.redundant_bytes, s.unused_bytes,
                              tuple(f"{p.name}: {p.redundant}" for p in s.payload if p.redundant),
                              tuple(p.name for p in s.payload if p.unused and not p.redundant),
                              profile.sync_us(s.nbytes)))
    st = graph.state
    if st is None:
        state = StateLine(None, None, 0, "", "", (), 0.0, 0)
    else:
        rides_on = None
        extra = 0.0
        if tpl.state_sync is not None:
            node = tpl.nodes[tpl.state_sync]
            if node.kind == SYNC:
                rides_on = node.label
                extra = node.busy_us - node.busy_first_us
            elif node.kind == STATE:
                extra = node.busy_us + node.delay_us
        state = StateLine(tpl.state_mode, rides_on, st.nbytes, st.dtype, st.producer, st.readers, extra,
                          (chunks - 1) * sequences if tpl.state_mode else 0)
    per_core = -(-sequences // cores)
    loads = unit_loads(tpl, chunks, per_core)
    bound_unit = max(loads, key=loads.get)
    chain = chain_us(tpl, chunks)
    launch = profile.chip.launch_overhead_us
    bound = max(loads[bound_unit], chain) + launch
    busy: dict[str, float] = {}
    for (_, r), b in pipelined.busy_us.items():
        busy[r] = busy.get(r, 0.0) + b
    span = pipelined.makespan_us
    util = {r: b / (cores * span) if span else 0.0 for r, b in busy.items()}
    ai_cores = profile.chip.ai_cores
    mac_us = sum(op.macs / profile.cube_macs_per_us(op.operand_bytes)
                 for p in graph.phases if p.unit == "cube" for op in p.ops if op.macs)
    return Report(
        program=graph.program, profile=profile.name, transfer_dtype=graph.transfer_dtype, chunks=chunks,
        sequences=sequences, cores=cores, syncs=lines, state=state,
        phase_us={n.name: n.busy_us for n in tpl.nodes if n.kind not in (SYNC, STATE)},
        macs_by_phase=graph.macs_by_phase(), element_ops_by_phase=graph.element_ops_by_phase(),
        serial_us=serial.latency_us, pipelined_us=pipelined.latency_us, bound_us=bound,
        bound_unit_us=loads[bound_unit], bound_unit=bound_unit, bound_chain_us=chain,
        busy_us=busy, utilization=util, launch_us=launch, ai_cores=ai_cores, waves=pipelined.waves,
        roofline_us=mac_us * chunks * sequences / ai_cores,
        chip_utilization={r: b / (ai_cores * span) if span else 0.0 for r, b in busy.items()},
        shared_utilization={r: b / span if span else 0.0 for r, b in pipelined.shared_us.items()},
        assumptions=profile.assumptions)


def run_and_report(graph: PhaseGraph, profile: Profile, *, chunks: int, sequences: int = 1,
                   state_handoff: str = RIDE, trace: bool = True) -> tuple[Report, Run, Run]:
    """Simulate pipelined and serial, and build the report. Returns (report, pipelined run, serial run)."""
    from npusim.model.engine import build_template
    tpl = build_template(graph, profile, state_handoff)
    piped = simulate(tpl, profile, chunks=chunks, sequences=sequences, trace=trace)
    serial = simulate(tpl, profile, chunks=chunks, sequences=sequences, serial=True, trace=trace)
    return build_report(piped, serial), piped, serial
