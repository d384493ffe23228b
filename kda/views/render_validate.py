"""python -m kda.validate's table: each published timing against the model (kda/studies/validate.py), as
a rich table whose columns are a list (add a Column to add one)."""
from __future__ import annotations

import math

from kda.views.table import Column, ms, signed_pct, table


def _interval(r) -> str:
    return "-" if math.isnan(r.p05) else f"[{r.p05 / 1000:.2f}, {r.p95 / 1000:.2f}] ms"


def _inside(r) -> str:
    return "-" if math.isnan(r.p05) else ("yes" if r.inside else "no")


def columns(fitted: bool) -> list[Column]:
    return [
        Column("id", lambda r: r.id, "left"),
        Column("measured", lambda r: ms(r.measured_us)),
        Column("predicted", lambda r: ms(r.predicted_us)),
        Column("error", lambda r: signed_pct(r.error)),
        Column("90 % interval", _interval),
        Column("in", _inside),
        Column("affine", lambda r: ms(r.affine_us)),
        Column("error", lambda r: signed_pct(r.affine_error)),
        Column("fitted", lambda r: ms(r.fitted_us), when=fitted),
        Column("error", lambda r: signed_pct(r.fitted_error), when=fitted),
        Column("", lambda r: "held out" if r.held_out else "", "left"),
    ]


def validation_table(rows, fitted: bool):
    """One row per measurement; a rule between implementations."""
    nxt = {id(a): b for a, b in zip(rows, rows[1:])}
    return table("Published timings against the model", columns(fitted), rows,
                 end_section=lambda r: id(r) in nxt and nxt[id(r)].implementation != r.implementation)
