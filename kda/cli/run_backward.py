"""python -m kda.run --backward --version v4 --chunks 16

The backward pass (training) on the simulated NPU: every gradient (dq, dk, dv, dg, dbeta, dh0) against
the fp64 autograd reference with FLA's tolerances, the first inf/NaN, the backward design's passes
(syncs and bytes per chunk), its pipelined and serial latency beside the forward's, and GM kept for it.
`--version all` runs every design that has a backward program and ranks them for training; without
`--version`, `--backward` runs v6's (DEFAULT_BACKWARD). `--seqlens` (a variable-length batch, FLA's cu_seqlens)
and `--device` (the numerics on a torch device) work as for the forward. Bad input: one line, exit 2.
"""
from __future__ import annotations

import sys

import torch
from rich import box
from rich.table import Table

from npusim import NpuSimError
from npusim.command import sigint_held

from kda.cli import jsonout
from kda.driver.checks import KdaInputError
from kda.programs import BACKWARD, DESIGNS
from kda.studies.backward_eval import BackwardResult, check_policy_names, evaluate_backward, probe_backward
from kda.studies.probe import why_unsafe_backward
from kda.views.render import make_console, passes_table

KIB, GB = 1024, 1e9
DEFAULT_BACKWARD = "v6"          # --backward without --version: the fastest for training (benchmarks/backward.py)


