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


def test_pipe_rows_are_those_a_phase_moves_data_on():
    """On the calibrated chip a matmul drains L0C through the FixPipe inside its own cost, so no Cube phase has a
    store segment and the Cube FixPipe row is left out; the uncalibrated profile prices v6's F2 store of O on the
    FixPipe, so the row is drawn there, with bars. Every drawn pipe row has bars."""
    small = dict(heads=1, chunks=2, chunk_size=64, d_k=128, d_v=128)
    for profile, fixpipe in (("ascend-910b2", False), ("ascend-910b2-uncalibrated", True)):
        r = evaluate("v6", Settings(profile=profile, **small), timing=True)
        fig, ax = plt.subplots(figsize=(12, 4))
        plots.draw_gantt(ax, r.pipelined)
        rows = {t.get_text() for t in ax.get_yticklabels()}
        pipe_rows = {x for x in rows if x.endswith(("MTE2", "MTE3", "FixPipe"))}
        assert ("Cube FixPipe" in rows) == fixpipe and {"Cube MTE2", "Vec MTE2"} <= pipe_rows
        drawn = {gid.split(":")[3] for gid in bars(fig, "pipe")}
        assert drawn == pipe_rows
        plt.close(fig)


def test_chunk_ticks_step_evenly():
    """The ticks above the bars name every chunk, or every 2nd, 5th, 10th ...: never an irregular gap."""
    from kda.views.gantt import _strides
    assert _strides(1) == [1] and _strides(7) == [1, 2, 5, 10] and _strides(21)[-1] == 50
    r = evaluate("v3", Settings(chunks=40, profile="ascend-910b2", **SMALL), timing=True)
    for width in (6, 30):
        fig, ax = plt.subplots(figsize=(width, 3))
        plots.draw_gantt(ax, r.pipelined, chunk_marks=True, labels=False, arrows=False)
        top = ax.child_axes[0]
        chunks = [int(t.get_text()[1:]) for t in top.get_xticklabels()]
        steps = {b - a for a, b in zip(chunks, chunks[1:])}
        assert len(steps) == 1 and chunks[0] == 0, chunks
        plt.close(fig)


def test_interleaved_sequences_are_told_apart_in_the_labels():
    """Two heads alternated on one core: each phase label carries its sequence (A0·s0, A0·s1)."""
    r = evaluate("v3", Settings(chunks=2, heads=2, cores=1, interleave=2, profile="ascend-910b2", **SMALL), timing=True)
    fig, ax = plt.subplots(figsize=(40, 3))
    plots.draw_gantt(ax, r.pipelined, arrows=False)
    tags = [t.get_text() for t in ax.texts if "·s" in t.get_text()]
    assert {"A0·s0", "A0·s1"} <= set(tags)
    assert all(t.endswith(("·s0", "·s1")) for t in tags)
    plt.close(fig)


def test_the_overlap_in_titles_is_per_core():
    """Cube‖Vec is summed over cores by the analysis; the titles divide by the cores used and say so."""
    r = evaluate("v3", Settings(chunks=4, heads=4, profile="ascend-910b2", **SMALL), timing=True)
    title = plots.headline(r)
    run = r.pipelined
    from npusim.output.overlap import analyse
    ov = analyse(run)
    assert run.cores_used == 4 and f"({ov.concurrent_us / 4:.1f} µs a core)" in title
