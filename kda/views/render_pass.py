"""The detail of a design's pass per chunk, shown for a design of one pass (render.py): its hand-offs, the
work per phase, latency against the bound, the whole layer on the chip and the overlap."""
from __future__ import annotations

from typing import Literal

from rich import box
from rich.table import Table
from rich.text import Text

from kda.studies.claims import CLAIMS
from kda.studies.evaluate import VersionResult

KIB = 1024
ARROW = {"vec->cube": "Vec→Cube", "cube->vec": "Cube→Vec"}


def pass_parts(r: VersionResult) -> list:
    """The tables of a one-pass design: hand-offs, then (with timing) work, memories, latency, the chip
    (more than one core or sequence) and the overlap."""
    from kda.views.render_memory import memory_table
    parts: list = [sync_table(r), *redundancy_lines(r)]
    if r.report is None:
        return parts
    parts += [work_table(r), memory_table(r), latency_table(r)]
    if many_sequences(r):
        parts.append(chip_table(r))
    if r.pipelined is not None and r.pipelined.trace is not None:
        parts.append(overlap_table(r))
    return parts


def many_sequences(r: VersionResult) -> bool:
    return r.report is not None and (r.report.cores > 1 or r.report.sequences > 1)


def sync_table(r: VersionResult) -> Table:
    g = r.execution.graph
    claim = CLAIMS.get(r.version, {}).get("sync_kib")
    t = Table(title=f"Hand-offs per chunk ({len(g.syncs)} syncs)", box=box.SIMPLE_HEAD, title_justify="left")
    columns: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("", "left"), ("direction", "left"), ("tensors (* redundant, † unused)", "left"),
        ("KiB", "right"), ("doc KB", "right"), ("time µs", "right"))
    for col, just in columns:
        t.add_column(col, justify=just)
    rep = r.report
    for i, s in enumerate(g.syncs):
        names = ", ".join(p.name + ("*" if p.redundant else "†" if p.unused else "")
                          + (f" ({p.dtype})" if p.dtype != g.transfer_dtype and not p.redundant else "")
                          for p in s.payload)
        doc = str(claim[i]) if claim and i < len(claim) else ""
        time = f"{rep.syncs[i].time_us:.2f}" if rep else ""
        t.add_row(s.label, ARROW.get(s.direction, s.direction), names, f"{s.nbytes / KIB:g}", doc, time)
    total_doc = str(CLAIMS.get(r.version, {}).get("total_kib", ""))
    t.add_row("", "", Text("total", style="bold"), f"{sum(g.sync_bytes) / KIB:g}", total_doc,
              f"{rep.sync_us_per_chunk:.2f}" if rep else "", end_section=True)
    if rep and rep.state.mode and g.state is not None:
        where = f"rides on sync {rep.state.rides_on}" if rep.state.rides_on else "its own sync"
        t.add_row("S", "Vec→Cube" if g.phase(g.state.producer).unit == "vec" else "Cube→Vec",
                  f"state {g.state.output_name} → next chunk's {g.state.input_name} ({where})",
                  f"{rep.state.nbytes / KIB:g}", "", f"+{rep.state.time_us:.2f}")
    return t


def redundancy_lines(r: VersionResult) -> list[Text]:
    g = r.execution.graph
    out = []
    for s in g.syncs:
        for p in s.payload:
            if p.redundant:
                out.append(Text(f"* sync {s.label}: {p.name} ({p.nbytes / KIB:g} KiB) is redundant: {p.redundant}"))
            elif p.unused:
                out.append(Text(f"† sync {s.label}: {p.name} ({p.nbytes / KIB:g} KiB) is never read by the "
                                f"{'Cube' if s.direction.endswith('cube') else 'Vector'} unit"))
    return out