def load_grad_outputs(path) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Optional do and dht from the --inputs .pt file (FLA's layout)."""
    if path is None:
        return None, None
    data = torch.load(path, weights_only=True)
    return data.get("do"), data.get("dht")


def run_backward(args, settings, inputs, fail, profile=None) -> int:
    """--backward: the gradients and the timing of every asked design; returns the exit status."""
    versions = list(BACKWARD) if args.version == "all" else [args.version]
    errors, results = [], []
    try:
        if args.uncertainty:
            raise KdaInputError("--backward does not take --uncertainty yet")
        for v in versions:
            if v not in BACKWARD:
                known = "unknown design" if v not in DESIGNS else "design"
                raise KdaInputError(f"--version: {known} {v!r} has no backward program: --backward runs for "
                                    f"{', '.join(BACKWARD)} (default {DEFAULT_BACKWARD})")
        do, dht = load_grad_outputs(args.inputs) if settings.numerics else (None, None)
        check_policy_names(versions, settings)       # a name must belong to one of the designs
    except (KdaInputError, NpuSimError, ValueError) as err:
        return fail(str(err))
    stopped = None
    try:                                   # Ctrl-C: the designs that finished are reported, then one line
        for v in versions:
            stopped = v
            try:
                results.append(evaluate_backward(v, settings, args.states, inputs, do, dht, check_names=False,
                                                 profile=profile))
            except (KdaInputError, NpuSimError, ValueError) as err:
                errors.append(f"{v}: {err}" if len(versions) > 1 else str(err))
        stopped = None
        if results:
            stopped = "writing --trace/--plot"
            try:
                _write_outputs(args, results)
            except (ValueError, NpuSimError) as err:
                errors.append(str(err))
            stopped = "the numeric probe"
            if not settings.numerics:
                _probe(args, settings, results)
            stopped = "--attribution"
            if args.attribution and settings.numerics:
                _attribution(args, settings, inputs, results)
            stopped = None
    except KeyboardInterrupt:
        pass
    if results:
        try:
            with sigint_held():            # the report goes out whole, not cut by a Ctrl-C
                _print(args, results, len(versions) > 1)
        except KeyboardInterrupt:
            stopped = stopped or "the end"
    if stopped is not None:
        done = ", ".join(r.version for r in results)
        print(f"interrupted at {stopped}: {len(results)} of {len(versions)} backward designs finished ({done}), "
              f"reported above" if results else f"interrupted at {stopped}: no backward design finished",
              file=sys.stderr)
        return 130
    for e in errors:                       # after what was computed
        fail(e)
    if errors:
        return 2
    if args.strict and any(not r.passed or (r.execution and r.execution.nonfinite) for r in results):
        return 1
    return 0


def _print(args, results: list[BackwardResult], several: bool) -> None:
    if args.json:
        payload = [r.to_json() for r in results]
        print(jsonout.dumps(payload if several else payload[0], indent=2, default=_json_default))
    else:
        print_backward(results)


def _write_outputs(args, results: list[BackwardResult]) -> None:
    """--trace, --plot and --op-summary: every pass of the backward designs on one time axis (serial with
    --serial)."""
    labels = [f"{r.version} backward" for r in results]
    if args.op_summary is not None:
        from kda.cli.trace_out import write_op_summary
        write_op_summary(args, results, labels)
    if args.trace is not None:              # cut to --trace-window as the forward's
        from kda.cli.trace_out import write_trace
        write_trace(args, results, labels, design_axis=True)
    if args.plot is not None:
        from kda.views.plots import save_plot
        save_plot(args.plot, results, serial=args.serial, design_axis=True, labels=labels)
        print(f"wrote {args.plot}", file=sys.stderr)


def _attribution(args, settings, inputs, results: list[BackwardResult]) -> None:
    """--attribution: each backward payload rounded alone to the transfer type (kda/studies/backward_attribution.py)."""
    from kda.settings.inputs import make_settings_inputs
    from kda.studies.backward_attribution import attribute_backward, must_stay_fp32
    from kda.studies.backward_eval import grad_outputs
    x = inputs or make_settings_inputs(settings)
    do, dht = grad_outputs(x, settings.seed)
    narrow = settings.dtype if settings.dtype != "fp32" else "bf16"
    console = make_console()
    for r in results:
        items = attribute_backward(r.version, x, do, dht, chunk_size=settings.chunk_size, narrow=narrow)
        t = Table(title=f"{r.version} backward: each hand-off rounded to {narrow} alone (worst gradient error / "
                        f"FLA's tolerance); must stay fp32: {', '.join(must_stay_fp32(items)) or 'none'}",
                  box=box.SIMPLE_HEAD, title_justify="left")
        for col in ("payload", "worst / tolerance", *r.parity):
            t.add_column(col, justify="left" if col == "payload" else "right")
        for it in items:
            t.add_row(it.name, f"{it.worst:.3f}", *[f"{e:.1e}" for e in it.errors.values()])
        console.print(t)


def _json_default(x):
    return None


def parity_table(r: BackwardResult) -> Table:
    t = Table(title=f"{r.version}: gradients against the fp64 autograd reference ({r.settings.dtype} hand-offs)",
              box=box.SIMPLE_HEAD, title_justify="left")
    for col in ("gradient", "max abs err", "rel RMS err", "tolerance", ""):
        t.add_column(col, justify="left" if col in ("gradient", "") else "right")
    for n, p in r.parity.items():
        t.add_row(n, f"{p.max_abs_err:.2e}", f"{p.rel_rms_err:.2e}", f"{r.tolerances[n]:g}",
                  "pass" if p.passed else "[red]FAIL[/red]")
    return t


def summary_table(results: list[BackwardResult]) -> Table:
    t = Table(title=f"Training on the chip ({results[0].states} the forward's intermediates)", box=box.SIMPLE_HEAD,
              title_justify="left")
    t.add_column("")
    for r in results:
        t.add_column(r.version, justify="right")

    def row(name, fn):
        t.add_row(name, *[fn(r) for r in results])
    row("forward µs", lambda r: f"{r.forward_report.latency_us:,.1f}" if r.forward_report else "-")
    row("backward µs (pipelined)", lambda r: f"{r.report.latency_us:,.1f}")
    row("backward µs (serial)", lambda r: f"{r.report.serial_us:,.1f}")
    row("backward bound µs", lambda r: f"{r.report.bound_us:,.1f}")
    row("backward HBM floor µs", lambda r: f"{r.report.floor_us:,.1f}")
    row("forward + backward µs", lambda r: f"{r.training_us:,.1f}" if r.training_us else "-")
    row("backward passes / launches", lambda r: f"{len(r.report.passes)} / {r.report.launches}")
    row("backward syncs per chunk", lambda r: str(r.report.syncs_per_chunk))
    row("backward hand-off KiB per chunk", lambda r: f"{r.report.sync_bytes_per_chunk / KIB:g}")
    row("backward HBM GB", lambda r: f"{r.report.hbm_bytes / GB:.3f}")
    row("GM kept for the backward GB", lambda r: f"{r.kept_bytes / GB:.3f}")
    row(f"finite on gates {results[0].settings.gates}" + ("" if results[0].execution else " (probe)"), _finite_cell)
    return t


def _finite_cell(r: BackwardResult) -> str:
    """yes, no and where inf/NaN first appears (forward or backward), or not checked."""
    why = why_unsafe_backward(r)
    if why is None:
        return "yes"
    if why.startswith("not checked"):
        return "not checked"
    nf = r.execution.nonfinite if r.execution is not None else r.probe.overflow if r.probe is not None else None
    return "no" if nf is None else f"no: {nf.where}"


def _probe(args, settings, results: list[BackwardResult]) -> None:
    """A timing-only run: each design's forward and backward numerics on --probe-chunks chunks."""
    for r in results:
        r.probe = probe_backward(r.version, args.states, settings)


def print_backward(results: list[BackwardResult]) -> None:
    console = make_console()
    for r in results:
        if r.parity is not None:
            console.print(parity_table(r))
        console.print(passes_table(r.report, f"{r.version} backward ({r.states})"))
    console.print(summary_table(results))
    if len(results) > 1 and all(r.training_us for r in results):
        console.print(ranking_text(results))


def ranking_text(results: list[BackwardResult]) -> str:
    """The forward and training rankings of the designs that stay finite on the run's gates; the others
    listed apart with the reason (they overflow, or nothing checked them)."""
    apart = {r.version: why for r in results if (why := why_unsafe_backward(r)) is not None}
    safe = [r for r in results if r.version not in apart]
    out = []
    if safe:
        fwd = sorted(safe, key=lambda r: r.forward_report.latency_us if r.forward_report else 0.0)
        train = sorted(safe, key=lambda r: r.training_us or 0.0)
        same = [r.version for r in fwd] == [r.version for r in train]
        out.append(f"forward ranking: {' < '.join(r.version for r in fwd)}; training (forward + backward): "
                   f"{' < '.join(r.version for r in train)} ({'the same' if same else 'it changes'}), among the "
                   f"designs that stay finite on gates {results[0].settings.gates}")
    else:
        out.append(f"no design is known to stay finite on gates {results[0].settings.gates}: none is ranked")
    if apart:
        out.append("Not ranked: " + "; ".join(f"{v} ({why})" for v, why in apart.items()))
    return "\n".join(out)
