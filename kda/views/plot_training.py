"""Training on the chip as figures: the forward + backward schedule as one timeline, and the training ranking.

    fig = figure_training(fwd, bwd)     # fwd: kda.studies.evaluate result, bwd: BackwardResult, both traced
    fig = figure_ranking(results)       # BackwardResults (timing): forward + backward per design and states

The timeline's top strip puts every pass of the forward design, then every pass of its backward design, on
one time axis (launches grey, barriers red); below it, for each pass that walks the chunks in order (the
forward's state pass, the backward's recomputing pass and its reverse pass), a zoom on a few chunks of the
steady state drawn with kda/views/gantt.py: every phase on its unit and every hand-off as a transfer bar and
an arrow from producer to consumer.
"""
from __future__ import annotations

from typing import Sequence

from npusim.model.schedule import CHUNKS

from kda.views.gantt import draw_gantt, legend_handles, zoom_window

FORWARD, BACKWARD = "#1f77b4", "#d62728"


def draw_schedule(ax, runs: Sequence[tuple[str, object, str]]) -> float:
    """One strip: the passes of each (label, DesignRun, colour) one after the other (ms). Returns the end."""
    t0 = 0.0
    for label, dr, color in runs:
        for i, p in enumerate(dr.passes):
            b0 = t0 + (p.start_us - p.boundary_us) / 1e3
            barrier = i and p.pass_.boundary == "barrier"
            ax.barh(0, p.boundary_us / 1e3, left=b0, color="#d62728" if barrier else "#7f7f7f", height=0.8)
            ax.barh(0, p.run.makespan_us / 1e3, left=t0 + p.start_us / 1e3, color=color, height=0.8,
                    alpha=0.35 + 0.4 * (i % 2), edgecolor="white")
            ax.text(t0 + (p.start_us + p.run.makespan_us / 2) / 1e3, 0, f"{label}\n{p.pass_.name}", ha="center",
                    va="center", fontsize=7.5)
        t0 += dr.latency_us / 1e3
    ax.set_yticks([])
    ax.set_xlim(0, t0)
    ax.set_xlabel("time (ms): the forward design, then its backward design")
    return t0


def sequential_passes(dr) -> list:
    """The passes of a design run that walk the chunks in order (forward or reverse)."""
    return [p for p in dr.passes if p.pass_.layout != CHUNKS]


def figure_training(fwd, bwd, *, zoom_chunks: int = 2, width: float = 15.0):
    """The forward + backward schedule of one design (see the module docstring). `fwd` and `bwd` need traced
    pipelined runs (Settings(keep_trace=True))."""
    import matplotlib.pyplot as plt
    fdr, bdr = fwd.design_run, bwd.design_run
    if fdr is None or bdr is None:
        raise ValueError("figure_training needs the forward's and the backward's design runs (keep_trace=True)")
    zooms = [("forward", p) for p in sequential_passes(fdr)] + [("backward", p) for p in sequential_passes(bdr)]
    heights = [0.7] + [1.6] * len(zooms)
    fig, axes = plt.subplots(len(heights), 1, figsize=(width, 1.2 + 2.0 * sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    axes = list(axes[:, 0])
    end = draw_schedule(axes[0], [(f"{fwd.version} forward", fdr, FORWARD), (f"{bwd.version} backward", bdr, BACKWARD)])
    axes[0].set_title(f"{bwd.version}: forward {fdr.latency_us / 1e3:,.3f} ms + backward ({bwd.states}) "
                      f"{bdr.latency_us / 1e3:,.3f} ms = {end:,.3f} ms on {bwd.profile.name}, {fdr.sequences} "
                      f"sequence(s) · grey: launch, red: all-core barrier", fontsize=10, loc="left")
    for ax, (side, p) in zip(axes[1:], zooms):
        run = p.run
        window = zoom_window(run, 0, zoom_chunks)
        lo, hi, (c0, c1) = window if window else (0.0, run.makespan_us, (0, run.chunks - 1))
        draw_gantt(ax, run, cores=[0], t_range=(lo, hi))
        order = "from the last chunk to the first" if p.pass_.reverse else "in order"
        ax.set_title(f"{side} pass {p.pass_.name} ({order}, {sum(1 for s in run.template.graph.syncs)} hand-offs "
                     f"per chunk): chunks {c0}-{c1} of its walk, sequence 0 on core 0; arrows: producer → consumer",
                     fontsize=9, loc="left")
        ax.set_xlabel("time (µs) from the pass's start")
    fig.legend(handles=legend_handles(zooms[-1][1].run), loc="lower center", ncol=6, fontsize=8.5, frameon=False)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def figure_ranking(results: Sequence, width: float = 10.0):
    """Forward + backward latency per (design, states), stacked, fastest first (the training ranking)."""
    import matplotlib.pyplot as plt
    rows = sorted((r for r in results if r.training_us), key=lambda r: r.training_us)
    if not rows:
        raise ValueError("figure_ranking needs results with the forward's timing (forward=True)")
    fig, ax = plt.subplots(figsize=(width, 0.9 + 0.45 * len(rows)))
    labels = [f"{r.version} ({r.states})" for r in rows]
    fwd = [r.forward_report.latency_us / 1e3 for r in rows]
    bwd = [r.report.latency_us / 1e3 for r in rows]
    ax.barh(labels, fwd, color=FORWARD, label="forward")
    ax.barh(labels, bwd, left=fwd, color=BACKWARD, alpha=0.7, label="backward")
    for y, (f, b, r) in enumerate(zip(fwd, bwd, rows)):
        kept = f", {r.kept_bytes / 1e9:.2f} GB kept" if r.kept_bytes else ""
        ax.text(f + b, y, f" {f + b:,.2f} ms{kept}", va="center", fontsize=8.5)
    ax.invert_yaxis()
    ax.set_xlim(0, max(f + b for f, b in zip(fwd, bwd)) * 1.3)
    s = rows[0].settings
    ax.set_xlabel(f"ms on {rows[0].profile.name}, {s.heads} heads × {s.T} tokens, {s.dtype}")
    ax.set_title("training ranking, forward + backward (recompute: the backward makes the forward's "
                 "intermediates again;\nstore: the forward kept them in GM)", fontsize=9.5, loc="left")
    ax.legend(loc="lower right", fontsize=8.5)
    fig.tight_layout()
    return fig
