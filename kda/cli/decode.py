"""python -m kda.decode (or python -m kda.run --decode): the one-token recurrent step (FLA's fused_recurrent_kda)
as designs on the simulated chip: the report, its bound (launch, HBM, Vector, transfers) and its numerics;
lists of designs, batches, tokens or state types give a table (a sweep). Bad input: one line, exit 2.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from npusim import NpuSimError
from npusim.command import as_command
from npusim.model.limits import check
from npusim.output import files
from npusim.output.files import same_file

from kda.cli.checks import parse_overrides
from kda.cli.common import Parser, console, fail, prog_name, seed_problem
from kda.decode.programs.steps import BETA_SIGMOID, GATE, QK_L2NORM
from kda.decode.study import ALL_DESIGNS, DecodeSettings, evaluate
from kda.driver.checks import KdaInputError
from kda.settings.work import MAX_NUMERIC_STEPS

EXAMPLES = """examples:
  %(prog)s --design step --batch 32 --heads 32                  one step, its numerics and its bound
  %(prog)s --design step --batch 1:256 --no-numerics            where the step stops being launch-bound
  %(prog)s --design all --batch 64 --no-numerics                every design, how far above the HBM floor
  %(prog)s --design step --state-dtype fp32,bf16 --batch 64     fp32 against bf16 state
  %(prog)s --design step,chunked --tokens 1,2,4,8,16 --batch 64 --no-numerics   MTP: when the Cube pays
