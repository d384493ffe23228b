"""The options of `kda-run` (python -m kda.run), in four groups: the shape of the layer, the design, the
chip model and the output; and the Settings they make. kda/cli/run.py reads them; kda/sweep takes any of
them as a sweep axis."""
from __future__ import annotations

import argparse
from pathlib import Path

from npusim import keep_freed_memory, shipped_profiles

from kda.cli.checks import parse_overrides, parse_payload_dtypes, parse_seqlens
from kda.cli.common import Parser, prog_name
from kda.driver.checks import KdaInputError
from kda.driver.device import resolve_device
from kda.driver.inputs import GATES, KdaInputs
from kda.programs import DESIGNS
from kda.settings import Settings

DESCRIPTION = """\
Runs KDA phase programs on the simulated Ascend NPU with real tensor math, checks them against the
fp64 recurrence, and reports hand-offs, bytes and latency (serial and pipelined over many chunks).
Bad input gets one line on stderr and exit status 2."""

EXAMPLES = """\
examples:
  # one design (v6 unless --version): parity against the fp64 recurrence, hand-offs, latency
  {prog} --chunks 16
  # the design document's v3, which overflows on Kimi's gates (--strict: exit status 1)
  {prog} --version v3 --chunks 16 --gates kimi --strict
  # every design's timing of a Kimi layer (32 heads, 128 Ki tokens) on Kimi's gates, ranked among the
  # designs that stay finite on them
  {prog} --version all --heads 32 --tokens 131072 --gates kimi --no-numerics
  # the same figures as JSON (shape: kda/schema/run.schema.json)
  {prog} --version all --heads 32 --tokens 131072 --no-numerics --json > designs.json
  # a what-if on one profile field
  {prog} --version v3 --set sync.latency_us=0.3
  # a Chrome trace of the first 200 us of v6
  {prog} --version v6 --heads 32 --tokens 16384 --no-numerics --trace v6.json --trace-window 0:200
  # the training pass: gradients against fp64 autograd, and the backward designs' timing
  {prog} --backward --version all"""

TYPES = ("fp32", "bf16", "fp16")


def build_parser() -> argparse.ArgumentParser:
    prog = prog_name("kda.run")
    p = Parser(prog=prog, description=DESCRIPTION, epilog=EXAMPLES.format(prog=prog))
    _shape(p.add_argument_group("shape", "the layer's shape and its inputs"))
    _design(p.add_argument_group("design", "which phase program, its precision and its work split"))
    _model(p.add_argument_group("model", "the chip model: profile, workspace, capacity, what is computed"))
    _output(p.add_argument_group("output", "what is printed or written"))
    return p


