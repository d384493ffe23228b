"""A rich table from columns and rows: each column says its title, how a row becomes its cell, and its
alignment; a report adds a column by adding one `Column` (kda/views/render_validate.py uses it).

    t = table("Validation", [Column("id", lambda r: r.id, "left"), Column("measured", lambda r: ms(r.measured_us))],
              rows)
    make_console().print(t)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Sequence

from rich import box
from rich.table import Table


@dataclass(frozen=True)
class Column:
    title: str
    cell: Callable[[Any], str]           # row (any record the table shows) -> text ("" or "-" where none)
    justify: Literal["left", "right", "center"] = "right"
    when: bool = True                    # False: the column is left out (e.g. a --fit column without --fit)


def table(title: str | None, columns: Sequence[Column], rows: Iterable, *, caption: str | None = None,
          end_section: Callable[[Any], bool] | None = None) -> Table:
    """The rows as a rich table; `end_section(row)` draws a rule after that row."""
    cols = [c for c in columns if c.when]
    t = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, title_justify="left", caption_justify="left")
    for c in cols:
        t.add_column(c.title, justify=c.justify, no_wrap=True)
    for r in rows:
        t.add_row(*(c.cell(r) for c in cols), end_section=bool(end_section and end_section(r)))
    return t


def markdown(rows: Iterable[Sequence], header: Sequence[str]) -> str:
    """Rows of text as a markdown table (pandas' to_markdown, through tabulate), cells as given."""
    import pandas as pd
    return pd.DataFrame([list(r) for r in rows], columns=list(header)).to_markdown(index=False, disable_numparse=True)


def ms(us: float) -> str:
    """Microseconds as milliseconds, '-' for NaN."""
    return "-" if us is None or math.isnan(us) else f"{us / 1000:.3f} ms"


def signed_pct(x: float) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:+.0%}"
