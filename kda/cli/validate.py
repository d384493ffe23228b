"""python -m kda.validate: the model against measured Ascend timings (kda/studies/validate.py).

By default the shipped files (kda/validation/measurements.csv: whole forwards; megagdn.csv: MegaGDN-PTO's
stages one kernel at a time; kda.csv: measured KDA kernels, all held out); `--data FILE` (repeatable) reads
yours instead: a CSV with id, kernel, stage, shape, dtype, measured_us, implementation, held_out
(kda/validation/README.md), or an msprof op summary. Rows with a prediction registered before their measured
value (kda/validation/predictions/*.csv, or `--predictions FILE`) are reported with it and its commit.
"""
from __future__ import annotations

import sys
from pathlib import Path

from npusim import NpuSimError
from npusim.command import as_command
from npusim.fit.op_map import read_op_map
from npusim.model.limits import MAX_SAMPLES, available_cores, check
from npusim.output import files

from kda.cli import jsonout
from kda.cli.common import Parser, console, fail, prog_name, seed_problem
from kda.programs import resolve
from kda.programs.user import is_file_spec
from kda.studies import predictions as registered
from kda.studies.validate import SHIPPED, by_implementation, reported, summary, validate

FORMATS = (".png", ".svg", ".pdf")          # kda.views.figure.FORMATS (matplotlib loads only when plotting)


def build_parser() -> Parser:
    prog = prog_name("kda.validate")
    p = Parser(prog=prog, description=__doc__.splitlines()[0], epilog=f"""examples:
  # every shipped row against the shipped profile, with a 90 % interval from 50 sampled profiles
  {prog} --jobs 8
  # your own timings (msprof numbers in the same columns), timing only, and the log-log plot
  {prog} --data my_timings.csv --samples 0 --plot fidelity.png
  # also fit the assumed fields (and a host floor per implementation and stage) to the rows not held out
  {prog} --fit --samples 0""")
    p.add_argument("--data", type=Path, action="append", metavar="FILE.csv",
                   help="measurements, repeatable (default: kda/validation/measurements.csv, megagdn.csv and "
                        "kda.csv, shipped with the package)")
    p.add_argument("--ops", type=Path, metavar="FILE.toml",
                   help="an op map for msprof op summaries given with --data: each OP Type's kernel, stage, input "
                        "order and held_out (docs/how-to/calibration.md); other operators' rows are skipped")
    p.add_argument("--predictions", type=Path, action="append", metavar="FILE.csv",
                   help="predictions registered before the measured values, repeatable (default: "
                        "kda/validation/predictions/*.csv, shipped with the package)")
    p.add_argument("--version", action="append", default=[], metavar="FILE.py:NAME",
                   help="a design in your file (a @phase_program or a Design), repeatable: rows name it as the "
                        "kernel kda_<its name>")
    p.add_argument("--profile", default="ascend-910b2", metavar="NAME|FILE.toml", help="the profile to test")
    p.add_argument("--samples", type=int, default=50, metavar="N",
                   help="profiles sampled for the 90 %% interval (0: none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampled profiles")
    p.add_argument("--fit", action="store_true", help="also fit the assumed fields to the rows not held out")
    p.add_argument("--fields", metavar="FIELD,...", help="with --fit: only these ranged fields (default: all)")
    p.add_argument("--only", metavar="IMPLEMENTATION", help="only the rows of one implementation")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="worker processes for the predictions, at most one per core (the numbers do not depend "
                        "on it)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    p.add_argument("--plot", type=Path, metavar="OUT.png",
                   help="also draw predicted against measured, log-log, held-out rows hollow (.png, .svg, .pdf)")
    return p


def _check_plot(path: Path | None) -> str | None:
    if path is None:
        return None
    if path.suffix.lower() not in FORMATS:
        return f"--plot {path}: the file must end in {', '.join(FORMATS)}"
    try:
        files.check_writable("--plot", path)
    except files.OutputError as err:
        return str(err)
    return None


@as_command
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.samples < 0 or args.samples == 1:
        return fail(f"--samples must be 0 or >= 2, got {args.samples}")
    if args.jobs < 1:
        return fail(f"--jobs must be >= 1, got {args.jobs}")
    args.jobs = min(args.jobs, available_cores())   # more processes than cores only contend
    if problem := seed_problem(args.seed):
        return fail(problem)
    if args.fields is not None and not args.fit:
        return fail("--fields chooses the fields --fit fits: it needs --fit")
    if problem := _check_plot(args.plot):
        return fail(problem)
    for spec in args.version:       # a design from a file, loaded and checked once, before the rows are read
        if not is_file_spec(spec):
            return fail(f"--version {spec}: name a design in a file, path/to/file.py:NAME")
        try:
            resolve(spec)
        except ValueError as err:
            return fail(str(err))
    paths = args.data or list(SHIPPED)
    try:
        ops = read_op_map(args.ops) if args.ops is not None else None
        check("--samples", args.samples, MAX_SAMPLES)
        preds = args.predictions if args.predictions is not None else registered.shipped()
        rows, diag, result, floors, influences = validate(paths, args.profile, args.samples, args.seed,
                                                          args.fit, args.only,
                                                          args.fields.split(",") if args.fields else None,
                                                          args.jobs, preds, ops=ops)
        pending = registered.unmeasured(preds, rows)
        data_only = reported(paths) if all(p.suffix == ".csv" for p in paths) else []
    except NpuSimError as err:
        return fail(str(err))
    if args.json:
        print(jsonout.dumps({
            "files": [str(p) for p in paths],
            "rows": [r.to_dict() for r in rows], "summary": summary(rows),
            "by_implementation": by_implementation(rows),
            "influence": [i.to_dict() for i in influences],
            "affine": {k: a.__dict__ for k, a in diag.items()},
            "predictions": {"files": [str(p) for p in preds], "not_measured_yet": [p.id for p in pending]},
            "reported": [r.__dict__ for r in data_only],
            "fit": None if result is None else {"fields": [f.to_dict() for f in result.fields],
                                                "host_floor_us": floors,
                                                "summary": summary(rows, "fitted_error"),
                                                "by_implementation": by_implementation(rows, "fitted_error")}},
            indent=2))
    else:
        from kda.views.render_validate import report
        con = console()
        for part in report(rows, diag, result, floors, influences, pending, data_only):
            if isinstance(part, str):
                con.print(part, highlight=False, markup=False)
            else:
                con.print(part)
    if args.plot is not None:
        from kda.views.plot_validate import figure_validation
        from kda.views.plots import save
        try:
            save(figure_validation(rows), args.plot)
        except files.OutputError as err:         # the report is printed above: say so, exit 2
            return fail(f"{err}; the report above is complete")
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
