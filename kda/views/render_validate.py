"""python -m kda.validate's tables (kda/studies/validate.py), rich tables of Columns (kda/views/table.py).

`report(rows, diag, result, floors, influences)` gives what the command prints, in order: the rows fitted on,
one table per implementation (stages in the forward's order), then the held-out rows (never seen by any fit)
the same way, then one line per implementation (median and largest |error|, fitted-on and held-out rows
apart), the affine diagnostic per group (implementation and stage), and --fit's fields and host floors.
A table's title holds what all its rows share (the stage, the shape fields, the dtype); its rows show the rest.
Rows with a registered prediction get one more table each implementation: the figure as registered before
the measured value, its commit, and the model's figure now where it moved (re-registered).
"""
from __future__ import annotations

import math

from kda.studies.validate import by_implementation, stage_order, summary
from kda.views.table import Column, ms, signed_pct, table


def _pct(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0%}"


def _fields(shape: str) -> list[tuple[str, str]] | None:
    """A `K=V;...` shape as its fields; None for the other forms (shown whole)."""
    if "=" not in shape:
        return None
    return [(k, v) for k, _, v in (item.partition("=") for item in shape.replace(" ", "").split(";") if item)]


def split_shapes(rows) -> tuple[str, list[str]]:
    """(what every row's shape shares, each row's rest): 'B=16 Hg=16 K=128 V=128', ['T=4096 H=16 C=128', ...].
    Shapes not written as fields are shown whole."""
    maybe = [_fields(r.shape) for r in rows]
    parsed = [p for p in maybe if p is not None]
    if len(parsed) < len(maybe):
        return "", [r.shape for r in rows]
    common = set(parsed[0]).intersection(*map(set, parsed[1:])) if len(parsed) > 1 else set()
    shared = " ".join(f"{k}={v}" for k, v in parsed[0] if (k, v) in common)
    return shared, [" ".join(f"{k}={v}" for k, v in p if (k, v) not in common) for p in parsed]


def _interval(r) -> str:
    return "-" if math.isnan(r.p05) else f"[{r.p05 / 1000:.3f}, {r.p95 / 1000:.3f}] ms"


def _inside(r) -> str:
    return "-" if math.isnan(r.p05) else ("yes" if r.inside else "no")


def rows_table(rows, title: str, fitted: bool = False):
    """One implementation's rows: stage, shape, measured, predicted, error, 90 % interval, affine (and --fit)."""
    shared, shapes = split_shapes(rows)
    shape_of = {id(r): s for r, s in zip(rows, shapes)}
    dtypes, stages = sorted({r.dtype for r in rows}), {r.stage for r in rows}
    one_stage = next(iter(stages)) if len(stages) == 1 else None
    what = [one_stage or "whole kernel" if one_stage is not None else "", shared, dtypes[0] if len(dtypes) == 1 else ""]
    columns = [
        Column("stage", lambda r: r.stage or "(whole)", "left", when=one_stage is None),
        Column("shape", lambda r: shape_of[id(r)], "left"),
        Column("dtype", lambda r: r.dtype, "left", when=len(dtypes) > 1),
        Column("measured", lambda r: ms(r.measured_us)),
        Column("predicted", lambda r: ms(r.predicted_us)),
        Column("error", lambda r: signed_pct(r.error)),
        Column("90 % interval", _interval),
        Column("in", _inside),
        Column("affine", lambda r: ms(r.affine_us)),
        Column("error", lambda r: signed_pct(r.affine_error)),
        Column("fitted", lambda r: ms(r.fitted_us), when=fitted),
        Column("error", lambda r: signed_pct(r.fitted_error), when=fitted),
    ]
    order = {s: i for i, s in enumerate(stage_order(rows))}
    ordered = sorted(rows, key=lambda r: order[r.stage])            # stable: the file's order within a stage
    nxt = {id(a): b for a, b in zip(ordered, ordered[1:])}
    caption = ", ".join(x for x in what if x)
    title = f"{title}" + (f" ({caption})" if caption else "")
    t = table(title, columns, ordered, end_section=lambda r: id(r) in nxt and nxt[id(r)].stage != r.stage)
    t.min_width = len(title)                     # the title on one line, however narrow the columns
    return t


def implementation_lines(rows) -> list[str]:
    """Per implementation: median and largest |error| under the shipped profile, fitted-on and held-out apart."""
    out = []
    for impl, s in by_implementation(rows).items():
        def part(sel, what):
            return (f"median |error| {_pct(sel['median_abs'])}, max {_pct(sel['max_abs'])} on the {sel['n']} {what}"
                    if sel["n"] else f"no {what}")
        sampled = any(not math.isnan(r.p05) for r in rows if r.implementation == impl)
        out.append(f"{impl or '(no implementation)'}: {part(s['fitted_on'], 'rows fitted on')}; "
                   f"{part(s['held_out'], 'held out')}"
                   + (f"; {s['inside_interval']} of {s['all']['n']} inside the 90 % interval" if sampled else ""))
    return out


