"""python -m kda.run --version v3 --chunks 16

Runs KDA phase programs on the simulated Ascend NPU with real tensor math, checks them against the
fp64 recurrence, and reports hand-offs, bytes and latency (serial and pipelined over many chunks).
Bad input gets one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from npusim import NpuSimError, keep_freed_memory, load_profile, shipped_profiles

from kda.cli import jsonout
from kda.cli.checks import (check_args, given, load_inputs, parse_overrides,  # noqa: F401 (kda.cli.run's API)
                            parse_payload_dtypes, parse_seqlens)
from kda.api import KdaInputError
from kda.device import resolve_device
from kda.studies.evaluate import Settings, evaluate, make_settings_inputs, profile_for, reference
from kda.studies.work import check_work
from kda.inputs import GATES
from kda.programs import DESIGNS


class _Parser(argparse.ArgumentParser):
    def error(self, message):               # one line, exit 2 (argparse prints usage too)
        raise SystemExit(_fail(f"{self.prog}: {message}"))


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m kda.run", description=__doc__.split("\n\n")[1],
                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--version", default="v3", help=f"design: {', '.join(DESIGNS)} or all")
    p.add_argument("--chunks", type=int, default=16, help="chunks per sequence")
    p.add_argument("--tokens", type=int, default=None, help="tokens per sequence instead of --chunks (any T)")
    p.add_argument("--heads", type=int, default=1)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seqlens", help="a variable-length batch: tokens of each sequence, e.g. 4096,131072 "
                   "(replaces --batch and --tokens; FLA's cu_seqlens)")
    p.add_argument("--interleave", type=int, default=1, help="sequences a core alternates in its sequential "
                   "passes, each filling the others' hand-off gaps")
    p.add_argument("--chunk-size", type=int, default=64)
    p.add_argument("--dk", type=int, default=128)
    p.add_argument("--dv", type=int, default=128)
    p.add_argument("--dtype", default="bf16", choices=("fp32", "bf16", "fp16"), help="transfer type of every hand-off")
    p.add_argument("--profile", default="ascend-910b2", help=f"{', '.join(shipped_profiles())} or a .toml path")
    p.add_argument("--gates", default="seed", choices=GATES,
                   help="seed: sigmoid(randn); kimi: -5*sigmoid(x); strong: alpha=0.01; slow: long memories")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--initial-state", choices=("zero", "randn"), default="zero")
    p.add_argument("--inputs", type=Path, help="a .pt file with q, k, v, beta and g (log decay) or alpha, "
                   "in FLA's layout [B, T, H, ...], optionally initial_state; replaces the generated inputs")
    p.add_argument("--state-handoff", choices=("ride", "own"), default="ride",
                   help="the state rides on an existing sync of the right direction, or has its own")
    p.add_argument("--slots", type=int,
                   help="workspace slots of each sequence a core runs at a time (override the profile)")
    p.add_argument("--slot-kib", type=float, help="slot size in KiB (override the profile)")
    p.add_argument("--resident-kib", type=float, help="resident region in KiB (override the profile)")
    p.add_argument("--resident", help="comma-separated tensors for the workspace's resident region, replacing "
                   "the program's plan ('none' for none)")
    p.add_argument("--capacity", choices=("tile", "refuse"), default="tile",
                   help="a phase that does not fit its unit's UB / L1 is tiled (more GM traffic), or the run "
                   "is refused with one line naming the phase, its tensors and bytes")
    p.add_argument("--core-model", choices=("on", "off"), default="on",
                   help="off: ignore the profile's [core] table (no UB/L1 capacity, GM traffic at the per-core "
                   "HBM rate in series with compute): the model before issue 11")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE", dest="overrides",
                   help="override a profile field, e.g. --set sync.latency_us=0.3 (repeatable)")
    p.add_argument("--serial", action="store_true", help="show the serial (no overlap) timeline as the main one")
    p.add_argument("--cores", type=int, help="AI cores to spread batch x heads over (default: the profile's)")
    p.add_argument("--no-numerics", action="store_true", help="timing only: record the phase graph on random "
                   "inputs of the right shapes and replay it for every chunk and head (no parity)")
    p.add_argument("--device", default="cpu", help="torch device of the numerics: cpu, cuda or npu "
                   "(npu needs the optional torch_npu: pip install -e \".[npu]\")")
    p.add_argument("--uncertainty", type=int, metavar="N", help="also replay timing under N profiles sampled "
                   "(Latin hypercube, --seed) from the ranges of the profile's assumed fields: every latency as a "
                   "median and 90 %% interval, the assumptions ranked, and with --version all the share each design wins")
    p.add_argument("--backward", action="store_true", help="the backward pass (training): every gradient against "
                   "fp64 autograd and the backward design's timing beside the forward's (kda/run_backward.py)")
    p.add_argument("--states", choices=("recompute", "store"), default="recompute", help="with --backward: "
                   "recompute the forward's intermediates in the backward, or time it over what the forward kept")
    p.add_argument("--json", action="store_true", help="print one JSON object (a list with --version all)")
    p.add_argument("--strict", action="store_true", help="the verdict in the exit status: 1 if any version fails parity, overflows or "
                   "has a workspace plan that does not fit (without --strict a finished report exits 0); bad "
                   "input or a step that fails exits 2 either way")
    p.add_argument("--precision", metavar="NAME=TYPE,...", help="precision policy: a transfer type per sync "
                   "payload, e.g. 'A_raw=fp32,M=fp32' (the rest carry --dtype)")
    p.add_argument("--state-dtype", choices=("fp32", "bf16", "fp16"), help="type the state is kept in between "
                   "chunks (default: the program's declared default, else --dtype)")
    p.add_argument("--accumulate", choices=("fp32", "bf16", "fp16"), help="type Cube matmuls accumulate in "
                   "(default fp32)")
    p.add_argument("--attribution", action="store_true", help="rank the hand-offs by the accuracy their "
                   "rounding costs: each rounded alone, the rest exact (one extra run per payload)")
    p.add_argument("--trace", type=Path, metavar="OUT.json",
                   help="write a Chrome trace (Perfetto, chrome://tracing) of the pipelined run, or of the serial "
                   "one with --serial; --version all puts every version in one file")
    p.add_argument("--plot", type=Path, metavar="OUT.png",
                   help="write a Gantt chart (.png, .svg or .pdf) of the pipelined run, or the serial one with "
                   "--serial; --version all stacks the versions on one time axis")
    return p


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
                    interleave=args.interleave, seqlens=seqlens,
                    device=args.device, capacity=args.capacity, core_model=args.core_model == "on",
                    keep_trace=bool(args.trace or args.plot) or _events(args) <= MAX_KEPT_EVENTS)


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
    args = parse_args(argv)
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
        inputs = None
        if args.inputs is not None:
            inputs = load_inputs(args.inputs)
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
    with _progress(enabled=not args.json and settings.numerics,
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
    with _progress(enabled=not args.json, total=total, label="samples") as tick:
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
        labels, heads = [r.version for r in timed], timed[0].settings.heads
        if multi:
            from npusim.output import design_trace
            design_trace.write(args.trace, [r.design_serial if args.serial else r.design_run for r in timed],
                               labels=labels, heads=heads)
        else:
            from npusim.output import chrome_trace
            runs = [r.serial if args.serial else r.pipelined for r in timed]
            chrome_trace.write(args.trace, runs, labels=labels, heads=heads)
        print(f"wrote {args.trace} (Chrome trace: open in https://ui.perfetto.dev)", file=sys.stderr)
    if args.plot is not None:
        if multi:
            from kda.views.plot_occupancy import save_design_plot
            save_design_plot(args.plot, timed, serial=args.serial)
        else:
            from kda.views.plots import save_plot
            save_plot(args.plot, timed, serial=args.serial)
        print(f"wrote {args.plot}", file=sys.stderr)


def _json_default(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    raise TypeError(type(x).__name__)


class _progress:
    """A progress bar on stderr for long runs; silent when stderr is not a terminal."""

    def __init__(self, enabled: bool, total: int, label: str = "chunks"):
        self.enabled = enabled and sys.stderr.isatty() and total >= 64
        self.label = label
        self.total = total
        self.done = 0

    def __enter__(self):
        if not self.enabled:
            return lambda done, total: None
        from rich.progress import Progress
        self.bar = Progress(transient=True)
        self.bar.__enter__()
        self.task = self.bar.add_task(self.label, total=self.total)
        return self.tick

    def tick(self, done: int, total: int) -> None:
        self.bar.advance(self.task, 1)

    def __exit__(self, *exc):
        if self.enabled:
            self.bar.__exit__(*exc)
        return False


if __name__ == "__main__":
    sys.exit(main())
