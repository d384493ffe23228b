"""Gantt charts: the bars drawn are the trace's phases and hand-offs, files come out in each format, long
runs are windowed, and the CLI's --plot writes one figure (all versions stacked with --version all)."""
from collections import Counter

import matplotlib.pyplot as plt
import pytest
from matplotlib.text import Annotation

from kda.views import plots
from kda.settings import Settings
from kda.studies.evaluate import evaluate
from kda.cli.run import main
from npusim import simulate

SMALL = dict(chunk_size=16, d_k=32, d_v=32)


@pytest.fixture(scope="module")
def v3():
    return evaluate("v3", Settings(chunks=4, profile="ascend-910b2", **SMALL))


def bars(fig, kind):
    """Bars per gid prefix kind ('phase', 'transfer', ...) drawn in the figure, by row."""
    out = Counter()
    for ax in fig.axes:
        for coll in ax.collections:
            gid = coll.get_gid() or ""
            if gid.startswith(kind + ":"):
                out[gid] += len(coll.get_paths())
    return out


def test_gantt_draws_one_bar_per_phase_and_hand_off_on_each_row(v3):
    fig, ax = plt.subplots(figsize=(12, 3))
    counts = plots.draw_gantt(ax, v3.pipelined)
    g, n = v3.execution.graph, 4
    cube = sum(p.unit == "cube" for p in g.phases) * n
    vec = sum(p.unit == "vec" for p in g.phases) * n
    phase_bars = bars(fig, "phase")
    assert phase_bars == {"phase:0:cube:0": cube, "phase:0:vec:0": vec, "phase:0:vec:1": vec}
    to_cube = sum(s.direction == "vec->cube" for s in g.syncs) * n
    to_vec = sum(s.direction == "cube->vec" for s in g.syncs) * n
    assert bars(fig, "transfer") == {"transfer:0:link:vec->cube:0": to_cube, "transfer:0:link:cube->vec:0": to_vec}
    assert counts[(0, "cube", 0)] == cube and counts[(0, "vec", 1)] == vec
    # an arrow per hand-off, and per state hand-off into the next chunk
    arrows = [t for t in ax.texts if isinstance(t, Annotation)]
    assert len(arrows) == len(g.syncs) * n + (n - 1)
    labels = {t.get_text() for t in ax.texts}
    assert {"D1", "D2"} <= labels                        # letters and chunk numbers
    plt.close(fig)


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml"), (".pdf", b"%PDF")])
def test_files_by_extension(v3, tmp_path, suffix, magic):
    path = plots.save_plot(tmp_path / f"g{suffix}", [v3])
    assert path.read_bytes().startswith(magic)


def test_png_is_deterministic(v3, tmp_path):
    a = plots.save(plots.figure_result(v3), tmp_path / "a.png").read_bytes()
    b = plots.save(plots.figure_result(v3), tmp_path / "b.png").read_bytes()
    assert a == b


def test_title_has_version_profile_chunks_and_headline_numbers(v3):
    fig = plots.figure_result(v3)
    title = fig._suptitle.get_text()
    rep = v3.report
    assert "v3 on ascend-910b2" in title and "4 chunks" in title
    assert f"latency {rep.pipelined_us:.1f} µs" in title and f"efficiency {rep.efficiency:.2f}" in title
    plt.close(fig)


def test_long_runs_get_an_overview_and_a_window(v3):
    run = simulate(v3.pipelined.template, v3.profile, chunks=200)
    fig = plots.figure_run(run)
    overview, zoom = fig.axes[0], fig.axes[1]
    assert any((c.get_gid() or "").startswith("util:") for c in overview.collections)
    lo, hi = zoom.get_xlim()
    assert 0 < lo < hi < run.makespan_us
    shown = {t.get_text() for t in zoom.texts}
    assert any(t.endswith("100") for t in shown)          # chunk numbers from the middle of the run
    plt.close(fig)


def test_serial_vs_pipelined_marks_the_overlap(v3, tmp_path):
    fig = plots.figure_serial_vs_pipelined(v3)
    both = bars(fig, "both")
    assert sum(both.values()) > 0                         # Cube and Vector do work at once when pipelined
    plots.save(fig, tmp_path / "svp.png")


def test_versions_stack_on_one_time_axis(tmp_path):
    rs = [evaluate(v, Settings(chunks=3, profile="seed-doc", **SMALL)) for v in ("v1", "v3")]
    fig = plots.figure_versions(rs)
    axes = [ax for ax in fig.axes if ax.get_title(loc="left")]
    assert len(axes) == 2 and axes[0].get_xlim() == axes[1].get_xlim()
    assert axes[0].get_xlim()[1] == pytest.approx(max(r.pipelined.makespan_us for r in rs))
    plt.close(fig)


def test_cli_plot(tmp_path, capsys):
    small = ["--chunks", "3", "--chunk-size", "16", "--dk", "32", "--dv", "32"]
    assert main([*small, "--plot", str(tmp_path / "one.png")]) == 0
    assert main([*small, "--version", "all", "--profile", "seed-doc", "--resident-kib", "256",
                 "--plot", str(tmp_path / "all.svg")]) == 0
    assert (tmp_path / "one.png").stat().st_size > 0 and (tmp_path / "all.svg").stat().st_size > 0
    capsys.readouterr()
    assert main([*small, "--plot", str(tmp_path / "x.gif")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ".png, .svg, .pdf" in err[0]


def test_long_versions_get_overviews_and_equal_windows(v3):
    from dataclasses import replace
    from kda.studies.evaluate import retime
    rs = []
    for r in (v3, evaluate("v2", Settings(chunks=1, profile="ascend-910b2", **SMALL))):
        rs.append(retime(replace(r, settings=replace(r.settings, chunks=60)), r.profile))
    fig = plots.figure_versions(rs)
    left = [ax for ax in fig.axes if ax.get_title(loc="left").startswith(("v2:", "v3:"))]
    right = [ax for ax in fig.axes if ax.get_title(loc="left").startswith("steady state")]
    assert len(left) == len(right) == 2
    assert all(any((c.get_gid() or "").startswith("util:") for c in ax.collections) for ax in left)
    widths = [ax.get_xlim()[1] - ax.get_xlim()[0] for ax in right]
    assert widths[0] == pytest.approx(widths[1])           # the same length of time for both versions
    plt.close(fig)