def affine_table(rows, diag):
    groups = list(diag.items())
    stats = {g: summary([r for r in rows if r.group == g], "affine_error") for g, _ in groups}
    columns = [
        Column("implementation/stage (kernel)", lambda ga: ga[0], "left"),
        Column("floor", lambda ga: ms(ga[1].floor_us)),
        Column("scale", lambda ga: f"{ga[1].scale:.2f}"),
        Column("rows", lambda ga: str(ga[1].n)),
        Column("median |error| fitted on", lambda ga: _pct(stats[ga[0]]["fitted_on"]["median_abs"])),
        Column("held out", lambda ga: f"{_pct(stats[ga[0]]['held_out']['median_abs'])} "
                                      f"({stats[ga[0]]['held_out']['n']})"),
    ]
    return table("affine diagnostic (measured = floor + scale x predicted, fitted on the rows not held out)",
                 columns, groups)


def _commit(reg) -> str:
    return reg.commit[:8] if reg.commit and set(reg.commit) != {"0"} else (reg.git or "not committed")


def registered_table(rows, title: str):
    """Rows with a prediction registered before their measured value: as registered (its commit) and now."""
    moved = any(r.registration.moved for r in rows)
    columns = [
        Column("id", lambda r: r.id, "left"),
        Column("stage", lambda r: r.stage or "(whole)", "left"),
        Column("measured", lambda r: ms(r.measured_us)),
        Column("registered", lambda r: ms(r.registration.registered_us)),
        Column("error", lambda r: signed_pct(r.registered_error)),
        Column("commit", lambda r: _commit(r.registration), "left"),
        Column("now", lambda r: ms(r.registration.now_us) if r.registration.moved else "", when=moved),
        Column("status", lambda r: r.registration.status, "left"),
    ]
    return table(title, columns, rows)


def registered_lines(rows, pending=()) -> list[str]:
    """Per implementation with registered predictions: median and largest |error| of the figures as registered."""
    out = []
    for impl, s in by_implementation(rows).items():
        reg = s.get("registered")
        if reg:
            out.append(f"{impl}: as registered before the measured values: median |error| "
                       f"{_pct(reg['median_abs'])}, max {_pct(reg['max_abs'])} on {reg['n']} rows")
    if pending:
        out.append(f"registered, not measured yet: {len(pending)} ({', '.join(p.id for p in pending[:6])}"
                   f"{', ...' if len(pending) > 6 else ''})")
    return out


def reported_table(data_only):
    """Measured rows reported as data, not predicted, and why."""
    columns = [Column("id", lambda r: r.id, "left"), Column("stage", lambda r: r.stage or "(whole)", "left"),
               Column("measured", lambda r: ms(r.measured_us)), Column("not modelled", lambda r: r.why, "left")]
    return table(f"reported, not modelled: {len(data_only)} rows", columns, data_only)


def report(rows, diag, result, floors, influences, pending=(), data_only=()) -> list:
    """Everything kda.validate prints, as rich tables and plain lines, in order."""
    out: list = []
    impls = list(dict.fromkeys(r.implementation for r in rows))
    for held, section in ((False, "rows fitted on"), (True, "held out (never seen by any fit)")):
        for impl in impls:
            sel = [r for r in rows if r.implementation == impl and r.held_out == held]
            if sel:
                out.append(rows_table(sel, f"{impl or '(no implementation)'}: {section}, {len(sel)} rows",
                                      fitted=result is not None))
    for impl in impls:
        sel = [r for r in rows if r.implementation == impl and r.registration is not None]
        if sel:
            out.append(registered_table(sel, f"{impl}: predictions registered before the measured values"))
    if data_only:
        out.append(reported_table(data_only))
    out.extend(implementation_lines(rows))
    out.extend(registered_lines(rows, pending))
    s = summary(rows)
    out.append(f"all rows, shipped profile: median |error| {_pct(s['fitted_on']['median_abs'])} on the "
               f"{s['fitted_on']['n']} rows fitted on, {_pct(s['held_out']['median_abs'])} on the "
               f"{s['held_out']['n']} held out (largest {_pct(s['all']['max_abs'])})")
    if influences:
        out.append("what decides the spread of the largest row (Spearman rho^2): " +
                   ", ".join(f"{i.field} {i.share:.0%}" for i in influences[:4]))
    if diag:
        out.append(affine_table(rows, diag))
    if result:
        f = summary(rows, "fitted_error")
        out.append(f"--fit (fields within their ranges + a host floor per implementation and stage; "
                   f"{result.rms_before:.0%} -> {result.rms_after:.0%} rms on the {f['fitted_on']['n']} rows fitted): "
                   f"median |error| {_pct(f['fitted_on']['median_abs'])} on them, {_pct(f['held_out']['median_abs'])} "
                   f"on the {f['held_out']['n']} held out (largest {_pct(f['held_out']['max_abs'])})")
        out.append("  host floors: " + ", ".join(f"{k} {v / 1000:.3f} ms" for k, v in floors.items()))
        for ff in result.fields:
            out.append(f"  {ff.field}: " + (f"{ff.prior:g} -> {ff.value:.4g}" + (" (at a bound)" if ff.at_bound else "")
                                           if ff.determined else f"not determined ({ff.why})"))
    return out
