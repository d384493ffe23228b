"""Measured kernel timings, from two kinds of CSV file, for calibration (calibrate.py) and validation.

- A simple CSV: columns `kernel, shape, dtype, measured_us` and optionally `stage` (which stage of a kernel of
  several stages was timed on its own; empty or absent: the whole kernel) and `held_out` (yes: a row kept
  for validation, which no fit may use); others are ignored. One timing a row.
- msprof's op summary (`op_summary_*.csv`, CANN profiling "op_summary (Operator Details)"): the kernel is
  its `OP Type`, the shape its `Input Shapes` (one shape per input, dimensions split by ',' and inputs by
  ';'), the type the first of its `Input Data Types` (DT_BF16, DT_FLOAT16, DT_FLOAT), the time its
  `Task Duration(us)`. The other columns (Task ID, Block Dim, the PMU metrics, ...) are ignored.

Which kernels exist and how a shape reads is the caller's business (kda/kernels/registry.py); this module checks
that every row has what it needs and says which row and field is wrong, in one line.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from npusim.errors import NpuSimError

SIMPLE = ("kernel", "shape", "dtype", "measured_us")
MSPROF = ("OP Type", "Input Shapes", "Input Data Types", "Task Duration(us)")
MSPROF_DTYPES = {"DT_BF16": "bf16", "DT_FLOAT16": "fp16", "DT_FLOAT": "fp32", "DT_FLOAT32": "fp32"}


class MeasurementError(NpuSimError):
    """A measurement file that cannot be used: one line naming the file, row and field."""


@dataclass(frozen=True)
class Measurement:
    kernel: str
    shape: str               # as written: "1x4096x32x128x128" (simple) or "1,4096,16,128;..." (msprof)
    dtype: str               # "bf16", "fp16" or "fp32"
    measured_us: float
    row: int                 # line in the file (the header is line 1)
    source: str              # the file
    form: str = "simple"     # "simple" or "msprof": how `shape` reads
    stage: str = ""          # the stage of `kernel` timed alone ("kkt", ...), "" for the whole kernel
    held_out: bool = False   # kept for validation: no fit may use it

    def where(self) -> str:
        return f"{self.source} row {self.row}"


def read_measurements(path: str | Path) -> list[Measurement]:
    """Every row of a simple CSV or an msprof op summary; MeasurementError on the first bad one."""
    path = Path(path)
    if not path.is_file():
        raise MeasurementError(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise MeasurementError(f"{path}: cannot read it as text ({type(err).__name__})") from None
    try:
        rows = list(csv.reader(text.splitlines()))
    except csv.Error as err:        # a field past the csv module's limit, a NUL byte
        raise MeasurementError(f"{path}: not a measurements CSV ({err})") from None
    if not rows or not any(cell.strip() for cell in rows[0]):
        raise MeasurementError(f"{path}: empty file, expected a header row")
    header = [h.strip() for h in rows[0]]
    if "Task Duration(us)" in header or "OP Type" in header:
        form, needed = "msprof", MSPROF
    else:
        form, needed = "simple", SIMPLE
    missing = [c for c in needed if c not in header]
    if missing:
        raise MeasurementError(
            f"{path}: missing column {missing[0]!r} (a simple CSV needs {', '.join(SIMPLE)}; an msprof op "
            f"summary needs {', '.join(MSPROF)})")
    extra = tuple(c for c in ("stage", "held_out") if form == "simple" and c in header)
    col = {name: header.index(name) for name in needed + extra}
    out = []
    for line, cells in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) < len(header):
            raise MeasurementError(f"{path} row {line}: {len(cells)} fields, the header has {len(header)}")

        def get(name: str) -> str:
            return cells[col[name]].strip()

        if form == "simple":
            kernel, shape, dtype, time_text, time_field = (get("kernel"), get("shape"), get("dtype"),
                                                          get("measured_us"), "measured_us")
        else:
            kernel, shape, time_text, time_field = (get("OP Type"), get("Input Shapes"), get("Task Duration(us)"),
                                                    "Task Duration(us)")
            first = get("Input Data Types").split(";")[0].strip()
            if first not in MSPROF_DTYPES:
                raise MeasurementError(f"{path} row {line}: Input Data Types starts with {first!r}, expected one "
                                       f"of {', '.join(MSPROF_DTYPES)}")
            dtype = MSPROF_DTYPES[first]
        for name, value in (("kernel" if form == "simple" else "OP Type", kernel),
                            ("shape" if form == "simple" else "Input Shapes", shape), ("dtype", dtype)):
            if not value:
                raise MeasurementError(f"{path} row {line}: empty {name}")
        if dtype not in ("bf16", "fp16", "fp32"):
            raise MeasurementError(f"{path} row {line}: dtype {dtype!r} is not bf16, fp16 or fp32")
        try:
            t = float(time_text)
        except ValueError:
            raise MeasurementError(f"{path} row {line}: {time_field} {time_text!r} is not a number") from None
        if not math.isfinite(t) or t <= 0:
            raise MeasurementError(f"{path} row {line}: {time_field} {time_text} must be a positive, finite time")
        stage = get("stage") if "stage" in col else ""
        held = get("held_out").lower() if "held_out" in col else ""
        if held not in ("yes", "true", "1", "no", "false", "0", ""):
            raise MeasurementError(f"{path} row {line}: held_out {get('held_out')!r} is not yes or no")
        out.append(Measurement(kernel, shape, dtype, t, line, str(path), form, stage, held in ("yes", "true", "1")))
    if not out:
        raise MeasurementError(f"{path}: no measurements after the header")
    return out