def _shape(g) -> None:
    g.add_argument("--chunks", type=int, metavar="N", default=16, help="chunks per sequence")
    g.add_argument("--tokens", type=int, metavar="N", default=None, help="tokens per sequence instead of --chunks (any T)")
    g.add_argument("--heads", type=int, metavar="N", default=1, help="attention heads (independent recurrences)")
    g.add_argument("--value-heads", type=int, metavar="HV", help="grouped value heads (FLA's HV, a multiple of --heads, "
                   "which then counts q/k heads): a work item is one q/k head with its HV/heads value heads, its q and "
                   "k loaded from GM once; a phase too big for its UB / L1 takes the value heads a part at a time, "
                   "holding the q/k tile (every design; the workspace plan's regions count per value head)")
    g.add_argument("--qk-l2norm-in-kernel", action="store_true",
                   help="FLA's use_qk_l2norm_in_kernel: q and k l2-normalised per row (x rsqrt(sum x^2 + 1e-6)) inside "
                   "the design, timed as Vector work of its Phase prep (kda/programs/in_kernel.py)")
    g.add_argument("--gate-in-kernel", action="store_true",
                   help="FLA's use_gate_in_kernel: g is the raw gate, the design computes -exp(A_log) softplus(g + "
                   "dt_bias) (A_log, dt_bias made from --seed as FLA's KDA layer initialises them), timed as Vector work")
    g.add_argument("--gate-lower-bound", type=float, metavar="LB",
                   help="with --gate-in-kernel: FLA's lower_bound, the gate LB sigmoid(exp(A_log) (g + dt_bias)) in "
                   "[LB, 0), LB in [-5, 0) as FLA's safe gate takes it")
    g.add_argument("--beta-sigmoid-in-kernel", action="store_true",
                   help="FLA's use_beta_sigmoid_in_kernel: beta is raw, the design takes sigmoid(beta), timed as "
                   "Vector work")
    g.add_argument("--batch", type=int, metavar="N", default=1, help="sequences of equal length")
    g.add_argument("--seqlens", metavar="T1,T2,...", help="a variable-length batch: tokens of each sequence, e.g. 4096,131072 "
                   "(replaces --batch and --tokens; FLA's cu_seqlens)")
    g.add_argument("--chunk-size", type=int, metavar="N", default=64, help="tokens per chunk")
    g.add_argument("--dk", type=int, metavar="N", default=128, help="key (and query) head dimension")
    g.add_argument("--dv", type=int, metavar="N", default=128, help="value head dimension")
    g.add_argument("--gates", default="seed", choices=GATES,
                   help="seed: sigmoid(randn); kimi: -5*sigmoid(x); strong: alpha=0.01; slow: long memories")
    g.add_argument("--seed", type=int, metavar="N", default=0, help="seed of the generated inputs (and of --uncertainty)")
    g.add_argument("--initial-state", choices=("zero", "randn"), default="zero",
                   help="the state before the first chunk")
    g.add_argument("--inputs", type=Path, metavar="FILE.pt", help="a .pt file with q, k, v, beta and g (log decay) or alpha, "
                   "in FLA's layout [B, T, H, ...], optionally initial_state; replaces the generated inputs")


def _design(g) -> None:
    g.add_argument("--version", metavar="NAME", help=f"design: {', '.join(DESIGNS)} or all, or one in "
                   "your file, path/to/file.py:NAME (a @phase_program or a Design) (default: v6)")
    g.add_argument("--dtype", default="bf16", choices=TYPES, help="transfer type of every hand-off")
    g.add_argument("--precision", metavar="NAME=TYPE,...", help="precision policy: a transfer type per sync "
                   "payload, e.g. 'A_raw=fp32,M=fp32' (the rest carry --dtype)")
    g.add_argument("--state-dtype", choices=TYPES, help="type the state is kept in between chunks "
                   "(default: the program's declared default, else --dtype)")
    g.add_argument("--accumulate", choices=TYPES, help="type Cube matmuls accumulate in (default fp32)")
    g.add_argument("--state-handoff", choices=("ride", "own"), default="ride",
                   help="the state rides on an existing sync of the right direction, or has its own")
    g.add_argument("--interleave", type=int, metavar="N", default=1, help="sequences a core alternates in its sequential "
                   "passes, each filling the others' hand-off gaps")
    g.add_argument("--cores", type=int, metavar="N", help="AI cores to spread batch x heads over (default: the profile's)")
    g.add_argument("--resident", metavar="NAME,...", help="comma-separated tensors for the workspace's resident region, replacing "
                   "the program's plan ('none' for none)")
    g.add_argument("--backward", action="store_true", help="the backward pass (training): every gradient "
                   "against fp64 autograd and the backward design's timing beside the forward's")
    g.add_argument("--states", choices=("recompute", "store"), default="recompute", help="with --backward: "
                   "recompute the forward's intermediates in the backward, or time it over what the forward kept")


