"""Turn msprof's per-task durations of a KDA kernel into calibration rows: kernel,shape,dtype,measured_us.

    python ascendc_stubs/scripts/op_summary_to_csv.py --summary PROF_*/mindstudio_profiler_output/op_summary_*.csv \
        --data run/in --kernel v3 [--out timings.csv]

--summary: msprof's op_summary_*.csv ("OP Type", "Task Duration(us)") or msprof op's OpBasicInfo.csv ("Op Type",
"Task Duration(us)"). Rows whose operator type is the kernel's (KdaChunkV3 for v3, ...) become one row each.
--data: the input folder gen_data.py wrote (meta.txt gives the shape and the transfer type).
--kernel: the simulator version the kernel implements (v3, v4); it is the row's `kernel` field.
Shape field: B=..;T=..;H=..;K=..;V=..;C=.. (semicolons, so the CSV needs no quoting). Rows are appended to --out
(with a header when the file is new) or printed. Bad input: one line on stderr, exit status 2.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

OP_TYPES = {"v3": "KdaChunkV3", "v4": "KdaChunkV4", "v5": "KdaChunkV5"}
HEADER = ["kernel", "shape", "dtype", "measured_us"]


def _fail(msg: str) -> int:
    print(f"op_summary_to_csv: {msg}", file=sys.stderr)
    return 2


def rows(summary: Path, data: Path, kernel: str) -> list[list[str]]:
    """The calibration rows, or ValueError naming what is wrong."""
    if kernel not in OP_TYPES:
        raise ValueError(f"unknown kernel {kernel!r} (one of {', '.join(OP_TYPES)})")
    try:
        meta = dict(line.split() for line in (data / "meta.txt").read_text().splitlines() if line.strip())
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read {data / 'meta.txt'}: {e}") from None
    missing = [k for k in ("B", "T", "H", "K", "V", "C", "dtype") if k not in meta]
    if missing:
        raise ValueError(f"{data / 'meta.txt'} has no {', '.join(missing)}")
    shape = ";".join(f"{k}={meta[k]}" for k in "BTHKVC")
    try:
        with summary.open(newline="") as f:
            table = list(csv.DictReader(f))
    except OSError as e:
        raise ValueError(f"cannot read {summary}: {e}") from None
    if not table:
        raise ValueError(f"{summary} has no rows")
    cols = table[0].keys()
    type_col = next((c for c in ("OP Type", "Op Type") if c in cols), None)
    if type_col is None or "Task Duration(us)" not in cols:
        raise ValueError(f"{summary} lacks an 'OP Type' / 'Op Type' or a 'Task Duration(us)' column")
    out = []
    for i, r in enumerate(table, start=2):   # line 1 is the header
        if r[type_col].strip() != OP_TYPES[kernel]:
            continue
        try:
            us = float(r["Task Duration(us)"])
        except ValueError:
            raise ValueError(f"{summary} line {i}: Task Duration(us) {r['Task Duration(us)']!r} is not a number") from None
        if not us > 0:
            raise ValueError(f"{summary} line {i}: Task Duration(us) {us} is not positive")
        out.append([kernel, shape, meta["dtype"], f"{us:g}"])
    if not out:
        raise ValueError(f"{summary} has no row of operator type {OP_TYPES[kernel]}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--summary", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    try:
        found = rows(a.summary, a.data, a.kernel)
    except ValueError as e:
        return _fail(str(e))
    if a.out is None:
        w = csv.writer(sys.stdout)
        w.writerow(HEADER)
        w.writerows(found)
        return 0
    new = not a.out.exists() or a.out.stat().st_size == 0
    with a.out.open("a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(HEADER)
        w.writerows(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
