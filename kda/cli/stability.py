"""python -m kda.stability: where each design breaks numerically (kda/studies/stability.py)."""
from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, replace

from npusim import NpuSimError
from npusim.command import as_command

from kda.cli import jsonout
from kda.cli.common import Parser, console, fail, prog_name
from kda.programs import PROGRAMS, resolve
from kda.settings.profile import checked_profile
from kda.studies.attribution import one_thread
from kda.studies.stability import GRID_SETTINGS, THRESHOLD_SETTINGS, grid, grid_table, threshold_table, thresholds


@as_command
def main(argv: list[str] | None = None) -> int:
    with one_thread():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    prog = prog_name("kda.stability")
    p = Parser(prog=prog, description="The stability grid (every design over gates, types and chunk counts) and "
               "v3's failure thresholds (kda/studies/stability.py).", epilog=f"""examples:
  {prog}                                  the grid and the thresholds
  {prog} --versions v3,v6 --no-thresholds --json""")
    p.add_argument("--chunks", type=int, default=GRID_SETTINGS.chunks, help="chunks per sequence in the grid")
    p.add_argument("--versions", default=",".join(PROGRAMS), metavar="V,...",
                   help="comma-separated designs for the grid: built-in names or path/to/file.py:NAME (default: "
                        "the one-pass designs)")
    p.add_argument("--thresholds", action=argparse.BooleanOptionalAction, default=True,
                   help="also bisect the failure thresholds (a few seconds)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.chunks < 1:
        return fail(f"--chunks must be >= 1, got {args.chunks}")
    try:                                 # a built-in design, or one in a file (path.py:NAME), loaded once
        versions = [resolve(v.strip()) for v in args.versions.split(",") if v.strip()]
    except ValueError as err:
        return fail(str(err))
    if not versions:
        return fail(f"--versions names no design (e.g. {','.join(PROGRAMS)})")
    base = replace(GRID_SETTINGS, chunks=args.chunks)
    try:
        checked_profile(base)                        # one line before the inputs are made (kda/settings/work.py)
    except NpuSimError as err:
        return fail(str(err))
    cells = grid(versions, base=base)
    ths = thresholds() if args.thresholds else []
    if args.json:
        print(jsonout.dumps({"grid": [asdict(c) for c in cells], "thresholds": [asdict(t) for t in ths],
                          "grid_settings": {"chunks": args.chunks, "chunk_size": 64, "d_k": 128, "d_v": 128,
                                            "sequences": 1},
                          "threshold_settings": {"chunks": THRESHOLD_SETTINGS.chunks, "chunk_size": 64,
                                                 "d_k": 128, "d_v": 128}}, indent=2, ensure_ascii=False))
        return 0
    con = console()
    con.print(grid_table(cells, args.chunks))
    if ths:
        con.print(threshold_table(ths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
