"""The sweep's table: Parquet through pandas/pyarrow, CSV where those are absent."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from npusim.output import files


def have_parquet() -> bool:
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def frame(rows: list[dict]):
    """A pandas DataFrame, one row per point; a column whose cells mix types (e.g. a number axis and a
    text one) becomes text, so that Parquet can store it."""
    import pandas as pd
    df = pd.DataFrame(rows)
    for name in df.columns:
        if df[name].dtype == object:
            kinds = {type(x) for x in df[name] if x is not None and x == x}
            if len(kinds) > 1 and not kinds <= {int, float}:
                df[name] = [None if x is None else str(x) for x in df[name]]
    return df


def write_table(rows: list[dict], path: str | Path) -> Path:
    """Write the rows, whole or not at all (npusim/output/files.py: OutputError naming --output); returns the
    path written (.csv instead of .parquet without pyarrow)."""
    path = Path(path)
    if path.suffix == ".parquet" and not have_parquet():
        path = path.with_suffix(".csv")
    if path.suffix == ".parquet":
        buf = io.BytesIO()
        frame(rows).to_parquet(buf, index=False)
        return files.write_bytes("--output", path, buf.getvalue())
    text = io.StringIO(newline="")
    write_csv(rows, text)
    return files.write_text("--output", path, text.getvalue())


def write_csv(rows: list[dict], f) -> None:
    """The rows as CSV on an open text file: every column any row has, in order of appearance."""
    names = list(dict.fromkeys(n for r in rows for n in r))
    w = csv.DictWriter(f, fieldnames=names)
    w.writeheader()
    for r in rows:
        w.writerow({k: json.dumps(v) if isinstance(v, bool) else v for k, v in r.items()})


def read_table(path: str | Path):
    """The table as a DataFrame (Parquet or CSV)."""
    import pandas as pd
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
