"""python -m kda.validate: the model against published Ascend timings (kda/studies/validate.py)."""
from __future__ import annotations

import sys
from pathlib import Path

from npusim import NpuSimError
from npusim.model.limits import MAX_SAMPLES, check

from kda.cli import jsonout
from kda.cli.common import Parser, console, fail, prog_name
from kda.studies.validate import DATA, lines, summary, validate


def main(argv: list[str] | None = None) -> int:
    prog = prog_name("kda.validate")
    p = Parser(prog=prog, description=__doc__.splitlines()[0], epilog=f"""examples:
  # every published row against the shipped profile, with a 90 % interval from 50 sampled profiles
  {prog}
  # also fit the assumed fields (and a host floor per implementation) to the rows not held out
  {prog} --fit --samples 0""")
    p.add_argument("--data", type=Path, default=DATA, metavar="FILE.csv",
                   help="measurements (default: kda/validation/measurements.csv, shipped with the package)")
    p.add_argument("--profile", default="ascend-910b2", metavar="NAME|FILE.toml", help="the profile to test")
    p.add_argument("--samples", type=int, default=50, metavar="N",
                   help="profiles sampled for the 90 %% interval (0: none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampled profiles")
    p.add_argument("--fit", action="store_true", help="also fit the assumed fields to the rows not held out")
    p.add_argument("--fields", metavar="FIELD,...", help="with --fit: only these ranged fields (default: all)")
    p.add_argument("--only", metavar="IMPLEMENTATION", help="only the rows of one implementation")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = p.parse_args(argv)
    if args.samples < 0 or args.samples == 1:
        return fail(f"--samples must be 0 or >= 2, got {args.samples}")
    try:
        check("--samples", args.samples, MAX_SAMPLES)
        rows, diag, result, floors, influences = validate(args.data, args.profile, args.samples, args.seed,
                                                          args.fit, args.only,
                                                          args.fields.split(",") if args.fields else None)
    except NpuSimError as err:
        return fail(str(err))
    if args.json:
        print(jsonout.dumps({
            "rows": [r.to_dict() for r in rows], "summary": summary(rows),
            "influence": [i.to_dict() for i in influences],
            "affine": {k: a.__dict__ for k, a in diag.items()},
            "fit": None if result is None else {"fields": [f.to_dict() for f in result.fields],
                                                "host_floor_us": floors,
                                                "summary": summary(rows, "fitted_error")}}, indent=2))
    else:
        from kda.views.render_validate import validation_table
        con = console()
        con.print(validation_table(rows, fitted=result is not None))
        con.print("\n".join(lines(rows, diag, result, floors, influences)), highlight=False, markup=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
