"""kda-run (python -m kda.run) --version v3 --chunks 16

Runs KDA phase programs on the simulated Ascend NPU with real tensor math, checks them against the
fp64 recurrence, and reports hand-offs, bytes and latency (serial and pipelined over many chunks).
Bad input gets one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import math
import sys

from npusim import NpuSimError
from npusim.command import as_command, sigint_held
from npusim.output import files
from npusim.output.files import same_file

from kda.cli import jsonout
from kda.cli.checks import check_args, check_inputs_seqlens, given, load_inputs
from kda.cli.common import fail, progress
from kda.cli.run_options import build_parser, kept_unasked, settings_from_args
from kda.cli.trace_out import untraced
from kda.driver.checks import KdaInputError
from kda.programs import DEFAULT_DESIGN, DESIGNS, resolve
from kda.settings import Settings
from kda.settings.inputs import make_settings_inputs
from kda.settings.profile import check_interleave, checked_profile
from kda.studies.evaluate import evaluate
from kda.studies.oracle import reference


def _fail(message: str) -> int:
    return fail(message)


def parse_args(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None):
    """The parsed options, with `given`: the ones the command line names (for the conflicts)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = (parser or build_parser()).parse_args(argv)
    args.given = given(build_parser(), argv)
    return args


@as_command
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--decode" in argv:               # the one-token recurrent step: kda/cli/decode.py (python -m kda.decode)
        from kda.cli.decode import main as decode
        return decode([a for a in argv if a != "--decode"])
    args = parse_args(argv)
    try:
        versions = _versions(args)
    except ValueError as err:
        return _fail(str(err))
    bad_output = _check_outputs(args)
    if bad_output:
        return _fail(bad_output)
    try:
        settings, profile, inputs = _prepare(args, len(versions))
    except (KdaInputError, NpuSimError, ValueError) as err:
        return _fail(str(err))
    if args.backward:
        from kda.cli.run_backward import run_backward
        return run_backward(args, settings, inputs, _fail, profile)
    results, errors = [], []
    ref, spread, stopped = None, None, None
    try:                        # Ctrl-C: the designs that finished are reported, then one line (exit 130)
        with progress(enabled=not args.json and settings.numerics,
                       total=len(versions) * math.ceil(settings.T / settings.chunk_size)) as tick:
            for v in versions:
                stopped = v
                try:        # a version the input does not suit is reported; the others still run
                    r = evaluate(v, settings, inputs, ref, progress=tick, foreign_payloads_ok=len(versions) > 1,
                                 profile=profile)
                except (KdaInputError, NpuSimError, ValueError) as err:
                    errors.append(f"{v}: {err}" if len(versions) > 1 else str(err))
                    continue
                if settings.numerics:
                    ref = ref or reference(r.execution)
                results.append(r)
                if r.capacity_error:          # what was computed is shown; the run still fails
                    errors.append(f"{v}: {r.capacity_error}" if len(versions) > 1 else r.capacity_error)
            stopped = None
        if results:
            try:
                _check_policy_names(settings, results)
            except ValueError as err:
                errors.append(str(err))
            if not settings.numerics:     # timing only: does each design stay finite on these gates?
                from kda.studies.probe import probe_results
                stopped = "the numeric probe"
                probe_results(results)
            stopped = "writing --trace/--plot"
            try:
                _write_outputs(args, results)
            except (ValueError, NpuSimError) as err:
                errors.append(str(err))
            stopped = "--uncertainty"
            spread = _uncertainty(args, settings, results, errors)
            stopped = None
    except KeyboardInterrupt:
        pass
    if results and not kept_unasked(args):   # a trace kept only for the files: the report a run without them prints
        results = [untraced(r) for r in results]
    if results:
        try:
            with sigint_held():               # the report goes out whole, not cut by a Ctrl-C
                _print_results(args, results, spread, len(versions) > 1)
        except KeyboardInterrupt:             # it came while the report was written: it is complete
            stopped = stopped or "the end"
    if stopped is not None:
        return _interrupted(stopped, results, len(versions))
    if errors:                  # after what was computed, so that nothing is lost
        for e in errors:
            _fail(e)
        return 2
    if args.strict and any(r.verdict for r in results):
        return 1
    return 0


def _versions(args) -> list[str]:
    """The designs to run: --version's (a built-in name, or a file's path.py:NAME loaded and checked once),
    every built-in one for `all`, the default forward or backward design when not given. Sets args.version to
    the resolved name; a name that resolves to nothing is a ValueError (one line)."""
    if args.version is None:
        from kda.cli.run_backward import DEFAULT_BACKWARD
        args.version = DEFAULT_BACKWARD if args.backward else DEFAULT_DESIGN
    if args.version != "all":
        args.version = resolve(args.version)
    return list(DESIGNS) if args.version == "all" else [args.version]


def _interrupted(stopped: str, results: list, designs: int) -> int:
    """Ctrl-C: one line on stderr saying where, and which designs finished (reported above); exit 130."""
    done = ", ".join(r.version for r in results)
    print(f"interrupted at {stopped}: {len(results)} of {designs} designs finished ({done}), reported above"
          if results else f"interrupted at {stopped}: no design finished", file=sys.stderr)
    return 130


