"""All cores at once: how busy each AI core's Cube and Vector units are over time, as heat maps, with the
passes, launches and barriers of a design marked above them. Waves (a CHUNKS pass's items going round
the cores) and stragglers (the cores that hold one sequence more) show as bands and ragged right edges.

    busy(core, unit, bin) = time the unit spends in phases inside the bin / bin width     (0 .. 1)

A Vector phase runs on all the core's Vector units in lockstep, so "Vector" is one row per core.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from npusim.model.multipass import DesignRun
from npusim.model.template import PHASE
from npusim.record.graph import CUBE, VEC

UNITS = {CUBE: "Cube", VEC: "Vector"}


def busy_fraction(dr: DesignRun, unit: str, bins: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """(edges [bins + 1] in µs, busy [cores, bins]) of `unit` over the design's whole latency."""
    edges = np.linspace(0.0, max(dr.latency_us, 1e-9), bins + 1)
    cores = max((p.run.cores_used for p in dr.passes), default=0)
    cum = np.zeros((cores, bins + 1))
    for run in dr.shifted_runs():
        tr = run.trace
        if tr is None:
            raise ValueError(f"{dr.design.name}: the run has no trace: replay it with trace=True")
        nodes = tr.template.nodes
        pick = [i for i, n in enumerate(tr.node) if nodes[n].kind == PHASE and nodes[n].resource == unit]
        core, start, end = (np.asarray([col[i] for i in pick]) for col in (tr.core, tr.start, tr.end))
        for c in np.unique(core) if len(pick) else []:
            s, e = start[core == c], end[core == c]
            order = np.argsort(e)
            cum[c] += _busy_until(edges, s[order], e[order])
    return edges, np.diff(cum, axis=1) / np.diff(edges)


def _busy_until(t: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Busy time before each t of intervals [s, e) that never overlap (one unit), sorted by end."""
    done = np.concatenate([[0.0], np.cumsum(e - s)])
    k = np.searchsorted(e, t, side="right")               # intervals over by t
    nxt = np.minimum(k, len(s) - 1)
    partial = np.where(k < len(s), np.clip(t - s[nxt], 0.0, None), 0.0)
    return done[k] + partial


def draw_heatmap(ax, dr: DesignRun, unit: str, bins: int = 400, *, marks: bool = True):
    edges, busy = busy_fraction(dr, unit, bins)
    ms = edges / 1e3
    im = ax.imshow(busy, aspect="auto", origin="lower", interpolation="nearest", cmap="viridis", vmin=0, vmax=1,
                   extent=(ms[0], ms[-1], -0.5, busy.shape[0] - 0.5))
    ax.set_ylabel(f"{UNITS.get(unit, unit)}\nAI core")
    if marks:
        for p in dr.passes:
            ax.axvline(p.start_us / 1e3, color="white", lw=0.8, ls="--")
    return im


def draw_passes(ax, dr: DesignRun) -> None:
    """One strip: each launch or barrier, then its pass, on the design's time axis (ms)."""
    for i, p in enumerate(dr.passes):
        b0 = (p.start_us - p.boundary_us) / 1e3
        barrier = i and p.pass_.boundary == "barrier"
        ax.barh(0, p.boundary_us / 1e3, left=b0, color="#d62728" if barrier else "#7f7f7f", height=0.8)
        ax.barh(0, p.run.makespan_us / 1e3, left=p.start_us / 1e3, color=f"C{i}", height=0.8, alpha=0.6)
        share = p.run.makespan_us / max(dr.latency_us, 1e-9)
        if share > 0.06:                                   # room for a label
            ax.text((p.start_us + p.run.makespan_us / 2) / 1e3, 0,
                    f"{p.pass_.name} ({p.pass_.layout})" if share > 0.2 else p.pass_.name,
                    ha="center", va="center", fontsize=8)
    ax.set_yticks([])
    ax.set_xlim(0, dr.latency_us / 1e3)


def figure_designs(results: Sequence, bins: int = 400, width: float = 14.0, serial: bool = False,
                   labels: Sequence[str] | None = None):
    """Per result with a traced design_run (design_serial with `serial`): the pass strip, Cube and Vector
    heat maps, titled with its label (default: its version, and "serial")."""
    import matplotlib.pyplot as plt
    run_of = (lambda r: r.design_serial) if serial else (lambda r: r.design_run)
    named = [(r, f"{r.version}{' serial' if serial else ''}" if labels is None else labels[i])
             for i, r in enumerate(results)]
    rows = [(r, label) for r, label in named if run_of(r) is not None]
    if not rows:
        raise ValueError("no design run to plot")
    ratios = []
    for r, _ in rows:
        cores = max(p.run.cores_used for p in run_of(r).passes)
        ratios += [0.5, max(1.0, cores / 8), max(1.0, cores / 8)]
    fig, axes = plt.subplots(len(ratios), 1, figsize=(width, sum(ratios) * 0.9 + 0.8 * len(rows)),
                             gridspec_kw={"height_ratios": ratios}, squeeze=False, layout="constrained")
    axes = axes[:, 0]
    im = None
    for k, (r, label) in enumerate(rows):
        dr = run_of(r)
        strip, cube, vec = axes[3 * k: 3 * k + 3]
        draw_passes(strip, dr)
        strip.set_title(f"{label}: {dr.latency_us / 1e3:,.3f} ms on {r.profile.name}, {dr.sequences} "
                        f"sequence(s), interleave {dr.interleave} · grey: launch, red: all-core barrier, "
                        "dashed: a pass starts", fontsize=10, loc="left")
        im = draw_heatmap(cube, dr, CUBE, bins)
        draw_heatmap(vec, dr, VEC, bins)
        for ax in (strip, cube):
            ax.set_xticklabels([])
        vec.set_xlabel("time (ms)")
        for ax in (strip, cube, vec):
            ax.set_xlim(0, dr.latency_us / 1e3)
    fig.colorbar(im, ax=list(axes), shrink=0.6, label="busy fraction")
    return fig
