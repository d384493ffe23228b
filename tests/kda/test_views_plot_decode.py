"""A decode step's timeline: the Chrome trace has one process per core and one named thread per pipe, each
worker's items numbered from 0 as its docstring says, and the Gantt chart is written as a figure file."""
import json

import pytest

from kda.decode.study import DecodeSettings, evaluate
from kda.views.plot_decode import NAMES, save_gantt, trace_dict, write_trace

S = DecodeSettings(designs=("step",), batches=(2,), heads=2, tokens=(1,), d_k=32, d_v=32, numerics=False, prefill=0)


@pytest.fixture(scope="module")
def step():
    return evaluate(S)[0]


def test_the_trace_has_a_named_thread_per_pipe_and_a_process_per_core(step):
    trace = trace_dict(step)
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    threads = {e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert threads <= set(NAMES.values()) and {"MTE2 (loads)", "MTE3 (stores)"} <= threads
    assert {e["args"]["name"] for e in meta if e["name"] == "process_name"} == \
        {f"core {e['pid'] - 1}" for e in trace["traceEvents"] if e["ph"] == "X"}
    assert trace["metadata"]["generator"] == "kda.decode" and trace["metadata"]["design"] == "step"
    assert trace["metadata"]["shape"] == "B=2 T=1 H=2 K=32 V=32"


def test_each_workers_items_are_numbered_from_zero_and_events_come_in_time_order(step):
    events = [e for e in trace_dict(step)["traceEvents"] if e["ph"] == "X"]
    assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)
    assert all(e["dur"] >= 0 for e in events)
    items: dict[int, set] = {}
    for e in events:
        w, i = e["args"]["worker"], e["args"]["item"]
        assert e["name"].endswith(f" w{w} i{i}")
        items.setdefault(w, set()).add(i)
    # 2 sequences x 2 heads = 4 states, spread over the workers
    assert sum(len(v) for v in items.values()) == 4 == step.run.items
    assert all(v == set(range(len(v))) for v in items.values())


def test_the_trace_file_is_json(step, tmp_path):
    path = tmp_path / "decode.json"
    write_trace(path, step)
    assert json.loads(path.read_text(encoding="utf-8"))["metadata"]["generator"] == "kda.decode"


def test_the_gantt_is_a_png_and_other_extensions_are_refused(step, tmp_path):
    save_gantt(tmp_path / "decode.png", step, cores=2)
    assert (tmp_path / "decode.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match=r"--plot .*decode\.txt: the file must end in \.png, \.svg, \.pdf"):
        save_gantt(tmp_path / "decode.txt", step)
