"""Readable summaries of evaluations (rich tables), with the design document's claims alongside."""
from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from kda.studies.claims import CLAIMS
from kda.studies.evaluate import VersionResult
from kda.reference.parity import RATIO

KIB = 1024
ARROW = {"vec->cube": "Vec→Cube", "cube->vec": "Cube→Vec"}


def _ok(flag: bool) -> Text:
    return Text("pass", style="bold green") if flag else Text("FAIL", style="bold red")


def _err(x: float) -> str:
    return "inf/NaN" if x != x or x == float("inf") else f"{x:.2e}"


def header(r: VersionResult, versions: str | None = None) -> Text:
    s = r.settings
    return Text.assemble(
        (f"KDA {versions or r.version}", "bold"), f" on {r.profile.name} · {r.execution.chunks} chunks of {s.chunk_size}"
        f" × {s.batch * s.heads} sequence(s) (batch {s.batch} × heads {s.heads}"
        f"{f', {s.v_heads} value heads' if s.v_heads != s.heads else ''}) · d_k={s.d_k} d_v={s.d_v}"
        f" · transfer {s.dtype} · gates {s.gates} · seed {s.seed}")


def parity_table(r: VersionResult) -> Table | Text:
    if r.parity_o is None:
        return Text("Numerics off (--no-numerics): the phase graph was recorded on random inputs of these shapes "
                    "and replayed; no parity.", style="dim")
    t = Table(title=f"Parity against the fp64 recurrence (FLA metric: max abs ≤ 1e-6, else rel RMS < {RATIO})",
              box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("")
    t.add_column("output", justify="right")
    t.add_column("final state", justify="right")
    t.add_row("max abs err", _err(r.parity_o.max_abs_err), _err(r.parity_state.max_abs_err))
    t.add_row("rel RMS err", _err(r.parity_o.rel_rms_err), _err(r.parity_state.rel_rms_err))
    t.add_row("verdict", _ok(r.parity_o.passed), _ok(r.parity_state.passed))
    return t


def notes(r: VersionResult) -> list[Text]:
    out = []
    ex = r.execution
    if ex.nonfinite is not None:
        out.append(Text(f"overflow: inf/NaN first appears in {ex.nonfinite}", style="bold red"))
    if r.first_failing_chunk is not None:
        out.append(Text(f"output fails parity from chunk {r.first_failing_chunk} (0-based) on", style="red"))
    if r.note:
        out.append(Text(r.note, style="yellow"))
    if r.workspace_error:
        out.append(Text(f"workspace: {r.workspace_error} (no timing; try --slot-kib / --resident-kib)",
                        style="bold red"))
    if r.capacity_error:
        out.append(Text(f"capacity: {r.capacity_error} (no timing)", style="bold red"))
    return out


def sync_table(r: VersionResult) -> Table:
    g = r.execution.graph
    claim = CLAIMS.get(r.version, {}).get("sync_kib")
    t = Table(title=f"Hand-offs per chunk ({len(g.syncs)} syncs)", box=box.SIMPLE_HEAD, title_justify="left")
    for col, just in (("", "left"), ("direction", "left"), ("tensors (* redundant, † unused)", "left"),
                      ("KiB", "right"), ("doc KB", "right"), ("time µs", "right")):
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
    if rep and rep.state.mode:
        where = f"rides on sync {rep.state.rides_on}" if rep.state.rides_on else "its own sync"
        t.add_row("S", "Vec→Cube" if g.state and g.phase(g.state.producer).unit == "vec" else "Cube→Vec",
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
    rep = r.report
    n = r.execution.chunks
    claim = CLAIMS.get(r.version, {})
    t = Table(title=f"Latency on {r.profile.name} ({n} chunks, {rep.cores} AI core(s), launch {rep.launch_us:g} µs included)",
              box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("")
    t.add_column("µs", justify="right")
    t.add_column("per chunk" if rep.waves == 1 else f"per chunk ({rep.waves} waves)", justify="right")
    t.add_column("", justify="left")
    per = lambda x: f"{(x - rep.launch_us) / (n * rep.waves):.2f}"     # a core runs `waves` sequences
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
        doc = claim.get("macs" if p.unit == "cube" else "vec_ops", {}).get(p.name)
        t.add_row(p.name, "Cube" if p.unit == "cube" else "Vec", f"{work:,}", f"{doc:,}" if doc else "",
                  f"{r.report.phase_us[p.name]:.3f}" if r.report else "")
    if "total_macs" in claim:
        t.add_row("total", "Cube", f"{g.macs:,}", f"{claim['total_macs']:,}", "", end_section=True)
    return t


def overlap_table(r: VersionResult) -> Table:
    """Interval-merging metrics (npusim/overlap.py) of the pipelined and the serial run."""
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


def precision_line(r: VersionResult) -> Text:
    """The precision policy as run and what its types cost in bytes per chunk."""
    from kda.studies.evaluate import uniform_bytes
    p, g = r.execution.precision, r.execution.graph
    sync_b, state_b = sum(g.sync_bytes), (g.state.nbytes if g.state else 0)
    extra = sync_b + state_b - uniform_bytes(g, p.transfer)
    default = " (the program's default)" if r.settings.state_dtype is None and p.state is not None else ""
    cost = f" = all-{p.transfer} {(sync_b + state_b - extra) / KIB:g} KiB {extra / KIB:+g} KiB" if extra else ""
    return Text(f"precision: {p.describe()}{default} · hand-offs {sync_b / KIB:g} KiB + state "
                f"{state_b / KIB:g} KiB per chunk{cost}", style="cyan")


def attribution_parts(r: VersionResult) -> list:
    if r.attribution is None:
        return []
    from kda.studies.attribution import attribution_table
    return [attribution_table(r.attribution, r.version)]


def chip_table(r: VersionResult) -> Table:
    """The whole layer on the chip: waves over the AI cores, throughput, roofline, shared bandwidth."""
    rep, s = r.report, r.settings
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


def summary(r: VersionResult) -> Group:
    from kda.views.render_design import layer_table, passes_table
    from kda.views.render_memory import memory_table
    parts = [header(r), parity_table(r), precision_line(r), *notes(r), *attribution_parts(r)]
    if r.execution.design is not None and not r.execution.design.single:
        if r.workspace_error:
            parts.append(Text(f"workspace: {r.workspace_error}", style="red"))
        if r.design_report is not None:
            parts += [passes_table(r), memory_table(r), layer_table(r)]
        return Group(*[p for p in parts if p is not None])
    parts += [sync_table(r), *redundancy_lines(r)]
    if r.report is not None:
        parts += [work_table(r), memory_table(r), latency_table(r)]
        if r.report.cores > 1 or r.report.sequences > 1:
            parts.append(chip_table(r))
        if r.pipelined is not None and r.pipelined.trace is not None:
            parts.append(overlap_table(r))
        if r.design_report is not None and (r.report.cores > 1 or r.report.sequences > 1):
            parts.append(layer_table(r))
        if r.profile.assumptions:
            parts.append(Text("Assumed figures in this profile (no public source): " +
                              ", ".join(f"{k}={_value(r.profile, k)}" for k in r.profile.assumptions), style="dim"))
    return Group(*[p for p in parts if p is not None])


def _value(profile, key: str):
    section, name = key.split(".")
    return getattr(getattr(profile, section), name)


def side_by_side(results: list[VersionResult]) -> Table:
    t = Table(title="Versions side by side (doc = the design document's claim)", box=box.SIMPLE_HEAD,
              title_justify="left")
    t.add_column("")
    for r in results:
        t.add_column(r.version, justify="right")
    def row(name, fn):
        t.add_row(name, *[fn(r) for r in results])
    doc = lambda r, key, fmt="{}": (f" (doc {fmt.format(CLAIMS[r.version][key])})"
                                    if key in CLAIMS.get(r.version, {}) else "")
    row("parity", lambda r: _ok(r.passed) if r.parity_o else "not run")
    row("output rel RMS err", lambda r: _err(r.parity_o.rel_rms_err) if r.parity_o else "—")
    row("state rel RMS err", lambda r: _err(r.parity_state.rel_rms_err) if r.parity_o else "—")
    row("first failing chunk", lambda r: "" if r.first_failing_chunk is None else str(r.first_failing_chunk))
    row("precision (transfer; state)", lambda r: f"{r.execution.precision.transfer}"
        + (f" + {len(r.execution.precision.overrides)} set" if r.execution.precision.overrides else "")
        + f"; {r.execution.precision.state_type}")
    if any(r.attribution is not None for r in results):
        row("worst hand-off (attribution)", lambda r: "" if r.attribution is None or not r.attribution.payloads
            else f"{r.attribution.payloads[0].name} {_err(r.attribution.payloads[0].err)}")
    row("overflow", lambda r: str(r.execution.nonfinite) if r.execution.nonfinite else "none")
    graphs = lambda r: r.execution.pass_graphs          # every pass: the same counts as the designs' table
    row("syncs per chunk (all passes)", lambda r: f"{sum(len(g.syncs) for g in graphs(r))}" + doc(r, "syncs"))
    row("state hand-off", lambda r: (f"rides on {r.report.state.rides_on}" if r.report and r.report.state.rides_on
                                     else "own sync" if r.report and r.report.state.mode else ""))
    row("KiB per chunk", lambda r: f"{sum(sum(g.sync_bytes) for g in graphs(r)) / KIB:g}" + doc(r, "total_kib"))
    row("redundant / unused KiB", lambda r: f"{sum(g.redundant_bytes for g in graphs(r)) / KIB:g} / "
                                            f"{sum(g.unused_bytes for g in graphs(r)) / KIB:g}")
    row("Cube MACs per chunk", lambda r: f"{sum(g.macs for g in graphs(r)) / 1e6:.2f} M"
        + (f" (doc {CLAIMS[r.version]['total_macs'] / 1e6:g} M)" if "total_macs" in CLAIMS.get(r.version, {}) else ""))
    rep = lambda r, f: f(r.report) if r.report else (r.workspace_error and "does not fit") or ""
    row("sync µs per chunk (serial)", lambda r: rep(r, lambda x: f"{x.sync_us_per_chunk:.2f}") + doc(r, "sync_us"))
    row("serial µs per chunk", lambda r: rep(r, lambda x: f"{(x.serial_us - x.launch_us) / x.chunks:.2f}")
        + doc(r, "latency_us"))
    row("serial µs", lambda r: rep(r, lambda x: f"{x.serial_us:.1f}"))
    row("pipelined µs", lambda r: rep(r, lambda x: f"{x.pipelined_us:.1f}"))
    row("speed-up", lambda r: rep(r, lambda x: f"{x.speedup:.2f}×"))
    row("bound µs", lambda r: rep(r, lambda x: f"{x.bound_us:.1f}"))
    row("efficiency", lambda r: rep(r, lambda x: f"{x.efficiency:.2f}"))
    row("Cube / Vec utilisation", lambda r: rep(r, lambda x: f"{x.utilization.get('cube', 0):.0%} / "
                                                             f"{x.utilization.get('vec', 0):.0%}"))
    row("Cube ‖ Vec µs, steady µs / chunk", lambda r: _overlap_cell(r))
    return t


def _overlap_cell(r: VersionResult) -> str:
    if r.pipelined is None or r.pipelined.trace is None:
        return ""
    from npusim.output.overlap import analyse
    o = analyse(r.pipelined)
    return f"{o.concurrent_us:.1f}, " + ("—" if o.period_us is None else f"{o.period_us:.2f}")


WIDE = 400          # columns when nothing says the width: wider than any table the commands print


def make_console(stderr: bool = False) -> Console:
    """The terminal's width on a terminal; COLUMNS when set; otherwise (a pipe, a log) wide enough that no
    table is cut, where rich would pick 80 columns: tables keep their natural width."""
    import os
    import sys
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty() or os.environ.get("COLUMNS", "").isdigit():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=WIDE)


def print_results(results: list[VersionResult], console: Console | None = None) -> None:
    console = console or make_console()
    if len(results) == 1:
        console.print(summary(results[0]))
        return
    from kda.views.render_design import designs_side_by_side
    console.print(header(results[0], ", ".join(r.version for r in results)))
    console.print(side_by_side(results))
    console.print(designs_side_by_side(results))
    for r in results:
        for line in notes(r):
            console.print(Text(f"{r.version}: ") + line)