def _prepare(args, versions: int):
    """(settings, profile, inputs), each made and checked once: the options, then --inputs (its shapes set
    batch, tokens, heads, d_k and d_v), the settings, the profile loaded and the work checked against this
    machine (one line before hours of work), the inputs made from the seed unless given."""
    check_args(args)                     # every bound and conflict of the options (kda/cli/checks.py)
    inputs = load_inputs(args.inputs) if args.inputs is not None else None
    settings = settings_from_args(args, inputs)
    if inputs is not None and settings.seqlens:
        check_inputs_seqlens(inputs, settings.seqlens, args.inputs)
    profile = checked_profile(settings, args.uncertainty or 0, versions)
    check_interleave(settings, profile.chip.ai_cores)
    if args.uncertainty is not None:
        _check_ranges(settings, profile)
    return settings, profile, inputs or (make_settings_inputs(settings) if settings.numerics else None)


def _check_ranges(settings: Settings, profile) -> None:
    """--uncertainty needs a ranged field that --set leaves free: one line before anything runs."""
    from kda.studies.uncertainty import design_fields
    if not design_fields(profile, settings.overrides):
        free = " that --set leaves free" if profile.ranges else ""
        raise KdaInputError(f"--uncertainty: profile {profile.name} gives no field a range{free}: nothing to sample")


def _print_results(args, results, spread, several: bool) -> None:
    if args.json:
        payload = [r.to_json() for r in results]
        for item in payload if spread is not None else ():
            item["uncertainty"] = spread.to_dict()
        print(jsonout.dumps(payload if several else payload[0], indent=2, ensure_ascii=False,
                            default=_json_default))
    else:
        from kda.views.render import print_results
        print_results(results)
        if spread is not None:
            from kda.studies.uncertainty import lines
            print("\n".join(lines(spread)))


def _uncertainty(args, settings: Settings, results, errors: list[str]):
    """--uncertainty N over the versions that have timing (kda/studies/uncertainty.py); None when not asked."""
    timed = [r for r in results if r.design_report is not None]
    if args.uncertainty is None or not timed:
        return None
    if not timed[0].profile.ranges:
        errors.append(f"--uncertainty: profile {timed[0].profile.name} gives no field a range: nothing to sample")
        return None
    from kda.studies.uncertainty import propagate
    total = args.uncertainty * len(timed)
    with progress(enabled=not args.json, total=total, label="samples") as tick:
        try:
            return propagate(timed, args.uncertainty, seed=args.seed, fixed=settings.overrides, progress=tick)
        except (NpuSimError, ValueError) as err:
            errors.append(f"--uncertainty: {err}")
            return None


def _check_policy_names(settings: Settings, results) -> None:
    """With several versions, a --precision name must be a payload of at least one of them."""
    used = {p.name for r in results for s in r.execution.graph.syncs for p in s.payload}
    unknown = [n for n in settings.payload_dtypes if n not in used]
    if unknown:
        raise KdaInputError(f"--precision: no version hands over a tensor named {', '.join(map(repr, unknown))}")


def _check_outputs(args) -> str | None:
    """Before the long part: can --trace and --plot be written where asked?"""
    formats = (".png", ".svg", ".pdf")          # kda.views.figure.FORMATS (matplotlib loads only when plotting)
    if args.plot is not None and args.plot.suffix.lower() not in formats:
        return f"--plot {args.plot}: the file must end in {', '.join(formats)}"
    if args.op_summary is not None and args.op_summary.suffix.lower() != ".csv":
        return f"--op-summary {args.op_summary}: the file must end in .csv"
    named = [(f, p) for f, p in (("--trace", args.trace), ("--plot", args.plot), ("--op-summary", args.op_summary))
             if p is not None]
    for i, (flag, path) in enumerate(named):
        for other, path2 in named[i + 1:]:
            if same_file(path, path2):
                return f"{flag} {path} and {other} {path2} name one file: each needs its own"
    for flag, path in named:
        try:
            if path is not None:
                files.check_writable(flag, path)
        except files.OutputError as err:
            return str(err)
    from npusim.output import perfetto_trace
    if args.trace is not None and args.trace.suffix.lower() in perfetto_trace.SUFFIXES:
        if not perfetto_trace.available():
            return (f"--trace {args.trace}: Perfetto's protobuf format needs the perfetto package "
                    f"(pip install perfetto); a .json trace needs nothing")
    if args.trace_window is not None:
        if args.trace is None:
            return "--trace-window cuts the trace: it needs --trace OUT.json"
        from npusim.output.trace_file import parse_window
        try:
            parse_window(args.trace_window)
        except ValueError as err:
            return str(err)
    return None


def _write_outputs(args, results) -> None:
    """--trace and --plot: the pipelined runs (serial ones with --serial) of the versions that have timing,
    on the designs' time axis when one of the designs asked for has several passes."""
    if args.trace is None and args.plot is None and args.op_summary is None:
        return
    timed = [r for r in results if r.design_run is not None]
    if not timed:
        raise ValueError("--trace/--plot/--op-summary: no version has timing (" +
                         "; ".join(f"{r.version}: {r.workspace_error}" for r in results) + ")")
    design_axis = any(len(r.design.passes) > 1 for r in results)
    _write_files(args, timed, design_axis)  # each file whole or not at all, its option named (files.OutputError)


def _write_files(args, timed, design_axis: bool) -> None:
    if args.op_summary is not None:
        from kda.cli.trace_out import write_op_summary
        write_op_summary(args, timed, [r.version for r in timed])
    if args.trace is not None:
        _write_trace(args, timed, design_axis)
    if args.plot is not None:
        from kda.views.plots import save_plot
        save_plot(args.plot, timed, serial=args.serial, design_axis=design_axis)
        print(f"wrote {args.plot}", file=sys.stderr)


def _write_trace(args, timed, design_axis: bool) -> None:
    from kda.cli.trace_out import write_trace
    write_trace(args, timed, [r.version for r in timed], design_axis)


def _json_default(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    raise TypeError(type(x).__name__)


if __name__ == "__main__":
    sys.exit(main())
