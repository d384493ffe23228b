"""npusim/output/trace_file.py: the size estimate before writing, and the cut to a time window."""
import math

import pytest

from npusim.output import trace_file


def _trace(n: int) -> dict:
    events = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "core 0"}}]
    events += [{"name": f"D[c{i}]", "cat": "phase", "ph": "X", "pid": 1, "tid": 1 + i % 3, "ts": float(i),
                "dur": 0.5 + (i % 7) / 10, "args": {"chunk": i, "bytes_in": 1024 * (i % 5)}} for i in range(n)]
    return {"traceEvents": events, "displayTimeUnit": "ns", "metadata": {"generator": "test"}}


@pytest.mark.parametrize("n", [0, 3, 50_000])
def test_the_estimate_is_within_two_per_cent_of_the_file(tmp_path, n):
    trace = _trace(n)
    path = tmp_path / "t.json"
    trace_file.write(path, trace)
    assert trace_file.estimate_bytes(trace) == pytest.approx(path.stat().st_size, rel=0.02)


def test_the_window_keeps_overlapping_slices_and_all_metadata():
    # slices [i, i + dur) for i = 0..9; the window [3.2, 5] overlaps those starting at 3, 4 and 5 (3 lasts
    # 0.8 us, to 3.8 > 3.2); slice 2 ends at 2.7 < 3.2
    cut = trace_file.window(_trace(10), 3.2, 5.0)
    names = [e["name"] for e in cut["traceEvents"]]
    assert names == ["process_name", "D[c3]", "D[c4]", "D[c5]"]
    assert cut["metadata"]["window_us"] == [3.2, 5.0]
    assert len(_trace(10)["traceEvents"]) == 11          # the input is left alone


@pytest.mark.parametrize("text, expected", [("0:200", (0.0, 200.0)), ("500:", (500.0, math.inf)),
                                            (":7.5", (0.0, 7.5))])
def test_windows_parse(text, expected):
    assert trace_file.parse_window(text) == expected


@pytest.mark.parametrize("text", ["200", "a:b", "5:5", "9:3", "-1:4"])
def test_bad_windows_are_one_line(text):
    with pytest.raises(ValueError, match="--trace-window"):
        trace_file.parse_window(text)
