"""What a design's run yields, pass by pass and as a whole.

    DesignReport  the design: latency against its bound, the chip's HBM floor and the Cube roofline;
                  launches, barriers, hand-offs and HBM bytes; a PassLine per pass
    Report        a pass's detail per chunk: hand-offs, serial and pipelined latency, utilisation, bound

A pass's bound is a true lower bound on its pipelined latency: no schedule beats the busiest resource's
total work, nor the longest dependency chain (which, over many chunks, runs through the state hand-off).
The design's bound adds every launch and barrier; the floor is the least HBM traffic any design needs
(inputs read once, outputs and final states written once) over the chip's HBM bandwidth; the roofline,
all MACs of the design over the chip's Cube rate.

Write-after-read edges and slot limits are design choices, not data dependencies: they are left out of
the bound, so an efficiency below 1 shows what they cost.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import numpy as np

from npusim.chip.lanes import larger
from npusim.chip.profile import Profile
from npusim.model.engine import RIDE, STATE, SYNC, Run, Template, simulate
from npusim.model.multipass import DesignRun
from npusim.model.schedule import CHUNKS
from npusim.record.graph import PhaseGraph


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
    if chunks < 1:
        raise ValueError(f"chain_us: {chunks} chunks (a sequence has at least one)")
    state_in: list[list[int]] = [[] for _ in range(tpl.n)]
    for a, b in tpl.state_edges:
        state_in[b].append(a)
    # program order is a topological order; each node: its index, deps, state sources, first and later duration
    nodes = [(x.index, x.deps, state_in[x.index], x.busy_first_us + x.delay_first_us, x.busy_us + x.delay_us)
             for x in tpl.nodes]
    if not any(isinstance(d, np.ndarray) for *_, first, later in nodes for d in (first, later)):
        return _chain_compiled(nodes, tpl.n, chunks)
    prev: list = [0.0] * tpl.n
    for t in range(chunks):
        fin: list = [0.0] * tpl.n
        for i, deps, state, first, later in nodes:
            ready = larger(0.0, *(fin[d] for d in deps))
            if t and state:
                ready = larger(ready, *(prev[a] for a in state))
            fin[i] = ready + (later if t else first)
        prev = fin
    return larger(*prev)


def _chain_compiled(nodes: list, n: int, chunks: int) -> float:
    """chain_us for one profile (every duration a number), compiled: the same maxima and sums in the same order."""
    from npusim.output.chain import longest_chain
    deps, state = _csr([x[1] for x in nodes]), _csr([x[2] for x in nodes])
    return float(longest_chain(chunks, n, np.array([x[0] for x in nodes], np.int64), *deps, *state,
                               np.array([float(x[3]) for x in nodes]), np.array([float(x[4]) for x in nodes])))


def _csr(lists: list) -> tuple[np.ndarray, np.ndarray]:
    """Lists of indices as (offsets, the indices one after the other)."""
    return (np.cumsum([0] + [len(x) for x in lists], dtype=np.int64),
            np.array([i for x in lists for i in x], np.int64))


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
    bound_unit = max(loads, key=lambda r: loads[r])
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


@dataclass(frozen=True)
class PassLine:
    name: str
    program: str
    layout: str
    boundary: str
    boundary_us: float
    items: int                     # (sequence, chunk) instances
    cores: int
    makespan_us: float
    bound_us: float
    syncs_per_item: int
    sync_bytes_per_item: int
    hbm_bytes: int
    macs: int
    detail: Report | None = field(default=None, compare=False, repr=False)   # per chunk (None: no serial run)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "detail"}


@dataclass
class DesignReport:
    design: str
    profile: str
    passes: list[PassLine]
    latency_us: float
    serial_us: float | None
    bound_us: float
    floor_us: float
    floor_bytes: int
    roofline_us: float
    launches: int
    barriers: int
    hbm_bytes: int
    interleave: int

    @property
    def efficiency(self) -> float:
        """bound / latency: what the schedule leaves on the table for these passes."""
        return self.bound_us / self.latency_us if self.latency_us else 0.0

    @property
    def floor_ratio(self) -> float:
        """latency / floor: how many times the chip's HBM floor the design takes."""
        return self.latency_us / self.floor_us if self.floor_us else float("inf")

    @property
    def roofline_efficiency(self) -> float:
        return self.roofline_us / self.latency_us if self.latency_us else 0.0

    @property
    def syncs_per_chunk(self) -> int:
        """Cross-core hand-offs per (sequence, chunk), summed over the passes."""
        return sum(p.syncs_per_item for p in self.passes)

    @property
    def sync_bytes_per_chunk(self) -> int:
        return sum(p.sync_bytes_per_item for p in self.passes)

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["passes"] = [p.to_dict() for p in self.passes]
        d.update(efficiency=self.efficiency, floor_ratio=self.floor_ratio,
                 roofline_efficiency=self.roofline_efficiency, syncs_per_chunk=self.syncs_per_chunk,
                 sync_bytes_per_chunk=self.sync_bytes_per_chunk)
        return d


