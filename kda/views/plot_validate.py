"""Predicted against measured on log-log axes (matplotlib, Agg backend), for kda.validate --plot and notebook 05.

One point per row: x the measured time, y the model's under the shipped profile, with the 90 % interval of the
assumed ranges as a vertical bar when sampled. Colour: the implementation; marker: the stage (a star for a
whole kernel); hollow: held out (never seen by any fit). The diagonal is a perfect prediction; the dotted
lines are 2x off either way.
"""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from kda.studies.validate import stage_order  # noqa: E402

COLORS = ("#2f6db5", "#d9534f", "#5cb85c", "#f0ad4e", "#8e6bbf", "#777777", "#17becf", "#bcbd22")
MARKERS = {"cumsum": "o", "kkt": "s", "solve_tril": "^", "wy_fast": "D", "chunk_h": "v", "chunk_o": "P", "": "*"}
OTHER = ("X", "h", "<", ">", "p", "8")


def figure_validation(rows, title: str = "", width: float = 9.0):
    """The figure (the caller saves or shows it: kda.views.plots.save / png_bytes)."""
    fig, ax = plt.subplots(figsize=(width, width * 0.68))
    impls = list(dict.fromkeys(r.implementation for r in rows))
    color = {impl: COLORS[i % len(COLORS)] for i, impl in enumerate(impls)}
    extra = iter(OTHER * 8)
    marker = {s: MARKERS.get(s) or next(extra) for s in stage_order(rows)}
    for r in rows:
        if math.isnan(r.predicted_us):
            continue
        x, y, c = r.measured_us / 1000, r.predicted_us / 1000, color[r.implementation]
        if not math.isnan(r.p05):
            ax.plot([x, x], [r.p05 / 1000, r.p95 / 1000], "-", color=c, alpha=0.35, lw=1.5, zorder=1)
        ax.plot(x, y, marker[r.stage], color=c, mfc="none" if r.held_out else c, ms=6 if r.stage else 9, mew=1.2,
                zorder=2)
    pts = [v / 1000 for r in rows for v in (r.measured_us, r.predicted_us) if v > 0 and not math.isnan(v)]
    lo, hi = min(pts) / 1.5, max(pts) * 1.5
    for factor, style in ((1, "-"), (2, ":"), (0.5, ":")):
        ax.plot([lo, hi], [lo * factor, hi * factor], style, color="black", lw=0.8, zorder=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured (ms)"), ax.set_ylabel("predicted, shipped profile (ms)")
    ax.grid(color="#e5e5e5", which="both", lw=0.5)
    handles = [Line2D([], [], marker="o", ls="", color=color[i], label=i or "(no implementation)") for i in impls]
    handles += [Line2D([], [], marker=marker[s], ls="", color="#555555", label=s or "whole kernel") for s in marker]
    handles += [Line2D([], [], marker="o", ls="", color="#555555", mfc="none", label="held out"),
                Line2D([], [], ls="-", color="black", lw=0.8, label="predicted = measured; dotted: 2x")]
    if any(not math.isnan(r.p05) for r in rows):
        handles.append(Line2D([], [], ls="-", color="#555555", alpha=0.35, lw=1.5, label="90 % interval"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.set_aspect("equal")
    ax.set_title(title or "predicted against measured (hollow: held out)", fontsize=9)
    fig.tight_layout()
    return fig
