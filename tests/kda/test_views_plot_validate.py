"""Predicted against measured: log-log axes spanning every point with a margin of 1.5x, one marker per stage
(a star for a whole kernel), hollow markers for held-out rows, the 90 % bar only where sampled, and the
legend saying so."""
import math

import pytest

from kda.studies.validate import Row
from kda.views.figure import save
from kda.views.plot_validate import figure_validation


def row(name, impl, stage, measured, predicted, held_out=False, p05=math.nan, p95=math.nan):
    return Row(id=name, implementation=impl, kernel="chunk_kda", shape="B1 T64", dtype="bf16",
               measured_us=measured, held_out=held_out, stage=stage, predicted_us=predicted, p05=p05, p95=p95)


ROWS = [row("a", "pto", "kkt", 100.0, 200.0),
        row("b", "triton", "", 1000.0, 500.0, held_out=True),
        row("c", "pto", "kkt", 3000.0, math.nan)]          # not predicted: not drawn, but its measured time counts


def _points(ax):
    return [ln for ln in ax.lines if len(ln.get_xdata()) == 1]


def test_the_axes_are_log_log_and_span_every_time_with_a_margin():
    fig = figure_validation(ROWS)
    ax = fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlabel() == "measured (ms)" and ax.get_ylabel() == "predicted, shipped profile (ms)"
    # times in ms: 0.1, 0.2, 1.0, 0.5, 3.0 -> from 0.1 / 1.5 to 3.0 x 1.5
    assert ax.get_xlim() == pytest.approx((0.1 / 1.5, 4.5))
    assert ax.get_ylim() == pytest.approx((0.1 / 1.5, 4.5))
    assert ax.get_title() == "predicted against measured (hollow: held out)"


def test_one_marker_per_predicted_row_hollow_when_held_out():
    ax = figure_validation(ROWS, title="three rows").axes[0]
    points = {(float(ln.get_xdata()[0]), float(ln.get_ydata()[0])): ln for ln in _points(ax)}
    assert set(points) == {(0.1, 0.2), (1.0, 0.5)}
    kkt, whole = points[(0.1, 0.2)], points[(1.0, 0.5)]
    assert kkt.get_marker() == "s" and whole.get_marker() == "*"
    assert whole.get_markerfacecolor() == "none" and kkt.get_markerfacecolor() != "none"
    assert ax.get_title() == "three rows"


def test_the_diagonal_and_the_2x_lines_are_drawn():
    ax = figure_validation(ROWS).axes[0]
    lines = [ln for ln in ax.lines if len(ln.get_xdata()) == 2 and ln.get_color() == "black"]
    slopes = sorted(float(ln.get_ydata()[0] / ln.get_xdata()[0]) for ln in lines)
    assert slopes == pytest.approx([0.5, 1.0, 2.0])


def test_the_legend_names_implementations_stages_and_the_interval_only_when_sampled():
    labels = [t.get_text() for t in figure_validation(ROWS).axes[0].get_legend().get_texts()]
    assert labels[:2] == ["pto", "triton"]
    assert {"kkt", "whole kernel", "held out"} <= set(labels)
    assert "90 % interval" not in labels
    sampled = [row("d", "pto", "kkt", 100.0, 200.0, p05=150.0, p95=260.0)]
    ax = figure_validation(sampled).axes[0]
    assert "90 % interval" in [t.get_text() for t in ax.get_legend().get_texts()]
    bars = [ln for ln in ax.lines if list(ln.get_xdata()) == [0.1, 0.1]]
    assert [list(b.get_ydata()) for b in bars] == [pytest.approx([0.15, 0.26])]


def test_the_figure_saves_as_png(tmp_path):
    path = save(figure_validation(ROWS), tmp_path / "validate.png", dpi=40)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
