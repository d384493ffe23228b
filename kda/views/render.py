"""Readable summaries of evaluations (rich tables), with the design document's claims alongside: one
report for every design (a pass's detail per chunk in render_pass.py, memories in render_memory.py), the
versions and the designs side by side."""
from __future__ import annotations

from typing import Mapping

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from npusim.output.report import DesignReport

from kda.reference.parity import RATIO
from kda.studies.claims import CLAIMS
from kda.studies.evaluate import VersionResult

KIB, GB = 1024, 1e9


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
    po, ps = r.parities()
    t.add_row("max abs err", _err(po.max_abs_err), _err(ps.max_abs_err))
    t.add_row("rel RMS err", _err(po.rel_rms_err), _err(ps.rel_rms_err))
    t.add_row("verdict", _ok(po.passed), _ok(ps.passed))
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


def precision_line(r: VersionResult) -> Text:
    """The precision policy as run and what its types cost in bytes per chunk."""
    from kda.settings.precision import uniform_bytes
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


def summary(r: VersionResult) -> Group:
    """The report of one evaluation. A design of several passes: its passes, memories and the design on the
    chip; of one pass: that pass's detail per chunk (render_pass.py) in their place."""
    from kda.views.render_memory import memory_table
    from kda.views.render_pass import many_sequences, pass_parts
    parts = [header(r), parity_table(r), precision_line(r), *notes(r), *attribution_parts(r)]
    if len(r.design.passes) > 1:
        if r.workspace_error:
            parts.append(Text(f"workspace: {r.workspace_error}", style="red"))
        if r.design_report is not None:
            parts += [passes_table(r.design_report, r.version), memory_table(r), layer_table(r.design_report)]
    else:
        parts += pass_parts(r)
        if r.design_report is not None and many_sequences(r):
            parts.append(layer_table(r.design_report))
        if r.report is not None and r.profile.assumptions:
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
    def doc(r, key: str, fmt: str = "{}") -> str:
        claim: Mapping[str, object] = CLAIMS.get(r.version, {})
        return f" (doc {fmt.format(claim[key])})" if key in claim else ""
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
    def graphs(r):
        return r.execution.pass_graphs          # every pass: the same counts as the designs' table
    row("syncs per chunk (all passes)", lambda r: f"{sum(len(g.syncs) for g in graphs(r))}" + doc(r, "syncs"))
    row("state hand-off", lambda r: (f"rides on {r.report.state.rides_on}" if r.report and r.report.state.rides_on
                                     else "own sync" if r.report and r.report.state.mode else ""))
    row("KiB per chunk", lambda r: f"{sum(sum(g.sync_bytes) for g in graphs(r)) / KIB:g}" + doc(r, "total_kib"))
    row("redundant / unused KiB", lambda r: f"{sum(g.redundant_bytes for g in graphs(r)) / KIB:g} / "
                                            f"{sum(g.unused_bytes for g in graphs(r)) / KIB:g}")
    row("Cube MACs per chunk", lambda r: f"{sum(g.macs for g in graphs(r)) / 1e6:.2f} M"
        + (f" (doc {CLAIMS[r.version]['total_macs'] / 1e6:g} M)" if "total_macs" in CLAIMS.get(r.version, {}) else ""))
    def rep(r, f):
        return f(r.report) if r.report else (r.workspace_error and "does not fit") or ""
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
    console.print(header(results[0], ", ".join(r.version for r in results)))
    console.print(side_by_side(results))
    console.print(designs_side_by_side(results))
    for r in results:
        for line in notes(r):
            console.print(Text(f"{r.version}: ") + line)


def passes_table(rep: DesignReport, label: str) -> Table:
    """The passes of a design, one row each."""
    t = Table(title=f"{label}: {len(rep.passes)} pass(es), {rep.launches} launch(es), {rep.barriers} barrier(s)"
                    + (f", {rep.interleave} sequences interleaved per core" if rep.interleave > 1 else ""),
              box=box.SIMPLE_HEAD, title_justify="left")
    for col in ("pass", "layout", "starts with", "items", "cores", "µs", "bound µs", "syncs / item",
                "KiB / item", "HBM GB", "MACs / item"):
        t.add_column(col, justify="left" if col in ("pass", "layout", "starts with") else "right")
    for p in rep.passes:
        t.add_row(p.name, p.layout, f"{p.boundary} {p.boundary_us:g} µs", f"{p.items:,}", str(p.cores),
                  f"{p.makespan_us:,.1f}", f"{p.bound_us:,.1f}", str(p.syncs_per_item),
                  f"{p.sync_bytes_per_item / KIB:g}", f"{p.hbm_bytes / GB:.3f}", f"{p.macs / 1e6:.2f} M")
    return t


def layer_table(rep: DesignReport) -> Table:
    """The whole design on the chip: latency against its bound, the HBM floor and the Cube roofline."""
    t = Table(title="The design on the chip", box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("")
    t.add_column("", justify="right")
    t.add_column("", justify="left")
    t.add_row("latency", f"{rep.latency_us:,.1f} µs", f"serial {rep.serial_us:,.1f} µs" if rep.serial_us else "")
    t.add_row("bound", f"{rep.bound_us:,.1f} µs", f"efficiency {rep.efficiency:.2f} (bound / latency)")
    t.add_row("HBM floor", f"{rep.floor_us:,.1f} µs", f"{rep.floor_bytes / GB:.3f} GB (inputs, output, states once) "
              f"/ HBM; latency = {rep.floor_ratio:.2f}x the floor")
    t.add_row("Cube roofline", f"{rep.roofline_us:,.1f} µs", f"roofline efficiency {rep.roofline_efficiency:.1%}")
    t.add_row("HBM traffic", f"{rep.hbm_bytes / GB:.3f} GB", f"{rep.hbm_bytes / max(rep.floor_bytes, 1):.2f}x the floor's")
    return t


def designs_side_by_side(results: list[VersionResult]) -> Table:
    timed = [r for r in results if r.design_report is not None]
    t = Table(title="Designs on the chip (layer latency, its bound, the HBM floor)", box=box.SIMPLE_HEAD,
              title_justify="left")
    t.add_column("")
    for r in timed:
        t.add_column(r.version, justify="right")

    def row(name, fn):
        t.add_row(name, *[fn(r.design_report) for r in timed])
    row("layer latency µs", lambda d: f"{d.latency_us:,.1f}")
    row("bound µs", lambda d: f"{d.bound_us:,.1f}")
    row("HBM floor µs", lambda d: f"{d.floor_us:,.1f}")
    row("latency / floor", lambda d: f"{d.floor_ratio:.2f}x")
    row("efficiency (bound / latency)", lambda d: f"{d.efficiency:.2f}")
    row("Cube roofline efficiency", lambda d: f"{d.roofline_efficiency:.1%}")
    row("launches / barriers", lambda d: f"{d.launches} / {d.barriers}")
    row("passes", lambda d: str(len(d.passes)))
    row("syncs per chunk (all passes)", lambda d: str(d.syncs_per_chunk))
    row("hand-off KiB per chunk", lambda d: f"{d.sync_bytes_per_chunk / KIB:g}")
    row("HBM GB", lambda d: f"{d.hbm_bytes / GB:.3f}")
    row("cores used (most)", lambda d: str(max(p.cores for p in d.passes)))
    return t
