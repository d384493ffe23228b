"""kda-run (python -m kda.run) --version v3 --chunks 16

Runs KDA phase programs on the simulated Ascend NPU with real tensor math, checks them against the
fp64 recurrence, and reports hand-offs, bytes and latency (serial and pipelined over many chunks).
Bad input gets one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import math
import sys

from npusim import NpuSimError, keep_freed_memory

from kda.cli import jsonout
from kda.cli.checks import (check_args, check_inputs_seqlens, given, load_inputs,  # noqa: F401 (kda.cli.run's API)
                            parse_overrides, parse_payload_dtypes, parse_seqlens)
from kda.api import KdaInputError
from kda.cli.common import fail, progress
from kda.cli.run_options import build_parser
from kda.device import resolve_device
from kda.studies.evaluate import Settings, evaluate, make_settings_inputs, profile_for, reference
from kda.studies.work import check_work
from kda.programs import DESIGNS


def in_kernel_options(args) -> tuple[str, ...]:
    """FLA's in-kernel options the command line asks for (kda/programs/in_kernel.py's names)."""
    flags = (("qk_l2norm", "qk_l2norm_in_kernel"), ("gate", "gate_in_kernel"), ("beta_sigmoid", "beta_sigmoid_in_kernel"))
    return tuple(name for name, flag in flags if getattr(args, flag, False))


def _fail(message: str) -> int:
    return fail(message)


def _settings(args) -> Settings:
    check_args(args)                     # every bound and conflict, in one place (kda/cli/checks.py)
    seqlens = parse_seqlens(args.seqlens) if args.seqlens is not None else None
    device = resolve_device(args.device)  # one line if torch cannot use it, before anything runs
    if device.type == "cpu":
        keep_freed_memory()              # chunk-sized tensors reuse freed memory (npusim/memory.py)
    workspace = {k: v for k, v in (("slots", args.slots), ("slot_kib", args.slot_kib),
                                   ("resident_kib", args.resident_kib)) if v is not None}
    resident = None
    if args.resident is not None:
        resident = () if args.resident.strip() in ("", "none") else tuple(
            x.strip() for x in args.resident.split(",") if x.strip())
    policy = dict(payload_dtypes=parse_payload_dtypes(args.precision), state_dtype=args.state_dtype,
                  accumulate_dtype=args.accumulate, attribution=args.attribution)
    return Settings(**policy, resident=resident, batch=args.batch, heads=args.heads, chunks=args.chunks, chunk_size=args.chunk_size,
                    d_k=args.dk, d_v=args.dv, dtype=args.dtype, gates=args.gates, seed=args.seed,
                    profile=str(args.profile), state_handoff=args.state_handoff,
                    initial_state=args.initial_state == "randn", tokens=args.tokens, workspace=workspace,
                    cores=args.cores, numerics=not args.no_numerics, overrides=parse_overrides(args.overrides),
                    interleave=args.interleave, seqlens=seqlens, value_heads=args.value_heads,
                    in_kernel=in_kernel_options(args), gate_lower_bound=args.gate_lower_bound,
                    device=args.device, capacity=args.capacity, core_model=args.core_model == "on",
                    keep_trace=bool(args.trace or args.plot) or _events(args) <= MAX_KEPT_EVENTS,
                    record=args.uncertainty is not None)


def _check_ranges(settings: Settings) -> None:
    """--uncertainty needs a ranged field that --set leaves free: one line before anything runs."""
    from kda.studies.uncertainty import design_fields
    profile = profile_for(settings)
    if not design_fields(profile, settings.overrides):
        free = " that --set leaves free" if profile.ranges else ""
        raise KdaInputError(f"--uncertainty: profile {profile.name} gives no field a range{free}: nothing to sample")


# Beyond this many trace events a run keeps no trace unless --trace or --plot asks for one: the overlap
# metrics need it, but a million-event trace costs more than the replay itself.
MAX_KEPT_EVENTS = 500_000


def _events(args) -> int:
    if args.seqlens:
        try:
            return sum(-(-n // args.chunk_size) for n in parse_seqlens(args.seqlens)) * args.heads * 20
        except KdaInputError:
            return 0
    chunks = -(-args.tokens // args.chunk_size) if args.tokens else args.chunks
    return chunks * args.batch * args.heads * 20


def parse_args(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None):
    """The parsed options, with `given`: the ones the command line names (for the conflicts)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = (parser or build_parser()).parse_args(argv)
    args.given = given(build_parser(), argv)
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--decode" in argv:               # the one-token recurrent step: kda/cli/decode.py (python -m kda.decode)
        from kda.cli.decode import main as decode
        return decode([a for a in argv if a != "--decode"])
    args = parse_args(argv)
    if args.version is None:
        from kda.cli.run_backward import DEFAULT_BACKWARD
        args.version = DEFAULT_BACKWARD if args.backward else "v3"
    versions = list(DESIGNS) if args.version == "all" else [args.version]
    if args.version != "all" and args.version not in DESIGNS:
        return _fail(f"unknown version {args.version!r}: choose from {', '.join(DESIGNS)} or all")
    bad_output = _check_outputs(args)
    if bad_output:
        return _fail(bad_output)
    try:
        settings = _settings(args)
        check_work(settings, profile_for(settings), args.uncertainty or 0,  # the profile loads and the
                   len(versions))                                      # work fits this machine, or one line
        if args.uncertainty is not None:
            _check_ranges(settings)
        inputs = None
        if args.inputs is not None:
            inputs = load_inputs(args.inputs)
            if settings.seqlens:
                check_inputs_seqlens(inputs, settings.seqlens, args.inputs)
            B, T, H, K = inputs.q.shape if inputs.q.dim() == 4 else (0, 0, 0, 0)
            settings = Settings(**{**settings.__dict__, "batch": B, "heads": H, "tokens": T, "d_k": K,
                                   "d_v": inputs.v.shape[-1]})
        inputs = inputs or (make_settings_inputs(settings) if settings.numerics else None)
    except (KdaInputError, NpuSimError, ValueError) as err:
        return _fail(str(err))
    if args.backward:
        from kda.cli.run_backward import run_backward
        return run_backward(args, settings, inputs, _fail)
    results, errors = [], []
    ref = None
    with progress(enabled=not args.json and settings.numerics,
                   total=len(versions) * math.ceil(settings.T / settings.chunk_size)) as tick:
        for v in versions:
            try:        # a version the input does not suit is reported; the others still run
                r = evaluate(v, settings, inputs, ref, progress=tick, foreign_payloads_ok=len(versions) > 1)
            except (KdaInputError, NpuSimError, ValueError) as err:
                errors.append(f"{v}: {err}" if len(versions) > 1 else str(err))
                continue
            if settings.numerics:
                ref = ref or reference(r.execution)
            results.append(r)
            if r.capacity_error:          # what was computed is shown; the run still fails
                errors.append(f"{v}: {r.capacity_error}" if len(versions) > 1 else r.capacity_error)
    try:
        if results:
            _check_policy_names(settings, results)
    except ValueError as err:
        errors.append(str(err))
    if results:
        try:
            _write_outputs(args, results)
        except (ValueError, OSError) as err:
            errors.append(str(err))
        spread = _uncertainty(args, settings, results, errors)
        if args.json:
            payload = [r.to_json() for r in results]
            for item in payload if spread is not None else ():
                item["uncertainty"] = spread.to_dict()
            print(jsonout.dumps(payload if len(versions) > 1 else payload[0], indent=2, ensure_ascii=False,
                             default=_json_default))
        else:
            from kda.views.render import print_results
            print_results(results)
            if spread is not None:
                from kda.studies.uncertainty import lines
                print("\n".join(lines(spread)))
    if errors:                  # after what was computed, so that nothing is lost
        for e in errors:
            _fail(e)
        return 2
    if args.strict and any(r.verdict for r in results):
        return 1
    return 0


