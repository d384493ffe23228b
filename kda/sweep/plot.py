"""What people look at in a sweep's table: the Pareto front of latency, accuracy (rel RMS) and workspace
KiB coloured by design; heat maps of any two axes; the best point per shape."""
from __future__ import annotations

import math
from pathlib import Path

from npusim.output import files

SHAPE = ("batch", "heads", "tokens", "seqlens", "d_k", "d_v")
WORKSPACE = "workspace_kib.needed"


class PlotError(ValueError):
    """A table or a column that cannot be plotted: one line."""


def settings_columns(df) -> list[str]:
    """The sweep writes point, the settings, then status: the settings are the columns between."""
    cols = list(df.columns)
    if "point" not in cols or "status" not in cols:
        raise PlotError("not a sweep table: it has no 'point' and 'status' columns")
    return cols[cols.index("point") + 1:cols.index("status")]


def axes(df) -> list[str]:
    """The settings that vary over the table."""
    return [c for c in settings_columns(df) if df[c].astype(str).nunique() > 1]


def latency_column(df) -> str:
    c = "layer.latency_us"
    if c in df.columns and df[c].notna().any():
        return c
    raise PlotError("the table has no latency column (layer.latency_us): was it left out of the spec's "
                    "metrics, or did every point fail?")


def with_objectives(df):
    """The ok rows of designs not known to overflow on their gates (`safe` false: the run's numerics or its
    probe found inf/NaN), with `latency_us`, `rel_rms` (max of output and state error; NaN without numerics)
    and `workspace_kib` columns."""
    ok = df[df["status"] == "ok"]
    if "safe" in ok.columns:
        ok = ok[ok["safe"].map(lambda x: x is not False and x != "false")]
    ok = ok.copy()
    ok["latency_us"] = ok[latency_column(df)].astype(float)
    errs = [c for c in ("errors.o", "errors.final_state") if c in ok.columns]
    ok["rel_rms"] = ok[errs].astype(float).max(axis=1) if errs else math.nan
    ok["workspace_kib"] = ok[WORKSPACE].astype(float) if WORKSPACE in ok.columns else math.nan
    return ok


def pareto_mask(values) -> list[bool]:
    """Rows of `values` (lists of numbers, all minimised) that no other row dominates; NaN objectives are
    left out of the comparison (every row lacks them alike)."""
    rows = [tuple(v) for v in values]
    keep = [i for i in range(len(rows[0])) if not any(math.isnan(r[i]) for r in rows)] if rows else []
    pts = [tuple(r[i] for i in keep) for r in rows]
    return [not any(all(o <= p for o, p in zip(q, pt)) and q != pt for q in pts) for pt in pts]


def figure_pareto(df):
    import matplotlib.pyplot as plt
    ok = with_objectives(df)
    if ok.empty:
        raise PlotError("no point of the table succeeded: nothing to plot")
    objs = ["latency_us", "rel_rms", "workspace_kib"]
    front = pareto_mask(ok[objs].to_numpy(float).tolist())
    ok["front"] = front
    pairs = [(a, b) for a, b in (("latency_us", "rel_rms"), ("latency_us", "workspace_kib"),
                                 ("rel_rms", "workspace_kib")) if ok[a].notna().all() and ok[b].notna().all()]
    if not pairs:
        return _figure_latency_only(ok)
    fig, axs = plt.subplots(1, len(pairs), figsize=(5.2 * len(pairs), 4.0), squeeze=False)
    versions = sorted(ok["version"].astype(str).unique())
    colours = {v: plt.get_cmap("tab10")(i % 10) for i, v in enumerate(versions)}
    labels = {"latency_us": "latency (µs)", "rel_rms": "rel RMS error (max of output, state)",
              "workspace_kib": "workspace per core (KiB)"}
    for ax, (x, y) in zip(axs[0], pairs):
        for v in versions:
            sub = ok[ok["version"].astype(str) == v]
            ax.scatter(sub[x], sub[y], s=14, color=colours[v], alpha=0.35, lw=0)
            top = sub[sub["front"]]
            ax.scatter(top[x], top[y], s=40, color=colours[v], edgecolor="black", lw=0.8, label=v)
        ax.set_xlabel(labels[x])
        ax.set_ylabel(labels[y])
        ax.grid(color="#e5e5e5")
        if x == "rel_rms" or y == "rel_rms":
            (ax.set_xscale if x == "rel_rms" else ax.set_yscale)("log")
    axs[0][0].legend(fontsize=8, title="design (outlined: Pareto front)", title_fontsize=8)
    fig.suptitle(f"{int(ok['front'].sum())} of {len(ok)} points on the Pareto front of "
                 + ", ".join(labels[o].split(" (")[0] for o in objs if ok[o].notna().all()), fontsize=10)
    fig.tight_layout()
    return fig


