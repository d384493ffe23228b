"""A part of a trace built alone (npusim/output/trace_part.py): the same events, byte for byte, as the whole
trace built and then cut, for a time window and for the first whole work items under a size limit; in the
latter every arrow keeps both ends."""
import json

import pytest

from npusim.output import chrome_trace, trace_file
from npusim.output.trace_part import Part, cut

from kda.settings import Settings
from kda.studies.evaluate import evaluate


def _dumps(trace: dict) -> str:
    return json.dumps(trace, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# one pass on two cores; two heads interleaved on each of two cores; FLA's six passes on the design's axis
CASES = {"v3": dict(chunks=6, heads=2), "v6": dict(chunks=6, heads=4, cores=2, interleave=2),
         "fla": dict(chunks=4, heads=2)}


@pytest.fixture(scope="module", params=sorted(CASES))
def design(request):
    r = evaluate(request.param, Settings(chunk_size=16, d_k=32, d_v=32, numerics=False, **CASES[request.param]))
    runs = [r.design_run, r.design_serial]
    kw = dict(labels=["pipelined", "serial"], heads=2, design_axis=request.param == "fla")
    return runs, kw, chrome_trace.build(runs, **kw)


def test_the_first_items_under_a_limit_are_the_whole_trace_cut_to_them(design):
    runs, kw, whole = design
    size = trace_file.estimate_bytes(whole)
    limit = size // 3                                          # a limit the whole trace passes
    items, per_item, fixed = chrome_trace.item_sizes(runs, heads=kw["heads"], design_axis=kw["design_axis"])
    part = trace_file.first_items(items, per_item, limit=limit, fixed=fixed)
    assert part is not None and part.whole_items and part.start == 0.0
    built = chrome_trace.build(runs, part=part, **kw)
    assert _dumps(built) == _dumps(cut(whole, part))
    assert chrome_trace.check(built) == []                     # every arrow in the part has both ends
    assert 0.5 * limit < len(_dumps(built)) < 1.5 * limit
    # the estimate of the whole from the items' sizes
    assert fixed + sum(per_item[v] for _, v in items) == pytest.approx(size, rel=0.2)
    assert trace_file.first_items(items, per_item, limit=2 * size, fixed=fixed) is None


def test_a_time_window_is_the_whole_trace_cut_to_it(design):
    runs, kw, whole = design
    starts = sorted(e["ts"] for e in whole["traceEvents"] if e["ph"] == "X")
    t = starts[len(starts) // 2]
    for start, end in ((0.0, t), (t / 2, t), (t, float("inf"))):
        built = chrome_trace.build(runs, part=Part(start, end), **kw)
        assert _dumps(built) == _dumps(trace_file.window(whole, start, end))


def test_the_first_items_stop_before_the_item_that_passes_the_limit():
    # items of two runs at 0, 1, 2, 3 us (runs 0, 0, 1, 0) weighing 10 and 30 bytes: 10 + 10 + 30 = 50 > 45,
    # so the part ends at the second item's start; 10 + 10 + 30 + 10 = 60 fits a limit of 60, unless 5 bytes
    # of names come first
    items, per_item = [(0.0, 0), (1.0, 0), (2.0, 1), (3.0, 0)], [10.0, 30.0]
    assert trace_file.first_items(items, per_item, limit=45) == Part(0.0, 1.0, whole_items=True)
    assert trace_file.first_items(items, per_item, limit=5) == Part(0.0, 0.0, whole_items=True)
    assert trace_file.first_items(items, per_item, limit=60) is None
    assert trace_file.first_items(items, per_item, limit=60, fixed=5) == Part(0.0, 2.0, whole_items=True)