def _uncertainty(args, settings: Settings, results, errors: list[str]):
    """--uncertainty N over the versions that have timing (kda/uncertainty.py); None when not asked."""
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
    for flag, path in (("--trace", args.trace), ("--plot", args.plot)):
        if path is not None and not path.parent.is_dir():
            return f"{flag} {path}: no directory {path.parent}"
    formats = (".png", ".svg", ".pdf")          # kda.views.plots.FORMATS (matplotlib loads only when plotting)
    if args.plot is not None and args.plot.suffix.lower() not in formats:
        return f"--plot {args.plot}: the file must end in {', '.join(formats)}"
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
    """--trace and --plot: the pipelined runs (serial ones with --serial) of the versions that have timing.
    With a multi-pass design among them: every pass on the design's time axis, and occupancy heat maps."""
    if args.trace is None and args.plot is None:
        return
    multi = any(r.design is not None and not r.design.single for r in results)
    if multi:
        timed = [r for r in results if (r.design_serial if args.serial else r.design_run) is not None]
    else:
        timed = [r for r in results if (r.serial if args.serial else r.pipelined) is not None]
    if not timed:
        raise ValueError("--trace/--plot: no version has timing (" +
                         "; ".join(f"{r.version}: {r.workspace_error}" for r in results) + ")")
    try:
        _write_files(args, timed, multi)
    except OSError as err:                 # name the option: the message alone says only the path
        flag = "--plot" if args.plot is not None and str(args.plot) in str(err) else "--trace"
        raise OSError(f"{flag}: cannot write {err.filename or ''} ({err.strerror or err})") from None


def _write_files(args, timed, multi: bool) -> None:
    if args.trace is not None:
        _write_trace(args, timed, multi)
    if args.plot is not None:
        if multi:
            from kda.views.plot_occupancy import save_design_plot
            save_design_plot(args.plot, timed, serial=args.serial)
        else:
            from kda.views.plots import save_plot
            save_plot(args.plot, timed, serial=args.serial)
        print(f"wrote {args.plot}", file=sys.stderr)


def _write_trace(args, timed, multi: bool) -> None:
    """The Chrome trace, cut to --trace-window; a warning on stderr first when it is large."""
    from npusim.output import trace_file
    labels, heads = [r.version for r in timed], timed[0].settings.heads
    if multi:
        from npusim.output import design_trace
        trace = design_trace.build([r.design_serial if args.serial else r.design_run for r in timed],
                                   labels=labels, heads=heads)
    else:
        from npusim.output import chrome_trace
        trace = chrome_trace.build([r.serial if args.serial else r.pipelined for r in timed], labels=labels,
                                   heads=heads)
    if args.trace_window is not None:
        trace = trace_file.window(trace, *trace_file.parse_window(args.trace_window))
    size = trace_file.estimate_bytes(trace)
    if size > trace_file.LARGE_BYTES:
        print(f"warning: --trace {args.trace}: about {size / 1e6:.0f} MB ({len(trace['traceEvents'])} events); "
              f"--trace-window START:END (us) keeps a part of it", file=sys.stderr)
    trace_file.write(args.trace, trace)
    print(f"wrote {args.trace} (Chrome trace: open in https://ui.perfetto.dev)", file=sys.stderr)


def _json_default(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    raise TypeError(type(x).__name__)


if __name__ == "__main__":
    sys.exit(main())