def _figure_latency_only(ok):
    """The latency of every point by design, the fastest outlined: with one objective there is no front to draw
    (the title says which metrics would give one)."""
    import matplotlib.pyplot as plt
    versions = sorted(ok["version"].astype(str).unique())
    fig, ax = plt.subplots(figsize=(7.0, 0.6 * len(versions) + 1.6))
    for i, v in enumerate(versions):
        lat = ok[ok["version"].astype(str) == v]["latency_us"].to_numpy(float)
        ax.scatter(lat, [i] * len(lat), s=24, color=plt.get_cmap("tab10")(i % 10), alpha=0.6, lw=0)
    best = ok.loc[ok["latency_us"].idxmin()]
    ax.scatter([best["latency_us"]], [versions.index(str(best["version"]))], s=70, facecolor="none",
               edgecolor="black", lw=1.0, label=f"fastest: point {best['point']}")
    ax.set_yticks(range(len(versions)), versions)
    ax.set_ylim(-0.6, len(versions) - 0.4)
    ax.set_xlabel("latency (µs)")
    ax.grid(axis="x", color="#e5e5e5")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title("latency only: no Pareto front (add the metric workspace_kib, or numerics, to the spec for one)",
                 fontsize=9)
    fig.tight_layout()
    return fig


def _metric(ok, metric: str | None) -> str:
    """The metric column to plot or rank by: present, and numbers (a text column has no minimum to show)."""
    if metric is not None and not metric.strip():
        raise PlotError("--metric: empty; name a column of numbers (default latency_us)")
    metric = metric or "latency_us"
    if metric not in ok.columns:
        raise PlotError(f"--metric: no column {metric!r}")
    try:
        ok[metric] = ok[metric].astype(float)
    except (TypeError, ValueError):
        raise PlotError(f"--metric {metric}: not a column of numbers") from None
    return metric


def heatmap_table(df, x: str, y: str, metric: str | None = None):
    """metric by (y, x): the smallest over the other axes, where others vary."""
    for c in (x, y):
        if c not in df.columns:
            raise PlotError(f"--heatmap: no column {c!r}; the axes are {', '.join(axes(df)) or 'none'}")
    ok = with_objectives(df)
    metric = _metric(ok, metric)
    return ok.pivot_table(index=y, columns=x, values=metric, aggfunc="min")


def figure_heatmap(df, x: str, y: str, metric: str | None = None):
    import matplotlib.pyplot as plt
    table = heatmap_table(df, x, y, metric)
    others = [a for a in axes(df) if a not in (x, y)]
    fig, ax = plt.subplots(figsize=(1.0 + 0.8 * max(len(table.columns), 4), 1.2 + 0.45 * max(len(table), 3)))
    im = ax.imshow(table.to_numpy(float), origin="lower", aspect="auto", cmap="viridis_r")
    ax.set_xticks(range(len(table.columns)), [f"{c:g}" if isinstance(c, float) else str(c) for c in table.columns],
                  fontsize=8)
    ax.set_yticks(range(len(table.index)), [f"{c:g}" if isinstance(c, float) else str(c) for c in table.index],
                  fontsize=8)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    values = table.to_numpy(float)
    lo, hi = im.get_clim()
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            if not math.isnan(values[i, j]):        # dark text on the light (low) end of viridis_r
                dark = (values[i, j] - lo) < 0.55 * (hi - lo)
                ax.text(j, i, f"{values[i, j]:.4g}", ha="center", va="center", fontsize=7,
                        color="black" if dark else "white")
    fig.colorbar(im, ax=ax, label=metric or "latency (µs)")
    ax.set_title(f"{metric or 'latency (µs)'}" + (f", best over {', '.join(others)}" if others else ""),
                 loc="left", fontsize=9)
    fig.tight_layout()
    return fig


