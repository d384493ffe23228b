"""A whole layer on a whole chip: timing-only replay, waves over cores, chip-level report."""
import json

import pytest

from kda.settings import Settings
from kda.studies.evaluate import evaluate
from kda.cli.run import main


def test_timing_only_replay_gives_the_full_runs_timeline():
    s = Settings(chunks=6, heads=3, batch=2, dtype="bf16")
    full = evaluate("v3", s)
    timing = evaluate("v3", Settings(**{**s.__dict__, "numerics": False}))
    assert timing.execution.graph == full.execution.graph
    assert timing.pipelined.trace.events() == full.pipelined.trace.events()
    assert timing.report.to_dict() == full.report.to_dict()
    assert timing.parity_o is None and timing.to_json()["parity"] is None and timing.passed


def test_heads_over_cores_in_waves():
    r = evaluate("v3", Settings(chunks=4, heads=32, numerics=False))
    rep = r.report
    assert (rep.ai_cores, rep.cores, rep.waves) == (24, 24, 2)
    # cores 0-7 run two heads, cores 8-23 one: the layer takes as long as a two-head core
    by_core = {}
    for e in r.pipelined.trace.events():
        by_core.setdefault(e.core, set()).add(e.seq)
    assert by_core[0] == {0, 24} and by_core[7] == {7, 31} and by_core[8] == {8}
    one = evaluate("v3", Settings(chunks=4, heads=24, numerics=False)).report
    assert rep.pipelined_us > one.pipelined_us
    fewer = evaluate("v3", Settings(chunks=4, heads=32, numerics=False, cores=8)).report
    assert (fewer.cores, fewer.waves) == (8, 4) and fewer.pipelined_us > rep.pipelined_us


def test_chip_report_roofline_and_throughput():
    r = evaluate("v3", Settings(chunks=8, heads=4, numerics=False))
    rep, d = r.report, r.to_json()
    macs = r.execution.graph.macs * 8 * 4
    assert rep.roofline_us == pytest.approx(macs / (24 * 4096 * 1.8e3))          # bf16 operands: 4096 MACs/cycle
    assert rep.roofline_us < rep.bound_us < rep.pipelined_us
    layer, pipe = d["layer"], d["pipeline"]
    assert layer["tokens_per_s"] == pytest.approx(8 * 64 / (rep.pipelined_us * 1e-6))
    assert layer["head_tokens_per_s"] == pytest.approx(4 * layer["tokens_per_s"])
    assert layer["roofline_us"] == pytest.approx(rep.roofline_us)
    assert set(pipe["shared_bandwidth_utilization"]) == {"hbm", "l2"}
    assert all(0 < u < 1 for u in pipe["chip_utilization"].values())


def test_cli_timing_only_and_cores(capsys):
    assert main(["--no-numerics", "--heads", "5", "--tokens", "1000", "--cores", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["numerics"] is False and d["parity"] is None and d["chunks"] == 16 and d["tokens"] == 1000
    assert (d["layer"]["cores_used"], d["pipeline"]["waves"]) == (2, 3)
    assert main(["--no-numerics", "--heads", "5", "--cores", "2"]) == 0
    out = capsys.readouterr().out
    assert "Numerics off" in out and "On the chip: 5 sequences over 2 of 2 AI cores in 3 wave(s)" in out
    assert main(["--cores", "0"]) == 2
    assert "--cores must be >= 1, got 0" in capsys.readouterr().err
