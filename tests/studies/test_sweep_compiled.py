"""A sweep's points that differ only in profile fields are timed by the compiled event model
(npusim/model/whatif/runs.py, timing.time_result with `runs`). Held to the event model's own replay (SimPy):
every pass's makespan, each unit's busy time, the chip-wide bandwidths' use, pipelined and serial, bit for bit,
on profiles whose contention, sync latency or cores change the order in which the replay starts its nodes; and
a sweep's batched rows against each point evaluated on its own, byte for byte (the overlap metrics:
test_sweep_overlap.py)."""
from dataclasses import replace

import pytest

from npusim.model.multipass import simulate_design, templates
from npusim.model.whatif.runs import CompiledRuns

from kda.settings import Settings
from kda.settings.profile import checked_profile
from kda.studies.evaluate import evaluate, retime
from kda.studies.timing import chunk_counts
from kda.sweep import parse_spec, run_sweep

# 9 sequences of three lengths on 910B2's 24 cores: HBM and L2 contended once their rates drop
SHAPE = dict(numerics=False, keep_trace=False, heads=3, seqlens=(200, 64, 129), profile="ascend-910b2",
             gates="kimi")
PROFILES = ({}, {"memory.chip_bandwidth_gbps": 40.0}, {"memory.l2_bandwidth_gbps": 30.0}, {"sync.latency_us": 3.0},
            {"chip.ai_cores": 2})


def _same_runs(fast, exact) -> None:
    assert len(fast.passes) == len(exact.passes)
    for a, b in zip(fast.passes, exact.passes):
        assert (a.start_us, a.boundary_us) == (b.start_us, b.boundary_us)
        x, y = a.run, b.run
        assert x.makespan_us == y.makespan_us
        assert list(x.busy_us.items()) == list(y.busy_us.items())          # every (core, unit), in its order
        assert list(x.shared_us.items()) == list(y.shared_us.items())
        assert (x.cores_used, x.chunks, x.sequences, x.chunk_counts, x.interleave, x.serial) == \
            (y.cores_used, y.chunks, y.sequences, y.chunk_counts, y.interleave, y.serial)
        assert x.trace is None and x.log is None


def _orders(recorded, settings) -> list:
    """The order in which the event model starts its nodes, pass by pass (its recorded decisions)."""
    profile = checked_profile(settings)
    tpls = templates(recorded.design, recorded.execution.pass_graphs, profile, settings.state_handoff)
    run = simulate_design(recorded.design, tpls, profile, chunk_counts(settings), interleave=settings.interleave,
                          trace=False, record=True)
    return [list(p.run.log.starts[1::3]) for p in run.passes]


@pytest.mark.parametrize("version", ["v3", "v6", "fla"])
@pytest.mark.parametrize("interleave", [1, 2])
def test_the_compiled_runs_are_the_event_models_on_every_profile(version, interleave):
    base = Settings(interleave=interleave, **SHAPE)
    recorded = evaluate(version, base, timing=False)
    assert recorded.design_run is None and recorded.design_report is None     # graphs only
    runs = CompiledRuns(recorded.design, chunk_counts(base), interleave=interleave)
    nominal = _orders(recorded, base)
    changed = 0
    for overrides in PROFILES:
        s = replace(base, overrides=overrides)
        exact = retime(replace(recorded, settings=s), checked_profile(s))
        fast = retime(replace(recorded, settings=s), checked_profile(s), runs=runs)
        _same_runs(fast.design_run, exact.design_run)
        _same_runs(fast.design_serial, exact.design_serial)
        assert fast.design_report == exact.design_report
        assert [p.detail for p in fast.design_report.passes] == [p.detail for p in exact.design_report.passes]
        assert fast.to_json() == exact.to_json()
        changed += _orders(recorded, s) != nominal
    # contention, a longer sync and fewer cores each reorder the replay (fla's sync latency does not)
    assert changed >= len(PROFILES) - 2
    assert runs.notes == []


# timing only on 910B2, 2 heads x 3 lengths: the whole row (layer, per-chunk pipeline, memory plans)
GRID = {"numerics": False, "metrics": ["layer", "pipeline", "memory", "workspace_kib", "programs"],
        "axes": {"version": ["v3", "v6", "fla"], "memory.chip_bandwidth_gbps": [1600.0, 60.0],
                 "sync.latency_us": [0.3, 2.0]},
        "fixed": {"profile": "ascend-910b2", "heads": 2, "seqlens": [300, 64, 129], "gates": "kimi"}}


def _both(spec: dict, tmp_path) -> tuple:
    batched = run_sweep(parse_spec(spec), cache=tmp_path / "batched.jsonl")
    alone = run_sweep(parse_spec(spec), cache=tmp_path / "alone.jsonl", batch=False)
    assert batched.rows == alone.rows and [list(r) for r in batched.rows] == [list(r) for r in alone.rows]
    assert (tmp_path / "batched.jsonl").read_bytes() == (tmp_path / "alone.jsonl").read_bytes()
    assert alone.notes == []
    return batched, alone


def test_a_grid_over_bandwidth_and_sync_latency_gives_each_points_own_row(tmp_path):
    batched, _ = _both(GRID, tmp_path)
    rows = batched.rows
    assert len(rows) == 12 and all(r["status"] == "ok" for r in rows) and batched.notes == []
    assert all(r["pipeline.overlap"] is None for r in rows if r["version"] != "fla")     # no trace kept
    again = run_sweep(parse_spec(GRID), cache=None)                                      # same inputs, same rows
    assert again.rows == rows
    # HBM at 60 GB/s: the same bytes move, each over the chip-wide rate: v3's HBM busy time (its utilisation
    # times the makespan) scales by 1600 / 60
    v3 = {(r["memory.chip_bandwidth_gbps"], r["sync.latency_us"]): r for r in rows if r["version"] == "v3"}

    def hbm_us(r):
        span = r["pipeline.latency_us.pipelined"] - r["pipeline.latency_us.launch"]
        return r["pipeline.shared_bandwidth_utilization.hbm"] * span
    assert hbm_us(v3[60.0, 0.3]) == pytest.approx(hbm_us(v3[1600.0, 0.3]) * 1600 / 60, rel=1e-9)