def best_per_shape(df, metric: str | None = None):
    """Per shape (batch, heads, tokens, d_k, d_v), the ok point with the smallest metric (default the
    latency) among those that pass parity where numerics ran and that stay finite on their gates (`safe`:
    by the numerics, else by the probe; a point nothing checked is no winner)."""
    ok = with_objectives(df)
    metric = _metric(ok, metric)
    if "parity.pass" in ok.columns:
        ok = ok[ok["parity.pass"].isna() | (ok["parity.pass"] == True)]  # noqa: E712 - a column of bools
    if "safe" in ok.columns:
        ok = ok[ok["safe"].map(lambda x: x is True or x == "true")]
    ok = ok[ok[metric].notna()]
    if ok.empty:
        raise PlotError("no point succeeded, passed parity and stayed finite on its gates: no best point")
    shape = [c for c in SHAPE if c in ok.columns]
    best = ok.loc[ok.groupby(shape, dropna=False)[metric].idxmin()] if shape else ok.nsmallest(1, metric)
    keep = list(dict.fromkeys(shape + ["point", "version"] + axes(df) + [metric, "rel_rms", "workspace_kib", "safe"]))
    return best[[c for c in keep if c in best.columns]].reset_index(drop=True)


def plot_table(path: str | Path, outdir: str | Path | None = None, heatmaps: list | None = None,
               metric: str | None = None) -> tuple[list[Path], str]:
    """Writes pareto.png, one heatmap_X_Y.png per pair and best.md; returns the paths and the best table
    as markdown."""
    from kda.sweep.table import read_table
    path = Path(path)
    try:
        df = read_table(path)
    except (FileNotFoundError, OSError, ValueError) as err:
        raise PlotError(f"{path}: {err}") from None
    settings_columns(df)                           # a sweep's table, or one line saying it is not one
    pairs = [tuple(h) for h in heatmaps or []]
    if any(len(p) != 2 for p in pairs):
        raise PlotError("--heatmap takes two columns, X,Y")
    outdir = Path(outdir) if outdir is not None else path.with_name(path.stem + "_plots")
    _make_outdir(outdir)
    if not pairs and len(axes(df)) >= 2:
        pairs = [tuple(axes(df)[:2])]
    try:
        out = _drawn(df, pairs, metric)
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, PlotError):
            raise
        raise PlotError(f"{path}: cannot plot this table ({type(err).__name__}: {err})") from None
    best = out[-1][1].decode("utf-8").rstrip("\n")
    written = []
    try:
        for name, data in out:                     # each file whole or not at all
            written.append(files.write_bytes("--outdir", outdir / name, data))
    except files.OutputError as err:
        raise PlotError(str(err)) from None
    return written, best


def _drawn(df, pairs, metric) -> list[tuple[str, bytes]]:
    """(file name, bytes) of the Pareto front, the heat maps and the best points, drawn in memory."""
    import matplotlib.pyplot as plt

    from kda.views.plots import png_bytes
    figures = []
    try:
        figures.append(("pareto.png", figure_pareto(df)))
        figures += [(f"heatmap_{x}_{y}.png".replace("/", "_"), figure_heatmap(df, x, y, metric)) for x, y in pairs]
        best = markdown_table(best_per_shape(df, metric))
    except BaseException:
        for _, fig in figures:
            plt.close(fig)
        raise
    return [(name, png_bytes(fig, 100)) for name, fig in figures] + [("best.md", (best + "\n").encode("utf-8"))]


def _make_outdir(outdir: Path) -> None:
    """The folder of the figures, made if missing; PlotError (one line) where it cannot be written."""
    if outdir.exists() and not outdir.is_dir():
        raise PlotError(f"--outdir {outdir}: a file, not a folder (the figures go into a folder)")
    try:
        outdir.mkdir(parents=True, exist_ok=True)
        files.check_writable("--outdir", outdir / "best.md")
    except OSError as err:
        raise PlotError(f"--outdir {outdir}: cannot make the folder ({err.strerror or err})") from None
    except files.OutputError as err:
        raise PlotError(str(err)) from None


def markdown_table(df) -> str:
    """A DataFrame as a markdown table (pandas' to_markdown; numbers to 4 significant digits)."""
    return df.to_markdown(index=False, floatfmt=".4g")
