"""The overlap metrics of a sweep's profile points from the compiled event model: each pipelined run's
timeline (npusim/model/whatif/runs.py) holds the times the event model's trace holds, in its order, so the
interval-merging metrics and the critical path come out the same, bit for bit, on profiles that reorder the
replay; a default sweep (every column) is served without the event model and writes the same table as each
point evaluated on its own; a replay the compiled model cannot serve goes to the event model, said once."""
from dataclasses import replace

import pytest

from npusim.model.multipass import simulate_design, templates
from npusim.model.whatif.runs import CompiledRuns, NotServed
from npusim.output.overlap import analyse

import kda.studies.timing as timing_module
from kda.settings import Settings
from kda.settings.profile import checked_profile
from kda.studies.evaluate import evaluate, retime
from kda.studies.timing import chunk_counts
from kda.sweep import parse_spec, run_sweep

# 9 sequences of three lengths on 910B2's 24 cores, the trace kept: HBM and L2 contended once their rates drop
SHAPE = dict(numerics=False, keep_trace=True, heads=3, seqlens=(200, 64, 129), profile="ascend-910b2",
             gates="kimi")
PROFILES = ({}, {"memory.chip_bandwidth_gbps": 40.0}, {"memory.l2_bandwidth_gbps": 30.0}, {"sync.latency_us": 3.0},
            {"chip.ai_cores": 2})
COLUMNS = ("node", "core", "seq", "chunk", "start", "busy_end", "end", "nbytes")


def _order(recorded, settings) -> list:
    """The order in which the event model starts the pipelined run's nodes (its recorded decisions)."""
    profile = checked_profile(settings)
    tpls = templates(recorded.design, recorded.execution.pass_graphs, profile, settings.state_handoff)
    run = simulate_design(recorded.design, tpls, profile, chunk_counts(settings), interleave=settings.interleave,
                          trace=False, record=True)
    return list(run.passes[0].run.log.starts[1::3])


@pytest.mark.parametrize("version", ["v3", "v6"])
@pytest.mark.parametrize("interleave", [1, 2])
def test_the_timeline_holds_the_traces_times_and_gives_the_same_overlap(version, interleave):
    base = Settings(interleave=interleave, **SHAPE)
    recorded = evaluate(version, base, timing=False)
    runs = CompiledRuns(recorded.design, chunk_counts(base), interleave=interleave)
    nominal = _order(recorded, base)
    changed = 0
    for overrides in PROFILES:
        s = replace(base, overrides=overrides)
        exact = retime(replace(recorded, settings=s), checked_profile(s))
        fast = retime(replace(recorded, settings=s), checked_profile(s), runs=runs)
        trace, timeline = exact.pipelined.trace, fast.pipelined.timeline
        assert fast.pipelined.trace is None and timeline is not None
        for name in COLUMNS:                       # every node, in the trace's order, to the last bit
            assert getattr(timeline, name) == getattr(trace, name), name
        assert [type(t) for t in timeline.start] == [type(t) for t in trace.start]    # SimPy's clock starts at 0
        assert analyse(fast.pipelined).to_dict(steps=True) == analyse(exact.pipelined).to_dict(steps=True)
        assert fast.to_json() == exact.to_json()
        o = analyse(fast.pipelined)
        assert 0 <= o.concurrent_us <= min(o.cube_busy_us, o.vec_busy_us) and o.span_us > 0
        assert o.critical.length_us == pytest.approx(fast.pipelined.makespan_us, rel=1e-12)
        changed += _order(recorded, s) != nominal
    assert changed >= len(PROFILES) - 2            # contention, a longer sync and fewer cores reorder the replay
    assert runs.notes == []


# no metrics: every column, the overlap metrics among them; v3 and v6 one pass each, fla several (no overlap)
DEFAULT = ('numerics = false\n[axes]\nversion = ["v3", "v6", "fla"]\n"sync.latency_us" = [0.3, 2.0]\n'
           '"memory.chip_bandwidth_gbps" = [1600.0, 60.0]\n'
           '[fixed]\nprofile = "ascend-910b2"\nheads = 2\nseqlens = [300, 64, 129]\ngates = "kimi"\n')


def _replays(monkeypatch) -> list:
    """Every replay on the event model made while timing (timing.simulate_design), pipelined or serial."""
    calls, real = [], timing_module.simulate_design

    def counted(*args, **kwargs):
        calls.append(kwargs.get("serial", False))
        return real(*args, **kwargs)
    monkeypatch.setattr(timing_module, "simulate_design", counted)
    return calls


def test_a_default_sweep_writes_the_same_table_without_the_event_model(tmp_path, capsys, monkeypatch):
    from kda.sweep.__main__ import main
    spec = tmp_path / "default.toml"
    spec.write_text(DEFAULT)
    replays = _replays(monkeypatch)
    out = {}
    for way in ("batched", "per-point"):
        csv = tmp_path / f"{way}.csv"
        extra = ["--per-point"] if way == "per-point" else []
        before = len(replays)
        assert main([str(spec), "--workers", "0", "--no-cache", "--quiet", "-o", str(csv), *extra]) == 0
        out[way] = csv.read_bytes(), capsys.readouterr().err, len(replays) - before
    assert out["batched"][0] == out["per-point"][0]
    assert "note: " not in out["batched"][1] and "note: " not in out["per-point"][1]
    assert out["batched"][2] == 0 and out["per-point"][2] == 2 * 12     # each point pipelined and serial
    rows = run_sweep(parse_spec({"numerics": False, "axes": {"version": ["v3"], "sync.latency_us": [0.3, 2.0]},
                                 "fixed": {"profile": "ascend-910b2", "heads": 2, "tokens": 256}}), cache=None).rows
    assert all(r["pipeline.overlap.span_us"] > 0 for r in rows)
    # a longer sync on each hand-off: more of the pipelined run is a hand-off in flight with both units idle
    assert rows[1]["pipeline.overlap.exposed_sync_us"] > rows[0]["pipeline.overlap.exposed_sync_us"]


def test_a_timeline_the_compiled_model_cannot_give_is_replayed_and_said_once(tmp_path, monkeypatch):
    real = CompiledRuns.design_run

    def refusing(self, tpls, profile, *, serial=False, timeline=False):
        if timeline and not serial:
            raise NotServed("a layout the event model refuses")
        return real(self, tpls, profile, serial=serial, timeline=timeline)
    monkeypatch.setattr(CompiledRuns, "design_run", refusing)
    spec = {"numerics": False, "axes": {"version": ["v3", "fla"], "sync.latency_us": [0.3, 1.0, 2.0]},
            "fixed": {"profile": "ascend-910b2", "heads": 2, "tokens": 256, "gates": "kimi"}}
    batched = run_sweep(parse_spec(spec), cache=tmp_path / "batched.jsonl")
    alone = run_sweep(parse_spec(spec), cache=tmp_path / "alone.jsonl", batch=False)
    assert batched.rows == alone.rows
    assert (tmp_path / "batched.jsonl").read_bytes() == (tmp_path / "alone.jsonl").read_bytes()
    assert len(batched.notes) == 1 and "cannot serve" in batched.notes[0] and "refuses" in batched.notes[0]
    assert alone.notes == []