def pass_bound(pr, counts: tuple[int, ...]) -> float:
    run, tpl = pr.run, pr.run.template
    cores = run.cores_used
    if pr.pass_.layout == CHUNKS:
        per_core = [(run.instances + cores - 1 - c) // cores for c in range(cores)]
        load = max(per_core) * larger(*_per_instance(tpl, later=False).values())
        return larger(load, chain_us(tpl, 1))
    loads = []
    for c in range(cores):
        seqs = range(c, len(counts), cores)
        per_res: dict[str, float] = {}
        for res, first in _per_instance(tpl, later=False).items():
            later = _per_instance(tpl, later=True)[res]
            per_res[res] = sum(first + (counts[s] - 1) * later for s in seqs)
        loads.append(larger(*per_res.values()))
    return larger(*loads, chain_us(tpl, max(counts)))


def _per_instance(tpl, later: bool) -> dict[str, float]:
    out: dict[str, float] = {}
    for node in tpl.nodes:
        out[node.resource] = out.get(node.resource, 0.0) + (node.busy_us if later else node.busy_first_us)
    return out


def build_design_report(run: DesignRun, serial: DesignRun | None, floor_bytes: int) -> DesignReport:
    """The design's report; each pass's line carries its per-chunk detail when `serial` is given."""
    profile = run.profile
    lines = []
    roofline_us = 0.0
    serial_runs = [p.run for p in serial.passes] if serial is not None else [None] * len(run.passes)
    for pr, ser in zip(run.passes, serial_runs):
        g = pr.run.template.graph
        gm = sum(ph.gm_read_bytes + ph.gm_write_bytes for ph in g.phases)
        macs = sum(op.macs for ph in g.phases for op in ph.ops)
        roofline_us += sum(op.macs / profile.cube_macs_per_us(op.operand_bytes)
                           for ph in g.phases if ph.unit == "cube" for op in ph.ops if op.macs) * pr.items
        lines.append(PassLine(pr.pass_.name, g.program, pr.pass_.layout, pr.pass_.boundary, pr.boundary_us,
                              pr.items, pr.run.cores_used, pr.run.makespan_us,
                              pass_bound(pr, run.chunk_counts), len(g.syncs), sum(g.sync_bytes),
                              gm * pr.items, macs, build_report(pr.run, ser) if ser is not None else None))
    rate = profile.memory.chip_bandwidth_gbps * 1e3
    floor = floor_bytes / rate if rate != float("inf") else 0.0
    return DesignReport(
        design=run.design.name, profile=profile.name, passes=lines, latency_us=run.latency_us,
        serial_us=serial.latency_us if serial is not None else None,
        bound_us=sum(p.bound_us + p.boundary_us for p in lines), floor_us=floor, floor_bytes=floor_bytes,
        roofline_us=roofline_us / profile.chip.ai_cores, launches=run.design.launches,
        barriers=run.design.barriers, hbm_bytes=run.hbm_bytes, interleave=run.interleave)