def _model(g) -> None:
    g.add_argument("--profile", default="ascend-910b2", metavar="NAME|FILE.toml", help=f"{', '.join(shipped_profiles())} or a .toml path")
    g.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE", dest="overrides",
                   help="override a profile field, e.g. --set sync.latency_us=0.3 (repeatable)")
    g.add_argument("--slots", type=int, metavar="N",
                   help="workspace slots of each sequence a core runs at a time (override the profile)")
    g.add_argument("--slot-kib", type=float, metavar="KIB", help="slot size in KiB (override the profile)")
    g.add_argument("--resident-kib", type=float, metavar="KIB", help="resident region in KiB (override the profile)")
    g.add_argument("--capacity", choices=("tile", "refuse"), default="tile",
                   help="a phase that does not fit its unit's UB / L1 is tiled (more GM traffic), or the run "
                   "is refused with one line naming the phase, its tensors and bytes")
    g.add_argument("--core-model", choices=("on", "off"), default="on",
                   help="off: ignore the profile's [core] table (no UB/L1 capacity, GM traffic at the per-core "
                   "HBM rate in series with compute), the simpler model for comparison")
    g.add_argument("--no-numerics", action="store_true", help="timing only: record the phase graph on random "
                   "inputs of the right shapes and replay it for every chunk and head (no parity); each design's "
                   "numerics then run on --probe-chunks chunks of one sequence, to check it stays finite")
    g.add_argument("--probe-chunks", type=int, metavar="N", default=2, help="with --no-numerics: chunks of the "
                   "probe, each design's numerics on the run's gates, types and sizes (0: no probe; the overflow "
                   "row then says 'not checked' and no design is ranked)")
    g.add_argument("--device", default="cpu", metavar="DEVICE", help="torch device of the numerics: cpu, cuda or npu "
                   "(npu needs the optional torch_npu: pip install -e \".[npu]\")")
    g.add_argument("--uncertainty", type=int, metavar="N", help="also replay timing under N profiles sampled "
                   "(Latin hypercube, --seed) from the ranges of the profile's assumed, fitted and measured fields: "
                   "every latency as a median and 90 %% interval, the fields that drive each design's interval, "
                   "and with --version all the share each design wins")
    g.add_argument("--attribution", action="store_true", help="rank the hand-offs by the accuracy their "
                   "rounding costs: each rounded alone, the rest exact (one extra run per payload)")


def _output(g) -> None:
    g.add_argument("--json", action="store_true", help="print one JSON object (a list with --version all); "
                   "its shape: kda/schema/run.schema.json")
    g.add_argument("--strict", action="store_true", help="the verdict in the exit status: 1 if any version fails "
                   "parity, overflows or has a workspace plan that does not fit (without --strict a finished "
                   "report exits 0); bad input or a step that fails exits 2 either way")
    g.add_argument("--serial", action="store_true", help="show the serial (no overlap) timeline as the main one")
    g.add_argument("--trace", type=Path, metavar="OUT.json",
                   help="write a Chrome trace (Perfetto, chrome://tracing) of the pipelined run, or of the serial "
                   "one with --serial; --version all puts every version in one file; OUT.pftrace writes Perfetto's "
                   "protobuf format instead (needs the perfetto package: docs/how-to/traces.md)")
    g.add_argument("--plot", type=Path, metavar="OUT.png",
                   help="write a Gantt chart (.png, .svg or .pdf) of the pipelined run, or the serial one with "
                   "--serial; --version all stacks the versions on one time axis")
    g.add_argument("--op-summary", type=Path, metavar="OUT.csv",
                   help="write the run as msprof's columns: a row per pass (op summary) and per pass and core "
                   "(PipeUtilization): Task Duration, aic/aiv times, Cube/Vector busy, MTE2/MTE3/FixPipe times "
                   "and ratios (docs/how-to/traces.md)")
    g.add_argument("--trace-window", metavar="START:END", help="with --trace: only the events that overlap "
                   "this window, in us from the first node's start (either end may be left out, e.g. 0:200 or "
                   "500:); without it, a trace over ~100 MB holds the work items (whole chunks) that start in its first ~100 MB, "
                   "every hand-off's arrow with both ends (0: all of it)")


