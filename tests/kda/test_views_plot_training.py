"""Training as figures: the schedule strip holds the forward design then its backward design on one time axis,
one zoom per pass that walks the chunks (the backward's reverse pass said so), and the ranking puts the
fastest forward + backward first."""
from types import SimpleNamespace

import pytest

from kda.settings import Settings
from kda.studies.backward_eval import evaluate_backward
from kda.studies.evaluate import evaluate
from kda.views.figure import save
from kda.views.plot_training import figure_ranking, figure_training, sequential_passes

# the backward needs chunks of 32 or more (two 16-wide sub-chunks); 4 chunks of 32 = 128 tokens
SMALL = dict(chunks=4, chunk_size=32, d_k=32, d_v=32, profile="ascend-910b2", keep_trace=True, numerics=False)


@pytest.fixture(scope="module")
def runs():
    s = Settings(**SMALL)
    return evaluate("v4", s), evaluate_backward("v4", s), evaluate_backward("v4", s, "store")


def test_the_strip_is_the_forward_then_the_backward(runs):
    fwd, bwd, _ = runs
    fig = figure_training(fwd, bwd, width=8)
    strip = fig.axes[0]
    end = (fwd.design_run.latency_us + bwd.design_run.latency_us) / 1e3
    assert strip.get_xlim() == pytest.approx((0, end))
    title = strip.get_title(loc="left")
    assert title.startswith("v4: forward ") and "backward (recompute)" in title
    assert title.count(f"= {end:,.3f} ms on ascend-910b2") == 1


def test_one_zoom_per_pass_that_walks_the_chunks(runs):
    fwd, bwd, _ = runs
    zooms = sequential_passes(fwd.design_run) + sequential_passes(bwd.design_run)
    fig = figure_training(fwd, bwd, width=8)
    titles = [ax.get_title(loc="left") for ax in fig.axes[1:]]
    assert len(titles) == len(zooms) >= 2
    assert titles[0].startswith("forward pass v4 (in order")
    reverse = [t for t in titles if t.startswith("backward") and "from the last chunk to the first" in t]
    assert len(reverse) == sum(p.pass_.reverse for p in zooms) >= 1
    assert all(ax.get_xlabel() == "time (µs) from the pass's start" for ax in fig.axes[1:])


def test_a_run_without_its_design_run_is_refused():
    with pytest.raises(ValueError, match="keep_trace=True"):
        figure_training(SimpleNamespace(design_run=None), SimpleNamespace(design_run=None))


def test_the_ranking_puts_the_fastest_training_first(runs, tmp_path):
    _, recompute, store = runs
    fig = figure_ranking([recompute, store])
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    fast, slow = sorted((recompute, store), key=lambda r: r.forward_report.latency_us + r.report.latency_us)
    assert labels == [f"v4 ({fast.states})", f"v4 ({slow.states})"]
    assert ax.get_xlabel() == "ms on ascend-910b2, 1 heads × 128 tokens, bf16"
    assert save(fig, tmp_path / "ranking.svg").read_text(encoding="utf-8").lstrip().startswith("<?xml")


def test_a_ranking_without_forward_timing_is_refused():
    with pytest.raises(ValueError, match="forward=True"):
        figure_ranking([SimpleNamespace(training_us=None)])