def latency_table(r: VersionResult) -> Table:
    rep = r.timed_report()
    n = r.execution.chunks
    claim = CLAIMS.get(r.version, {})
    t = Table(title=f"Latency on {r.profile.name} ({n} chunks, {rep.cores} AI core(s), launch {rep.launch_us:g} µs included)",
              box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("")
    t.add_column("µs", justify="right")
    t.add_column("per chunk" if rep.waves == 1 else f"per chunk ({rep.waves} waves)", justify="right")
    t.add_column("", justify="left")
    def per(x):
        return f"{(x - rep.launch_us) / (n * rep.waves):.2f}"     # a core runs `waves` sequences
    doc = f"doc: {claim['latency_us']} µs per chunk" if "latency_us" in claim else ""
    t.add_row("serial (no overlap)", f"{rep.serial_us:.2f}", per(rep.serial_us), doc)
    t.add_row("pipelined", f"{rep.pipelined_us:.2f}", per(rep.pipelined_us), f"speed-up {rep.speedup:.2f}×")
    t.add_row("lower bound", f"{rep.bound_us:.2f}", per(rep.bound_us),
              f"busiest unit {_unit(rep.bound_unit)} {rep.bound_unit_us:.2f} µs; dependency chain {rep.bound_chain_us:.2f} µs")
    t.add_row("efficiency", f"{rep.efficiency:.2f}", "", "bound / pipelined")
    sync_doc = f"doc: {claim['sync_us']} µs" if "sync_us" in claim else ""
    t.add_row("sync time, serial", "", f"{rep.sync_us_per_chunk:.2f}",
              f"{len(rep.syncs)} × {r.profile.sync.latency_us:g} µs + bytes / {r.profile.sync.bandwidth_gbps:g} GB/s; "
              f"state +{rep.state.time_us:.2f} µs; {sync_doc}")
    util = "  ".join(f"{_unit(k)} {v:.0%}" for k, v in sorted(rep.utilization.items()))
    t.add_row("utilisation", "", "", util)
    return t


def _unit(resource: str) -> str:
    return {"cube": "Cube", "vec": "Vec", "link:vec->cube": "link Vec→Cube",
            "link:cube->vec": "link Cube→Vec"}.get(resource, resource)


def work_table(r: VersionResult) -> Table:
    g = r.execution.graph
    claim = CLAIMS.get(r.version, {})
    t = Table(title="Work per chunk and sequence (from the recorded ops)", box=box.SIMPLE_HEAD,
              title_justify="left")
    for col in ("phase", "unit", "MACs / element ops", "doc", "time µs"):
        t.add_column(col, justify="left" if col in ("phase", "unit") else "right")
    for p in g.phases:
        work = p.macs if p.unit == "cube" else p.element_ops
        doc = (claim.get("macs", {}) if p.unit == "cube" else claim.get("vec_ops", {})).get(p.name)
        t.add_row(p.name, "Cube" if p.unit == "cube" else "Vec", f"{work:,}", f"{doc:,}" if doc else "",
                  f"{r.report.phase_us[p.name]:.3f}" if r.report else "")
    if "total_macs" in claim:
        t.add_row("total", "Cube", f"{g.macs:,}", f"{claim['total_macs']:,}", "", end_section=True)
    return t


def overlap_table(r: VersionResult) -> Table:
    """Interval-merging metrics (npusim/output/overlap.py) of the pipelined and the serial run."""
    from npusim.output.overlap import analyse
    runs = [(name, run) for name, run in (("pipelined", r.pipelined), ("serial", r.serial))
            if run is not None and run.trace is not None]
    t = Table(title="Overlap (merged busy intervals; µs summed over cores)", box=box.SIMPLE_HEAD,
              title_justify="left")
    t.add_column("")
    for name, _ in runs:
        t.add_column(name, justify="right")
    ovs = [analyse(run) for _, run in runs]
    def row(label, fn):
        t.add_row(label, *[fn(o) for o in ovs])
    row("Cube ‖ Vec at once", lambda o: f"{o.concurrent_us:.2f} ({o.concurrent_fraction:.0%} of the time)")
    row("hand-off in flight, both units idle", lambda o: f"{o.exposed_sync_us:.2f}")
    for unit in ("cube", "vec"):
        row(f"{_unit(unit)} idle: gaps, longest", lambda o, u=unit: (
            f"{o.idle[u].idle_us:.2f} in {o.idle[u].gaps}, {o.idle[u].longest_gap_us:.2f}" if u in o.idle else ""))
    row("critical path: Cube / Vec / sync", lambda o: " / ".join(
        f"{o.critical.by_kind.get(k, 0.0):.1f}" for k in ("cube", "vec")) + f" / {o.critical.sync_us:.1f}")
    row("sync time on the critical path", lambda o: f"{o.critical.sync_fraction:.0%} ({o.critical.syncs} hand-offs)")
    row("steady state µs per chunk", lambda o: "" if o.period_us is None else
        f"{o.period_us:.2f} (chunks {o.period_chunks[0]}-{o.period_chunks[1]})")
    row("bound per chunk, efficiency", lambda o: f"{o.period_bound_us:.2f} ({_unit(o.period_bound_by)})"
        + ("" if o.period_efficiency is None else f", {o.period_efficiency:.2f}"))
    return t


def chip_table(r: VersionResult) -> Table:
    """The whole layer on the chip: waves over the AI cores, throughput, roofline, shared bandwidth."""
    rep, s = r.timed_report(), r.settings
    tokens = s.batch * s.T
    t = Table(title=f"On the chip: {s.batch * s.heads} sequences over {rep.cores} of {rep.ai_cores} AI cores "
                    f"in {rep.waves} wave(s)", box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("")
    t.add_column("", justify="right")
    t.add_column("", justify="left")
    sec = rep.pipelined_us * 1e-6
    heads = f"{s.heads} heads" + (f" ({s.v_heads} value heads, q/k loaded once per group)" if s.v_heads != s.heads else "")
    t.add_row("layer latency", f"{rep.pipelined_us:,.1f} µs", f"{tokens:,} tokens x {heads}")
    t.add_row("throughput", f"{tokens / sec:,.0f} tokens/s", f"{tokens * s.v_heads / sec:,.0f} head-tokens/s")
    t.add_row("Cube roofline", f"{rep.roofline_us:,.1f} µs", f"all MACs / ({rep.ai_cores} cores x Cube rate); "
              f"efficiency {rep.roofline_efficiency:.1%}")
    t.add_row("utilisation over the chip", "", "  ".join(f"{_unit(k)} {v:.0%}" for k, v in
                                                           sorted(rep.chip_utilization.items())))
    if rep.shared_utilization:
        t.add_row("shared bandwidth busy", "", "  ".join(f"{k.upper()} {v:.0%}" for k, v in
                                                         sorted(rep.shared_utilization.items())))
    return t
