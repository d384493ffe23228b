"""Rich tables of kda.validate (kda/studies/validate.py): predicted against measured per implementation and stage.

`report(rows, diag, result, floors, influences)` gives the renderables in print order: the rows fitted on, one
table per implementation (stages in the forward's order), then the held-out rows (never seen by any fit) the
same way, then one summary line per implementation (median and largest |error|, fitted-on and held-out rows
apart), the affine diagnostic per implementation and stage, and --fit's fields and host floors.
A table's title holds what its rows share (the shape fields, the dtype); its rows show only what differs.
"""
from __future__ import annotations

import math

from rich import box
from rich.table import Table
from rich.text import Text

from kda.studies.validate import by_implementation, stage_order, summary


def _pct(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0%}"


def _ms(us: float) -> str:
    return "-" if math.isnan(us) else f"{us / 1000:.3f}"


def _fields(shape: str) -> list[tuple[str, str]] | None:
    """A `K=V;...` shape as its fields; None for the other forms (shown whole)."""
    if "=" not in shape:
        return None
    return [tuple(item.split("=", 1)) for item in shape.replace(" ", "").split(";") if item]


def split_shapes(rows) -> tuple[str, list[str]]:
    """(what every row's shape shares, each row's rest): 'B=16 Hg=16 K=128 V=128', ['T=4096 H=16 C=128', ...].
    Shapes not written as fields are shown whole."""
    parsed = [_fields(r.shape) for r in rows]
    if any(p is None for p in parsed):
        return "", [r.shape for r in rows]
    common = set(parsed[0]).intersection(*map(set, parsed[1:])) if len(parsed) > 1 else set()
    shared = " ".join(f"{k}={v}" for k, v in parsed[0] if (k, v) in common)
    return shared, [" ".join(f"{k}={v}" for k, v in p if (k, v) not in common) for p in parsed]


def _error(x: float) -> Text:
    if math.isnan(x):
        return Text("-")
    return Text(f"{x:+.0%}", style="red" if abs(x) > 0.5 else ("yellow" if abs(x) > 0.2 else "green"))


def rows_table(rows, title: str, fitted: bool = False) -> Table:
    """One implementation's rows: stage, shape, measured, predicted, error, 90 % interval, affine (and --fit)."""
    shared, shapes = split_shapes(rows)
    dtypes, stages = set(r.dtype for r in rows), set(r.stage for r in rows)
    one_stage = next(iter(stages)) if len(stages) == 1 else None
    caption = ", ".join(x for x in (one_stage or ("whole kernel" if one_stage == "" else ""), shared,
                                    next(iter(dtypes)) if len(dtypes) == 1 else "") if x)
    t = Table(title=f"{title}, times in ms" + (f"  [dim]({caption})[/dim]" if caption else ""), box=box.SIMPLE_HEAD,
              title_justify="left", padding=(0, 1), show_edge=False)
    if one_stage is None:
        t.add_column("stage", no_wrap=True)
    t.add_column("shape", min_width=max(len(x) for x in shapes), no_wrap=True)
    if len(dtypes) > 1:
        t.add_column("dtype")
    for name in ("measured", "predicted", "error", "90 % interval", "in", "affine", "error") + \
            (("fitted", "error") if fitted else ()):
        t.add_column(name, justify="right", no_wrap=True)
    order = {s: i for i, s in enumerate(stage_order(rows))}
    for i in sorted(range(len(rows)), key=lambda i: order[rows[i].stage]):     # stable: file order per stage
        r = rows[i]
        iv = "-" if math.isnan(r.p05) else f"[{r.p05 / 1000:.3f}, {r.p95 / 1000:.3f}]"
        inside = "-" if math.isnan(r.p05) else ("yes" if r.inside else "no")
        cells = ([] if one_stage is not None else [r.stage or "(whole)"]) + [shapes[i]] + ([r.dtype] if len(dtypes) > 1 else [])
        cells += [_ms(r.measured_us), _ms(r.predicted_us), _error(r.error), iv, inside, _ms(r.affine_us),
                  _error(r.affine_error)]
        if fitted:
            cells += [_ms(r.fitted_us), _error(r.fitted_error)]
        t.add_row(*cells)
    return t


def implementation_lines(rows) -> list[str]:
    """Per implementation: median and largest |error| under the shipped profile, fitted-on and held-out apart."""
    out = []
    for impl, s in by_implementation(rows).items():
        def part(sel, what):
            return (f"median |error| {_pct(sel['median_abs'])}, max {_pct(sel['max_abs'])} on the {sel['n']} {what}"
                    if sel["n"] else f"no {what}")
        n = s["all"]["n"]
        sampled = any(not math.isnan(r.p05) for r in rows if r.implementation == impl)
        out.append(f"{impl or '(no implementation)'}: {part(s['fitted_on'], 'rows fitted on')}; "
                   f"{part(s['held_out'], 'held out')}"
                   + (f"; {s['inside_interval']} of {n} inside the 90 % interval" if sampled else ""))
    return out


def affine_table(rows, diag) -> Table:
    t = Table(title="affine diagnostic (measured = floor + scale x predicted, fitted on the rows not held out)", box=box.SIMPLE_HEAD, title_justify="left", padding=(0, 1),
              show_edge=False)
    for name, justify in (("implementation/stage (kernel)", "left"), ("floor ms", "right"), ("scale", "right"),
                          ("rows", "right"), ("median |error| fitted on", "right"), ("held out", "right")):
        t.add_column(name, justify=justify)
    for group, a in diag.items():
        s = summary([r for r in rows if r.group == group], "affine_error")
        t.add_row(group, f"{a.floor_us / 1000:.3f}", f"{a.scale:.2f}", str(a.n), _pct(s["fitted_on"]["median_abs"]),
                  _pct(s["held_out"]["median_abs"]) + f" ({s['held_out']['n']})")
    return t


def width(renderables, at_least: int = 120) -> int:
    """The console width that prints every table of `renderables` unsqueezed (for logs and pipes)."""
    from rich.console import Console
    probe = Console(width=1000)
    return max([at_least] + [probe.measure(t).maximum for t in renderables if isinstance(t, Table)])


def report(rows, diag, result, floors, influences) -> list:
    """Everything kda.validate prints, as rich renderables and plain lines, in order."""
    out: list = []
    impls = list(dict.fromkeys(r.implementation for r in rows))
    for held, section in ((False, "rows fitted on"), (True, "held out (never seen by any fit)")):
        for impl in impls:
            sel = [r for r in rows if r.implementation == impl and r.held_out == held]
            if sel:
                out.append(rows_table(sel, f"{impl or '(no implementation)'}: {section}, {len(sel)} rows",
                                      fitted=result is not None))
    out.extend(implementation_lines(rows))
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
