"""Measured kernel timings, from two kinds of CSV file, for calibration (calibrate.py) and validation.

- A simple CSV: columns `kernel, shape, dtype, measured_us` and optionally `stage` (which stage of a kernel of
  several stages was timed on its own; empty or absent: the whole kernel) and `held_out` (yes: a row kept
  for validation, which no fit may use); others are ignored. One timing a row.
- msprof's op summary (`op_summary_*.csv`, CANN profiling "op_summary (Operator Details)"): the kernel is
  its `OP Type`, the shape its `Input Shapes` (one shape per input, dimensions split by ',' and inputs by
  ';'), the type the first of its `Input Data Types` (DT_BF16, DT_FLOAT16, DT_FLOAT), the time its
  `Task Duration(us)`. The other columns (Task ID, Block Dim, the PMU metrics, ...) are ignored. With an
  op map (op_map.py: a user's TOML naming the kernel, stage and input order of each OP Type) the rows are read
  through it, and the rows of operators it does not name are skipped.

Which kernels exist and how a shape reads is the caller's business (kda/kernels/registry.py); this module checks
that every row has what it needs and says which row and field is wrong, in one line.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from npusim.errors import NpuSimError
from npusim.fit.op_map import OpEntry

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


def read_measurements(path: str | Path, ops: dict[str, OpEntry] | None = None) -> list[Measurement]:
    """Every row of a simple CSV or an msprof op summary; MeasurementError on the first bad one. With `ops` (an
    op map, op_map.py) an op summary's rows are read through it, and rows of operators it does not name are
    skipped (`unmapped` counts them)."""
    path = Path(path)
    header, rows = _table(path)
    form = "msprof" if "Task Duration(us)" in header or "OP Type" in header else "simple"
    needed = MSPROF if form == "msprof" else SIMPLE
    missing = [c for c in needed if c not in header]
    if missing:
        raise MeasurementError(
            f"{path}: missing column {missing[0]!r} (a simple CSV needs {', '.join(SIMPLE)}; an msprof op "
            f"summary needs {', '.join(MSPROF)})")
    if ops is not None and form != "msprof":
        raise MeasurementError(f"{path}: an op map reads an msprof op summary; this is a simple CSV (its "
                               f"kernel column names the kernel already)")
    extra = tuple(c for c in ("stage", "held_out") if form == "simple" and c in header)
    col = {name: header.index(name) for name in needed + extra}
    out, seen = [], set()
    for line, cells in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) < len(header):
            raise MeasurementError(f"{path} row {line}: {len(cells)} fields, the header has {len(header)}")
        def get(name: str, cells=cells) -> str:          # "" for an optional column the file lacks
            return cells[col[name]].strip() if name in col else ""
        if form == "simple":
            out.append(_simple_row(get, f"{path} row {line}", line, str(path)))
        elif ops is None or get("OP Type") in ops:
            out.append(_msprof_row(get, f"{path} row {line}", line, str(path), ops))
            seen.add(get("OP Type"))
    if ops is not None and (unseen := [op for op in ops if op not in seen]):
        raise MeasurementError(f"{path}: the op map names OP Type {unseen[0]!r}, which no row of it has")
    if not out:
        raise MeasurementError(f"{path}: no measurements after the header")
    return out


def unmapped(path: str | Path, ops: dict[str, OpEntry]) -> dict[str, int]:
    """OP Type -> rows of an op summary that `ops` does not name (what read_measurements skipped)."""
    header, rows = _table(Path(path))
    i = header.index("OP Type")
    counts: dict[str, int] = {}
    for cells in rows[1:]:
        if len(cells) > i and cells[i].strip() and cells[i].strip() not in ops:
            counts[cells[i].strip()] = counts.get(cells[i].strip(), 0) + 1
    return counts


def _table(path: Path) -> tuple[list[str], list[list[str]]]:
    """(header, rows with the header first) of a CSV file; MeasurementError if it cannot be read as one."""
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
    return [h.strip() for h in rows[0]], rows


def _simple_row(get, where: str, line: int, source: str) -> Measurement:
    stage, held = get("stage"), get("held_out").lower()
    if held not in ("yes", "true", "1", "no", "false", "0", ""):
        raise MeasurementError(f"{where}: held_out {get('held_out')!r} is not yes or no")
    kernel, shape, dtype = get("kernel"), get("shape"), get("dtype")
    _check_fields(where, (("kernel", kernel), ("shape", shape), ("dtype", dtype)))
    if dtype not in ("bf16", "fp16", "fp32"):
        raise MeasurementError(f"{where}: dtype {dtype!r} is not bf16, fp16 or fp32")
    return Measurement(kernel, shape, dtype, _time(where, get("measured_us"), "measured_us"), line, source,
                       "simple", stage, held in ("yes", "true", "1"))


def _msprof_row(get, where: str, line: int, source: str, ops: dict[str, OpEntry] | None) -> Measurement:
    kernel, shape = get("OP Type"), get("Input Shapes")
    first = get("Input Data Types").split(";")[0].strip()
    if first not in MSPROF_DTYPES:
        raise MeasurementError(f"{where}: Input Data Types starts with {first!r}, expected one "
                               f"of {', '.join(MSPROF_DTYPES)}")
    _check_fields(where, (("OP Type", kernel), ("Input Shapes", shape)))
    t = _time(where, get("Task Duration(us)"), "Task Duration(us)")
    if ops is None:
        return Measurement(kernel, shape, MSPROF_DTYPES[first], t, line, source, "msprof")
    entry = ops[kernel]
    try:
        shape = entry.shape(shape)
    except ValueError as err:
        raise MeasurementError(f"{where}: {kernel} (op map): {err}") from None
    return Measurement(entry.kernel, shape, MSPROF_DTYPES[first], t, line, source, "simple", entry.stage,
                       entry.held_out)


def _check_fields(where: str, fields) -> None:
    for name, value in fields:
        if not value:
            raise MeasurementError(f"{where}: empty {name}")


def _time(where: str, text: str, field: str) -> float:
    try:
        t = float(text)
    except ValueError:
        raise MeasurementError(f"{where}: {field} {text!r} is not a number") from None
    if not math.isfinite(t) or t <= 0:
        raise MeasurementError(f"{where}: {field} {text} must be a positive, finite time")
    return t

