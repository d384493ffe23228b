"""python scripts/register_predictions.py kda/validation/predictions/<implementation>.csv [--re-register ID ...]

Fills the empty `predicted_us` cells of a predictions file with the model's figure for each row (its kernel,
stage, shape and dtype, under the row's profile) and writes the file back. A figure already filled stays; one
the model no longer gives is refused (one line naming the row, exit 2) unless its id is passed to
`--re-register`, which replaces it and says so. Commit the model and the file before the commit that enters
the measured values (kda/validation/README.md, "Registering predictions").
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from npusim import NpuSimError, load_profile

from kda.studies.predictions import fill, model_of


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/register_predictions.py", description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path, help="a predictions file (id, kernel, stage, shape, dtype, predicted_us, profile)")
    ap.add_argument("--re-register", nargs="+", default=[], metavar="ID",
                    help="ids whose registered figure is replaced by the model's (reported as re-registered)")
    args = ap.parse_args(argv)
    profiles: dict = {}

    def predict(p) -> float:
        if p.profile not in profiles:
            profiles[p.profile] = load_profile(p.profile)
        return model_of(p).predict(profiles[p.profile])

    try:
        text, notes = fill(args.file, predict, set(args.re_register))
    except NpuSimError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    args.file.write_text(text, encoding="utf-8")
    for line in notes or [f"{args.file}: every row already registered, unchanged"]:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