"""
PREFILL_ONLY = ("--chunks", "--chunk-size", "--version", "--interleave", "--backward", "--tokens-per-chunk",
                "--resident", "--slots", "--state-handoff", "--uncertainty")


def _ints(text: str, name: str) -> tuple[int, ...]:
    """'32', '1,4,16', '1:256' (powers of two from 1 to 256, and 256) or '1-256' (every number)."""
    try:
        if "-" in text.strip().lstrip("-"):
            lo, hi = (int(x) for x in text.split("-", 1))
            if lo < 1 or hi < lo:
                raise ValueError
            return tuple(range(lo, hi + 1))
        if ":" in text:
            lo, hi = (int(x) for x in text.split(":", 1))
            if lo < 1 or hi < lo:
                raise ValueError
            out, x = [], lo
            while x < hi:
                out.append(x)
                x *= 2
            return tuple(out + [hi])
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise KdaInputError(f"{name} {text!r}: give a number, a list (1,4,16), powers of two (1:256) or every "
                            f"number of a range (1-256)") from None


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog=prog_name("kda.decode"), description=__doc__.split("\n")[0], epilog=EXAMPLES)
    shape, design = ap.add_argument_group("shape"), ap.add_argument_group("design")
    model, output = ap.add_argument_group("model"), ap.add_argument_group("output")
    design.add_argument("--design", default="step", help=f"one or more of {', '.join(ALL_DESIGNS)}, or all")
    shape.add_argument("--batch", default="32", help="sequences in the step: N, a list 1,4,16, powers of two 1:256 "
                       "or every batch of a range 1-256")
    shape.add_argument("--heads", type=int, default=32, help="q/k heads H")
    shape.add_argument("--value-heads", type=int, help="value heads HV, a multiple of H (default: H)")
    shape.add_argument("--tokens", default="1", help="tokens per step: 1, or MTP's few (a list: 1,2,4)")
    shape.add_argument("--seqlens", help="cu_seqlens-style: tokens of each sequence of one step, e.g. 1,3,2 (packed)")
    shape.add_argument("--dk", type=int, default=128, help="key channels K")
    shape.add_argument("--dv", type=int, default=128, help="value channels V")
    design.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"), help="q, k, v and o in GM")
    design.add_argument("--state-dtype", default="fp32", help="the state in GM: fp32, bf16, or fp32,bf16")
    design.add_argument("--qk-l2norm-in-kernel", action="store_true", help="FLA's l2norm of q and k in the kernel")
    design.add_argument("--gate-in-kernel", action="store_true", help="Kimi's gate from raw g, A_log and dt_bias")
    design.add_argument("--beta-sigmoid-in-kernel", action="store_true", help="beta = sigmoid(beta) in the kernel")
    design.add_argument("--gate-lower-bound", type=float, help="FLA's bounded gate (with --gate-in-kernel)")
    model.add_argument("--profile", default="ascend-910b2", help="a shipped chip profile or a TOML file")
    model.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                       help="override a profile field for this run (repeatable), e.g. chip.launch_overhead_us=5")
    model.add_argument("--l2-warm", action="store_true", help="the state warm in L2 (a benchmark repeating one call)")
    model.add_argument("--no-numerics", action="store_true", help="timing only")
    model.add_argument("--prefill", type=int, default=64, help="tokens of the prefill before the step in the check "
                       "(0: no prefill check)")
    model.add_argument("--seed", type=int, default=0, help="the random inputs' seed")
    output.add_argument("--json", action="store_true", help="the results as JSON")
    output.add_argument("--trace", type=Path, help="write the step's Chrome trace (one run)")
    output.add_argument("--plot", type=Path, help="write the step's Gantt chart, .png or .svg (one run)")
    return ap


def settings_of(args) -> DecodeSettings:
    designs = tuple(ALL_DESIGNS) if args.design == "all" else tuple(x.strip() for x in args.design.split(","))
    options = tuple(o for o, flag in ((QK_L2NORM, args.qk_l2norm_in_kernel), (GATE, args.gate_in_kernel),
                                      (BETA_SIGMOID, args.beta_sigmoid_in_kernel)) if flag)
    states = tuple(x.strip() for x in args.state_dtype.split(","))
    bad = [x for x in states if x not in ("fp32", "bf16")]
    if bad:
        raise KdaInputError(f"--state-dtype {bad[0]!r}: the state is fp32 or bf16")
    seqlens = _ints(args.seqlens, "--seqlens") if args.seqlens else None
    if args.prefill < 0:
        raise KdaInputError("--prefill must be >= 0")
    check("--prefill: its chunks of 64 tokens, run before the step's check", -(-args.prefill // 64),
          MAX_NUMERIC_STEPS)                  # the numerics' limit of kda.run (kda/settings/work.py)
    if args.value_heads is not None and args.value_heads < 1:
        raise KdaInputError(f"--value-heads must be >= 1, got {args.value_heads}")
    if problem := seed_problem(args.seed):
        raise KdaInputError(problem)
    return DecodeSettings(designs=designs, batches=_ints(args.batch, "--batch"), heads=args.heads,
                          value_heads=args.value_heads, tokens=_ints(args.tokens, "--tokens"), d_k=args.dk,
                          d_v=args.dv, dtype=args.dtype, state_dtypes=states, profile=args.profile, options=options,
                          lower_bound=args.gate_lower_bound, warm=args.l2_warm, numerics=not args.no_numerics,
                          seed=args.seed, seqlens=seqlens, prefill=args.prefill,
                          overrides=tuple(parse_overrides(args.set).items()))


@as_command
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    prefill_only = next((a.split("=")[0] for a in argv if a.split("=")[0] in PREFILL_ONLY), None)
    if prefill_only:
        return fail(f"{prefill_only} is an option of the prefill (python -m kda.run), not of a decode step")
    args = build_parser().parse_args(argv)
    try:
        s = settings_of(args)
        if args.trace is not None and args.plot is not None and same_file(args.trace, args.plot):
            raise KdaInputError(f"--trace {args.trace} and --plot {args.plot} name one file: each needs its own")
        for flag, path in (("--trace", args.trace), ("--plot", args.plot)):
            if path is not None:
                files.check_writable(flag, path)    # before the work: files.OutputError, one line
        errors: list[str] = []
        results = evaluate(s, errors)
    except (KdaInputError, ValueError, NpuSimError) as err:
        return fail(str(err))
    if (args.trace or args.plot) and len(results) != 1:
        return fail("--trace and --plot draw one step: give one design, batch, token count and state type")
    if results and args.json:
        from kda.views.render_decode import to_json
        payload = [to_json(r) for r in results]
        print(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2, default=_json_default))
    elif results:
        from kda.views.render_decode import print_results
        print_results(results, s, console())
    try:
        _write_files(args, results)
    except (ValueError, NpuSimError) as err:          # files.OutputError names the option
        errors.append(str(err))
    for e in errors:                   # after what was computed, so that nothing is lost
        fail(e)
    if errors:
        return 2
    bad = [r for r in results if r.parity is not None and not r.parity.passed]
    return 1 if bad else 0


def _write_files(args, results) -> None:
    if args.trace is not None:
        from kda.views.plot_decode import write_trace
        write_trace(args.trace, results[0])
        print(f"wrote {args.trace} (Chrome trace: open in https://ui.perfetto.dev)", file=sys.stderr)
    if args.plot is not None:
        from kda.views.plot_decode import save_gantt
        save_gantt(args.plot, results[0])
        print(f"wrote {args.plot}", file=sys.stderr)


def _json_default(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    raise TypeError(type(x).__name__)
