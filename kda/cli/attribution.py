"""python -m kda.attribution: rank the hand-offs of a phase program by the accuracy their rounding costs,
and search a precision policy for a target (attribution.py holds the model).

    python -m kda.attribution --version v3 --dtype bf16 --target 0.0025
"""
from __future__ import annotations

import math

from npusim import NpuSimError
from npusim.command import as_command

from kda.cli.checks import parse_payload_dtypes
from kda.cli.common import Parser, console, fail, prog_name, seed_problem
from kda.driver.checks import KdaInputError
from kda.driver.inputs import GATES
from kda.programs import PROGRAMS, get_program, resolve
from kda.settings import Settings
from kda.settings.inputs import make_settings_inputs
from kda.studies.attribution import attribution_table, find_policy, one_thread, sci
from kda.studies.evaluate import evaluate


@as_command
def main(argv: list[str] | None = None) -> int:
    with one_thread():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    from rich.table import Table

    prog = prog_name("kda.attribution")
    p = Parser(prog=prog, description="Rank the hand-offs of a phase program by the accuracy their rounding "
               "costs; find a policy for a target.", epilog=f"""examples:
  # v3's hand-offs, the costliest rounding first
  {prog} --version v3 --dtype bf16
  # and a policy within 0.25 % rel RMS error, the worst hand-offs in finer types
  {prog} --version v3 --dtype bf16 --target 0.0025""")
    p.add_argument("--version", default="v3", metavar="V", help=f"the phase program: {', '.join(PROGRAMS)}, or "
                   "a one-pass design in a file, path/to/file.py:NAME (default v3)")
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"), help="transfer type of every hand-off")
    p.add_argument("--gates", default="seed", choices=GATES, help="the gates of the generated inputs "
                   "(as kda-run's --gates)")
    p.add_argument("--chunks", type=int, default=16, metavar="N", help="chunks per sequence")
    p.add_argument("--heads", type=int, default=1, metavar="N", help="attention heads")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated inputs")
    p.add_argument("--precision", metavar="NAME=TYPE,...", help="start from this policy (as kda.cli.run)")
    p.add_argument("--state-dtype", choices=("fp32", "bf16", "fp16"), help="the state's type (as kda.cli.run)")
    p.add_argument("--target", type=float, default=None, help="also search a policy with max(output, "
                   "state) rel RMS error <= TARGET, giving the worst hand-offs finer types")
    p.add_argument("--fp32-only", action="store_true", help="the search tries fp32 only (not the other "
                   "2-byte type)")
    args = p.parse_args(argv)
    try:
        args.version = resolve(args.version)
        get_program(args.version)            # one per-chunk program: a design of several passes is refused
        if args.chunks < 1 or args.heads < 1:
            raise KdaInputError("--chunks and --heads must be >= 1")
        if problem := seed_problem(args.seed):
            raise KdaInputError(problem)
        if args.target is not None and not (math.isfinite(args.target) and args.target > 0):
            raise KdaInputError(f"--target is a relative RMS error: a number > 0, got {args.target}")
        s = Settings(chunks=args.chunks, heads=args.heads, dtype=args.dtype, gates=args.gates, seed=args.seed,
                     payload_dtypes=parse_payload_dtypes(args.precision), state_dtype=args.state_dtype,
                     attribution=True)
        r = evaluate(args.version, s, timing=False)
    except (ValueError, NpuSimError) as err:      # KdaInputError and the work limits included: one line, exit 2
        return fail(str(err))
    con = console()
    con.print(attribution_table(r.attribution, f"{args.version}, {args.dtype}, gates {args.gates}, "
                                               f"{args.chunks} chunks"))
    if args.target is not None:
        x = make_settings_inputs(s)
        search = find_policy(x, get_program(args.version), r.execution.precision, args.target,
                             fp32_only=args.fp32_only)
        t = Table(title=f"Policy search: the worst hand-offs get a finer type until max(output, state) rel "
                        f"RMS <= {args.target:g}", title_justify="left")
        for col in ("change", "output", "state", "KiB per chunk"):
            t.add_column(col, justify="left" if col == "change" else "right")
        for st in search.steps:
            t.add_row(st.change or f"(start: {search.base.describe()})", sci(st.o_err), sci(st.state_err),
                      f"{st.nbytes / 1024:g}")
        con.print(t)
        verdict = "met" if search.met else "NOT met"
        con.print(f"target {verdict}: {search.policy.describe()}; +{search.extra_bytes / 1024:g} KiB per chunk "
                  f"({search.steps[-1].nbytes / 1024:g} vs {search.steps[0].nbytes / 1024:g} KiB, syncs + state)")
    return 0