def in_kernel_options(args) -> tuple[str, ...]:
    """FLA's in-kernel options the command line asks for (kda/programs/in_kernel.py's names)."""
    flags = (("qk_l2norm", "qk_l2norm_in_kernel"), ("gate", "gate_in_kernel"), ("beta_sigmoid", "beta_sigmoid_in_kernel"))
    return tuple(name for name, flag in flags if getattr(args, flag, False))


def settings_from_args(args, inputs: KdaInputs | None = None) -> Settings:
    """The run's settings from options that passed kda.cli.checks.check_args; Settings checks each
    dimension. With --inputs, the shapes of q and v set batch, tokens, heads, d_k and d_v."""
    seqlens = parse_seqlens(args.seqlens) if args.seqlens is not None else None
    device = resolve_device(args.device)  # one line if torch cannot use it, before anything runs
    if device.type == "cpu":
        keep_freed_memory()              # chunk-sized tensors reuse freed memory (npusim/record/memory.py)
    workspace = {k: v for k, v in (("slots", args.slots), ("slot_kib", args.slot_kib),
                                   ("resident_kib", args.resident_kib)) if v is not None}
    resident = None
    if args.resident is not None:
        resident = () if args.resident.strip() in ("", "none") else tuple(
            x.strip() for x in args.resident.split(",") if x.strip())
    policy = dict(payload_dtypes=parse_payload_dtypes(args.precision), state_dtype=args.state_dtype,
                  accumulate_dtype=args.accumulate, attribution=args.attribution)
    shape = dict(batch=args.batch, heads=args.heads, tokens=args.tokens, d_k=args.dk, d_v=args.dv)
    if inputs is not None and inputs.q.dim() == 4:      # other layouts: the driver's check names q's shape
        B, T, H, K = inputs.q.shape
        shape = dict(batch=B, heads=H, tokens=T, d_k=K, d_v=inputs.v.shape[-1])
    return Settings(**policy, **shape, resident=resident, chunks=args.chunks, chunk_size=args.chunk_size,
                    dtype=args.dtype, gates=args.gates, seed=args.seed,
                    profile=str(args.profile), state_handoff=args.state_handoff,
                    initial_state=args.initial_state == "randn", workspace=workspace,
                    cores=args.cores, numerics=not args.no_numerics, overrides=parse_overrides(args.overrides),
                    interleave=args.interleave, seqlens=seqlens, value_heads=args.value_heads,
                    in_kernel=in_kernel_options(args), gate_lower_bound=args.gate_lower_bound,
                    device=args.device, capacity=args.capacity, core_model=args.core_model == "on",
                    keep_trace=bool(args.trace or args.plot or args.op_summary) or _events(args) <= MAX_KEPT_EVENTS,
                    record=args.uncertainty is not None, probe_chunks=args.probe_chunks)


# Beyond this many trace events a run keeps no trace unless --trace or --plot asks for one: the overlap
# metrics need it, but a million-event trace costs more than the replay itself.
MAX_KEPT_EVENTS = 500_000


def kept_unasked(args) -> bool:
    """Whether the run keeps its trace though no --trace, --plot or --op-summary asks (it is small enough):
    only then does its report show the overlap metrics, with those options or without."""
    return _events(args) <= MAX_KEPT_EVENTS


def _events(args) -> int:
    """Trace events the run would keep (0 where a dimension is out of bounds: Settings refuses it)."""
    if args.chunk_size < 1:
        return 0
    if args.seqlens:
        try:
            return sum(-(-n // args.chunk_size) for n in parse_seqlens(args.seqlens)) * args.heads * 20
        except KdaInputError:
            return 0
    chunks = -(-args.tokens // args.chunk_size) if args.tokens else args.chunks
    return chunks * args.batch * args.heads * 20
