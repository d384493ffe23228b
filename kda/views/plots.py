"""Gantt charts of simulated runs (matplotlib, Agg backend): what each unit does when, and the hand-offs.

- `figure_result(r)`: one run (pipelined, or serial with serial=True). Rows per AI core: Cube, the two
  hand-off links, Vec0, Vec1, ... (the Vector units split each Vector phase in lockstep, so their rows
  match). Phases are bars coloured by unit, labelled with letter and chunk (D3); chunks alternate in
  shade. Hand-offs are bars on the link rows (dark: the transfer holds the link; light: the fixed latency)
  and arrows from the producing phase to the consuming one; the state hand-off is a red arrow.
  With more chunks than `detail_chunks`, the top panel shows the whole run as busy fractions per row and
  the bottom one a window of chunks from the steady state.
- `figure_versions(results)`: one panel per version on a shared time axis.
- `figure_serial_vs_pipelined(r)`: serial above pipelined on one time axis, with the time Cube and Vector
  work at once marked, so the overlap shows.
`save_plot(path, results)` is what `python -m kda.run --plot out.png` calls, for every design (the heat maps
of plot_occupancy.py for designs of several passes); the extension picks the format.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.patches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

from npusim import Run  # noqa: E402
from npusim.output.overlap import analyse  # noqa: E402
from npusim.output.pipe_trace import pipe_rows  # noqa: E402
from npusim.record.graph import CUBE  # noqa: E402

from kda.views.figure import png_bytes, save  # noqa: E402,F401  (plots.save, plots.png_bytes)
from kda.views.gantt import (  # noqa: E402
    COLORS,
    ROW_NAME,
    chunk_ends,
    draw_gantt,
    draw_utilisation,
    legend_handles,
    shown_cores,
    zoom_window,
)


def headline(r, run: Run | None = None) -> str:
    """Version, profile, chunks and the numbers that matter, for a title."""
    run = run or r.pipelined
    s = r.settings
    ov = analyse(run)
    mode = "serial" if run.serial else "pipelined"
    parts = [f"{r.version} on {r.profile.name} · {run.chunks} chunks of {s.chunk_size} × {run.sequences} seq · "
             f"{s.dtype} · {mode}"]
    rep = r.report
    nums = [f"latency {run.latency_us:.1f} µs"]
    if rep is not None and not run.serial:
        nums += [f"serial {rep.serial_us:.1f}", f"bound {rep.bound_us:.1f}", f"efficiency {rep.efficiency:.2f}"]
    if ov.period_us is not None:
        nums.append(f"steady {ov.period_us:.2f} µs/chunk (bound {ov.period_bound_us:.2f})")
    nums.append(f"Cube‖Vec {ov.concurrent_fraction:.0%} of the time ({ov.concurrent_us / run.cores_used:.1f} µs a core)")
    return parts[0] + "\n" + " · ".join(nums)


def _rows_height(run: Run, cores: int) -> float:
    return cores * (3 + run.profile.chip.vec_per_core + len(pipe_rows(run))) + 0.4 * (cores - 1)


def figure_run(run: Run, title: str = "", *, detail_chunks: int = 24, zoom_chunks: int = 3,
               max_cores: int = 2, width: float = 15.0):
    """One run: an overview (bars up to `detail_chunks` chunks, busy fractions beyond) above a zoom on
    `zoom_chunks` chunks from the steady state, where every phase is labelled and every hand-off drawn."""
    cores = shown_cores(run, max_cores)
    h_rows = _rows_height(run, len(cores))
    zoom = zoom_window(run, zoom_chunks - 1, zoom_chunks) if run.chunks > zoom_chunks else None
    panels = 2 if zoom else 1
    fig, axes = plt.subplots(panels, 1, squeeze=False, figsize=(width, 1.6 + panels * (0.36 * h_rows + 0.9)))
    axes = list(axes[:, 0])
    over = axes[0]
    if run.chunks <= detail_chunks:
        draw_gantt(over, run, cores=cores, arrows=zoom is None, chunk_marks=True)
        kind = "every phase and hand-off" if zoom is None else "hand-offs as bars on the link rows"
    else:
        draw_utilisation(over, run, cores=cores)
        kind = "busy fraction per row (too many chunks for bars)"
    over.set_title(f"whole run, {run.chunks} chunks: {kind}", fontsize=9, loc="left", pad=14)
    if zoom:
        lo, hi, (c0, c1) = zoom
        over.axvspan(lo, hi, color="#ffd54f", alpha=0.35, lw=0, zorder=0)
        draw_gantt(axes[1], run, cores=cores, t_range=(lo, hi))
        axes[1].set_title(f"zoom (shaded above): chunks {c0}-{c1} of sequence 0 and what overlaps them; "
                          f"arrows: producer → consumer", fontsize=9, loc="left")
    axes[-1].set_xlabel("time (µs) from the first phase's start; the launch overhead is not drawn")
    more = f" · cores {cores[0]}-{cores[-1]} of {run.cores_used} shown" if run.cores_used > len(cores) else ""
    fig.suptitle((title or _plain_title(run)) + more, fontsize=10.5, x=0.01, ha="left")
    fig.legend(handles=legend_handles(run), loc="lower center", ncol=6, fontsize=8.5, frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def _plain_title(run: Run) -> str:
    g = run.template.graph
    return (f"{g.program} on {run.profile.name} · {run.chunks} chunks · {g.transfer_dtype} · "
            f"{'serial' if run.serial else 'pipelined'} · {run.latency_us:.1f} µs")


def figure_result(r, serial: bool = False, **kw):
    """The Gantt chart of an evaluation (kda.studies.evaluate.VersionResult): pipelined, or serial."""
    run = r.serial if serial else r.pipelined
    if run is None:
        raise ValueError(f"{r.version}: no timing to plot ({r.workspace_error or 'evaluated without timing'})")
    return figure_run(run, headline(r, run), **kw)


def figure_versions(results: Sequence, serial: bool = False, *, detail_chunks: int = 24, max_cores: int = 1,
                    zoom_periods: float = 3.0, width: float = 15.0):
    """One panel per version (any number), stacked on a shared time axis. Long runs are drawn as busy
    fractions per row, with a second column zooming on each version's steady state over the same length
    of time (`zoom_periods` times the slowest steady period), so the chunk pattern compares directly."""
    skipped = [r for r in results if (r.serial if serial else r.pipelined) is None]
    results = [r for r in results if (r.serial if serial else r.pipelined) is not None]
    if not results:
        raise ValueError("no version has timing to plot")
    runs = [r.serial if serial else r.pipelined for r in results]
    long = any(run.chunks > detail_chunks for run in runs)
    heights = [_rows_height(run, min(run.cores_used, max_cores)) for run in runs]
    fig, axes = plt.subplots(len(runs), 2 if long else 1, squeeze=False,
                             figsize=(width, 1.2 + sum(0.36 * h + 0.75 for h in heights)),
                             gridspec_kw={"height_ratios": heights, **({"width_ratios": [1.1, 1]} if long else {})})
    t_max = max(run.makespan_us for run in runs)
    ovs = [analyse(run) for run in runs]
    span = zoom_periods * max((o.period_us or run.makespan_us) for o, run in zip(ovs, runs))
    for i, (r, run) in enumerate(zip(results, runs)):
        ax = axes[i, 0]
        cores = shown_cores(run, max_cores)
        if run.chunks <= detail_chunks:
            draw_gantt(ax, run, cores=cores, t_range=(0.0, t_max), arrow_alpha=0.45)
        else:
            draw_utilisation(ax, run, cores=cores)
        ax.set_xlim(0, t_max)
        if i:
            ax.sharex(axes[0, 0])
        ax.set_title(headline(r, run).replace("\n", " · ") if not long else
                     f"{r.version}: {run.latency_us:.1f} µs, {ovs[i].period_us or 0:.2f} µs per chunk "
                     f"(bound {ovs[i].period_bound_us:.2f})", fontsize=8.5, loc="left")
        if long:
            z = axes[i, 1]
            t0 = min(e.start for e in run.trace.events() if e.seq == 0 and e.chunk == run.chunks // 2 and e.index == 0)
            draw_gantt(z, run, cores=cores, t_range=(t0, t0 + span), arrow_alpha=0.6)
            rel = [x for x in matplotlib.ticker.MaxNLocator(8).tick_values(0.0, span) if 0 <= x <= span]
            z.set_xticks([t0 + x for x in rel], [f"{x:g}" for x in rel])
            z.set_title(f"steady state from chunk {run.chunks // 2} (t = {t0:.1f} µs)", fontsize=8.5, loc="left")
    axes[-1, 0].set_xlabel("time (µs) from the first phase's start")
    if long:
        axes[-1, 1].set_xlabel("µs after the window starts (the same length for every version)")
    mode = "serial" if serial else "pipelined"
    agg = " (left: busy fraction per row, too many chunks for bars; right: a steady-state window)" if long else ""
    missing = "".join(f" · {r.version}: no timing ({r.workspace_error or 'not simulated'})" for r in skipped)
    fig.suptitle(f"{', '.join(r.version for r in results)} {mode}, on one time axis{agg}{missing}", fontsize=11,
                 x=0.01, ha="left")
    fig.legend(handles=legend_handles(runs[0]), loc="lower center", ncol=6, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def figure_serial_vs_pipelined(r, *, window_chunks: int = 3, width: float = 15.0):
    """Chunks finished over time, serial against pipelined, for the whole run; below, both timelines over the
    time the serial run takes for its first `window_chunks` chunks, on one axis, with the time Cube and
    Vector work at once marked (the Cube‖Vec row)."""
    if r.pipelined is None or r.serial is None:
        raise ValueError(f"{r.version}: no timing to plot")
    ser, pip = r.serial, r.pipelined
    last = min(window_chunks, ser.chunks) - 1
    t_range = (0.0, max(e.end for e in ser.trace.events() if e.seq == 0 and e.chunk <= last))
    h = _rows_height(pip, 1) + 1
    fig, (a0, a1, a2) = plt.subplots(3, 1, figsize=(width, 3.4 + 0.72 * h),
                                     gridspec_kw={"height_ratios": [0.5 * h, h - 1, h]})
    o_s, o_p = analyse(ser), analyse(pip)
    for run, color, name in ((ser, "#888888", "serial"), (pip, COLORS[CUBE][0], "pipelined")):
        done = sorted(chunk_ends(run))
        a0.step([0.0, *done], range(len(done) + 1), where="post", color=color, lw=1.6,
                label=f"{name}: {run.latency_us:.1f} µs")
    a0.axvspan(*t_range, color="#ffd54f", alpha=0.35, lw=0)
    a0.set_ylabel("chunks done", fontsize=8.5)
    a0.set_xlabel("time (µs)", fontsize=8.5)
    a0.legend(fontsize=8.5, loc="upper left", frameon=False)
    a0.grid(color="#e5e5e5", linewidth=0.6)
    a0.set_xlim(0, ser.makespan_us)
    a0.set_title(f"whole run: pipelined is {ser.latency_us / pip.latency_us:.2f}× faster; "
                 f"steady state {o_s.period_us or 0:.2f} → {o_p.period_us or 0:.2f} µs per chunk "
                 f"(bound {o_p.period_bound_us:.2f}, set by {_bound_name(o_p.period_bound_by)})",
                 fontsize=9, loc="left")
    draw_gantt(a1, ser, cores=[0], t_range=t_range, chunk_marks=True)
    draw_gantt(a2, pip, cores=[0], t_range=t_range, both_busy=True, chunk_marks=True)
    a2.sharex(a1)
    a1.set_title(f"serial (shaded above): every node after the one before · Cube‖Vec "
                 f"{o_s.concurrent_us / ser.cores_used:.1f} µs a core",
                 fontsize=9, loc="left", pad=14)
    a2.set_title(f"pipelined, same time window: Cube‖Vec {o_p.concurrent_us / pip.cores_used:.1f} µs a core over the "
                 f"run ({o_p.concurrent_fraction:.0%} of it); hand-offs in flight with both units idle "
                 f"{o_p.exposed_sync_us / pip.cores_used:.1f} µs a core", fontsize=9, loc="left", pad=14)
    a2.set_xlabel("time (µs)")
    s = r.settings
    fig.suptitle(f"{r.version} on {r.profile.name} · {ser.chunks} chunks of {s.chunk_size} · {s.dtype}: "
                 f"serial vs pipelined", fontsize=10.5, x=0.01, ha="left")
    fig.legend(handles=legend_handles(pip, both_busy=True), loc="lower center", ncol=7, fontsize=8.5,
               frameon=False)
    fig.tight_layout(rect=(0, 0.035, 1, 1))
    return fig



def _bound_name(by: str) -> str:
    return ROW_NAME.get(by, by)


def save_plot(path: str | Path, results: Sequence, serial: bool = False, *, design_axis: bool | None = None,
              labels: Sequence[str] | None = None) -> Path:
    """What `python -m kda.run --plot out.png` calls, for every design. On the designs' time axis (with
    `design_axis`; by default when one of them has several passes): each design's passes, launches and
    barriers over occupancy heat maps of every core (plot_occupancy.py; `labels` name them). Otherwise the
    Gantt chart of the one pass's chunks: one result's, or the versions stacked on a shared time axis."""
    results = list(results)
    if design_axis is None:
        design_axis = any(len(r.design.passes) > 1 for r in results)
    if design_axis:
        from kda.views.plot_occupancy import figure_designs
        return save(figure_designs(results, serial=serial, labels=labels), path)
    fig = figure_result(results[0], serial) if len(results) == 1 else figure_versions(results, serial)
    return save(fig, path)
