"""kda.run's --trace and --op-summary writers: a small run's trace is written whole, a limit cuts it to its
first work items with a line saying so, a window past the limit warns, a .pftrace file is Perfetto's format;
the op summary has msprof's columns; a result untraced keeps its timing and drops its traces."""
import csv
import io
import json
from types import SimpleNamespace

import pytest

from kda.cli.trace_out import untraced, write_op_summary, write_trace
from kda.settings import Settings
from kda.studies.evaluate import evaluate

SMALL = dict(chunks=4, profile="ascend-910b2", chunk_size=16, d_k=32, d_v=32, keep_trace=True, numerics=False)


@pytest.fixture(scope="module")
def v3():
    return evaluate("v3", Settings(**SMALL))


def args(path, window=None, serial=False, op_summary=None):
    return SimpleNamespace(trace=path, trace_window=window, serial=serial, op_summary=op_summary)


def spans(path):
    return [e for e in json.loads(path.read_text(encoding="utf-8"))["traceEvents"] if e.get("ph") == "X"]


def test_a_small_trace_is_written_whole(v3, tmp_path, capsys):
    path = tmp_path / "t.json"
    write_trace(args(path), [v3], ["v3"], design_axis=False)
    err = capsys.readouterr().err
    assert f"wrote {path} (Chrome trace" in err and "would be about" not in err
    assert spans(path)


def test_a_limit_keeps_the_first_work_items_and_says_so(v3, tmp_path, capsys):
    whole, part = tmp_path / "whole.json", tmp_path / "part.json"
    write_trace(args(whole), [v3], ["v3"], design_axis=False)
    capsys.readouterr()
    write_trace(args(part), [v3], ["v3"], design_axis=False, limit=1)     # 1 byte: one item only
    err = capsys.readouterr().err
    assert "the whole trace would be about" in err and "--trace-window 0: all of it" in err
    assert 0 < len(spans(part)) < len(spans(whole))


def test_a_window_over_the_limit_warns_and_is_kept(v3, tmp_path, capsys):
    path = tmp_path / "w.json"
    write_trace(args(path, window="0:"), [v3], ["v3"], design_axis=False, limit=1)
    assert "as --trace-window asked" in capsys.readouterr().err
    whole = tmp_path / "whole.json"
    write_trace(args(whole), [v3], ["v3"], design_axis=False)
    assert len(spans(path)) == len(spans(whole))          # 0: to the end is all of it


def test_a_pftrace_file_is_perfettos_protobuf(v3, tmp_path, capsys):
    pytest.importorskip("perfetto")                          # the optional extra that writes it
    path = tmp_path / "t.pftrace"
    write_trace(args(path), [v3], ["v3"], design_axis=False)
    assert "Perfetto protobuf trace" in capsys.readouterr().err
    data = path.read_bytes()
    assert data and not data.lstrip().startswith(b"{")     # not JSON


def test_the_op_summary_has_msprofs_columns(v3, tmp_path, capsys):
    path = tmp_path / "op.csv"
    write_op_summary(args(None, op_summary=path), [v3], ["v3"])
    assert "msprof op summary columns" in capsys.readouterr().err
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    assert rows and {"Op Name", "OP Type", "Task Duration(us)", "Block Dim"} <= set(rows[0])
    assert {r["OP Type"] for r in rows} == {"v3"}


def test_untraced_drops_the_traces_and_keeps_the_timing(v3):
    r = untraced(v3)
    assert all(p.run.trace is None for p in r.design_run.passes)
    assert r.design_run.latency_us == v3.design_run.latency_us
    assert any(p.run.trace is not None for p in v3.design_run.passes)     # the original is untouched
