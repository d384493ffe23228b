"""benchmarks/designs.py times its nominal runs, its uncalibrated replays and its mechanisms switched off by the
compiled event model (npusim/model/whatif/), the graphs recorded once per design. Each quantity it reads must
equal what the event model itself gives (kda.studies.evaluate without `compiled`, replayed with SimPy): the
design report (latency, serial latency, bound, every pass's makespan, bytes), the busy time by unit, the layer
latency with each mechanism off, and a sampled profile's latency. Small shapes, every design."""
from __future__ import annotations


import pytest

from npusim import load_profile

from kda.programs import DESIGNS
from kda.settings import Settings
from kda.studies.evaluate import evaluate, retime
from kda.studies.run_json import plans_of

SHAPES = (dict(heads=3, tokens=320), dict(heads=2, seqlens=(200, 64, 129)))   # the second: graphs reused


@pytest.fixture(scope="module")
def runs(bench):
    """(shape index, design, interleave) -> (the benchmark's compiled result, the event model's own)."""
    designs, _ = bench
    out = {}
    for i, shape in enumerate(SHAPES):
        recs = designs.record(shape)
        for (v, il), fast in recs.items():
            exact = evaluate(v, Settings(numerics=False, keep_trace=False, interleave=il, gates="kimi", **shape))
            out[i, v, il] = fast, exact
    return out


def test_the_nominal_report_is_the_event_models(runs):
    for (i, v, il), (fast, exact) in runs.items():
        assert fast.design_run is None and exact.design_run is not None     # the fast one replayed nothing
        assert fast.design_report == exact.design_report, (i, v, il)        # every figure but the per-chunk detail
        assert fast.design_report.serial_us == exact.design_report.serial_us
        assert why(fast) == why(exact)


def why(r):
    from kda.studies.probe import probe_results, why_unsafe
    probe_results([r])
    return why_unsafe(r)


def test_the_uncalibrated_replay_is_the_event_models(bench, runs):
    designs, _ = bench
    unc = load_profile(designs.UNCAL)
    for v in DESIGNS:
        fast, exact = runs[0, v, 2]
        got = designs.on({v: fast}, unc)[v].design_report
        assert got == retime(exact, unc).design_report, v


def test_mechanisms_switched_off_and_busy_times_are_the_event_models(bench, runs):
    designs, why_ = bench
    cal, unc = load_profile(designs.CAL), load_profile(designs.UNCAL)
    il2 = {v: runs[1, v, 2][0] for v in DESIGNS}
    got = why_.ablation_ms(il2, cal, unc)
    for label, _, changes in why_.ABLATIONS:
        prof = cal.replace(**changes) if changes else cal
        for v in DESIGNS:
            replayed = retime(runs[1, v, 2][1], prof)
            assert got[label][v] == replayed.design_report.latency_us / 1e3, (label, v)
            busy = {}
            for _, plan in plans_of(replayed):          # the replay's templates' plans
                busy[plan.unit] = busy.get(plan.unit, 0.0) + plan.busy_us
            assert dict(why_._busy(il2[v], prof)) == busy, (label, v)
    for v in DESIGNS:
        assert got[why_.UNCALIBRATED][v] == retime(runs[1, v, 2][1], unc).design_report.latency_us / 1e3


def test_sampled_latencies_are_the_event_models(runs):
    from npusim.fit.uncertainty import sample_profiles, sample_values

    from kda.studies.uncertainty import design_fields, propagate
    results = [runs[0, v, 2][0] for v in ("v6", "fla")]
    u = propagate(results, 2, seed=3, latency_only=True)
    fields = design_fields(results[0].profile)
    profiles = sample_profiles(results[0].profile, fields, sample_values(fields, 2, 3))
    for v in ("v6", "fla"):
        exact = runs[0, v, 2][1]
        assert list(u.latencies[v]["pipelined"]) == [retime(exact, p).design_report.latency_us for p in profiles]
        assert u.nominal[v]["pipelined"] == exact.design_report.latency_us
