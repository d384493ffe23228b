"""python -m kda.validate: the model against published Ascend timings (kda/studies/validate.py)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from npusim import NpuSimError
from npusim.model.limits import MAX_SAMPLES, check

from kda.cli import jsonout
from kda.studies.validate import DATA, lines, summary, validate


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kda.validate", description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DATA, help="measurements (default: kda/validation/measurements.csv)")
    p.add_argument("--profile", default="ascend-910b2")
    p.add_argument("--samples", type=int, default=50, help="profiles sampled for the 90 %% interval (0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fit", action="store_true", help="also fit the assumed fields to the rows not held out")
    p.add_argument("--fields", help="with --fit: only these ranged fields, comma-separated (default: all)")
    p.add_argument("--only", metavar="IMPLEMENTATION", help="only the rows of one implementation")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.samples < 0 or args.samples == 1:
        print(f"error: --samples must be 0 or >= 2, got {args.samples}", file=sys.stderr)
        return 2
    try:
        check("--samples", args.samples, MAX_SAMPLES)
        rows, diag, result, floors, influences = validate(args.data, args.profile, args.samples, args.seed,
                                                          args.fit, args.only,
                                                          args.fields.split(",") if args.fields else None)
    except NpuSimError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(jsonout.dumps({
            "rows": [r.to_dict() for r in rows], "summary": summary(rows),
            "influence": [i.to_dict() for i in influences],
            "affine": {k: a.__dict__ for k, a in diag.items()},
            "fit": None if result is None else {"fields": [f.to_dict() for f in result.fields],
                                                "host_floor_us": floors,
                                                "summary": summary(rows, "fitted_error")}}, indent=2))
    else:
        print("\n".join(lines(rows, diag, result, floors, influences)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
