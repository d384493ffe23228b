"""What a design's run yields, pass by pass and as a whole: latency against its bound, the chip's HBM floor
and the Cube roofline; launches, barriers, hand-offs and HBM bytes.

    bound   per pass: max(the busiest core's load on its busiest unit or link, the longest dependency
            chain of one item or sequence), plus every launch and barrier: no schedule of these passes
            beats it;
    floor   the least HBM traffic any design needs (inputs read once, outputs and final states written
            once) over the chip's HBM bandwidth: no design beats it;
    roofline all MACs of the design over the chip's Cube rate.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from npusim.chip.lanes import larger
from npusim.model.multipass import DesignRun
from npusim.output.report import chain_us
from npusim.model.schedule import CHUNKS


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
        d = asdict(self)
        d.update(efficiency=self.efficiency, floor_ratio=self.floor_ratio,
                 roofline_efficiency=self.roofline_efficiency, syncs_per_chunk=self.syncs_per_chunk,
                 sync_bytes_per_chunk=self.sync_bytes_per_chunk)
        return d


def _pass_bound(pr, counts: tuple[int, ...]) -> float:
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
    profile = run.profile
    lines = []
    roofline_us = 0.0
    for pr in run.passes:
        g = pr.run.template.graph
        gm = sum(ph.gm_read_bytes + ph.gm_write_bytes for ph in g.phases)
        macs = sum(op.macs for ph in g.phases for op in ph.ops)
        roofline_us += sum(op.macs / profile.cube_macs_per_us(op.operand_bytes)
                           for ph in g.phases if ph.unit == "cube" for op in ph.ops if op.macs) * pr.items
        lines.append(PassLine(pr.pass_.name, g.program, pr.pass_.layout, pr.pass_.boundary, pr.boundary_us,
                              pr.items, pr.run.cores_used, pr.run.makespan_us,
                              _pass_bound(pr, run.chunk_counts), len(g.syncs), sum(g.sync_bytes),
                              gm * pr.items, macs))
    rate = profile.memory.chip_bandwidth_gbps * 1e3
    floor = floor_bytes / rate if rate != float("inf") else 0.0
    return DesignReport(
        design=run.design.name, profile=profile.name, passes=lines, latency_us=run.latency_us,
        serial_us=serial.latency_us if serial is not None else None,
        bound_us=sum(p.bound_us + p.boundary_us for p in lines), floor_us=floor, floor_bytes=floor_bytes,
        roofline_us=roofline_us / profile.chip.ai_cores, launches=run.design.launches,
        barriers=run.design.barriers, hbm_bytes=run.hbm_bytes, interleave=run.interleave)
