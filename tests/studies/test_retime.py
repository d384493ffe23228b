"""Re-timing many profiles at once equals the event model, sample by sample.

Random designs, shapes and profiles (seeded): every sample's layer latency, serial latency and bound from
DesignTimer (re-timed, or replayed by the compiled event model) against the event model's own replay of that
sample (kda.studies.evaluate.retime), to relative 1e-9. The ways a sample is timed are also held apart:
every sample re-timing accepts, and every sample the compiled model replays, equals the replay."""
import random

import numpy as np
import pytest

from kda.settings import Settings
from kda.studies.evaluate import evaluate, retime
from kda.studies.uncertainty import _metrics, design_fields
from kda.studies.timing import timer
from npusim import load_profile, simulate
from npusim.chip.lanes import stack
from npusim.fit.uncertainty import sample_profiles, sample_values
from npusim.model.multipass import templates
from npusim.model.whatif.structure import Model
from npusim.model.whatif.retime import compile_schedule, node_params, retime as retime_schedule
from npusim.model.whatif import COMPILED, REPLAYED, RETIMED, stacked_templates

DESIGNS = ["v1", "v2", "v3", "v4", "v6", "fla", "v5", "mform"]
PROFILES = ["ascend-910b2", "ascend-910b2-uncalibrated"]


def _case(seed: int):
    rnd = random.Random(seed)
    design = rnd.choice(DESIGNS)
    heads = rnd.choice([1, 3, 24, 26, 32, 48])
    chunks = rnd.choice([1, 2, 5, 16, 40])
    interleave = rnd.choice([1, 2, 3])
    profile = rnd.choice(PROFILES)
    return design, Settings(heads=heads, tokens=64 * chunks - rnd.choice([0, 17]), interleave=interleave,
                            numerics=False, keep_trace=False, profile=profile, record=rnd.random() < 0.5)


def _close(a: float, b: float) -> bool:
    return a == b or (np.isfinite(a) and np.isfinite(b) and abs(a / b - 1) <= 1e-9)


@pytest.mark.parametrize("seed", range(10))
def test_every_sample_equals_the_event_model(seed):
    design, settings = _case(seed)
    r = evaluate(design, settings)
    fields = design_fields(r.profile)
    profiles = sample_profiles(r.profile, fields, sample_values(fields, 5, seed))
    got = timer(r, retime=seed % 2 == 1).time(profiles)
    assert got.ways.total > 0 and not got.errors
    for i, p in enumerate(profiles):
        want = _metrics(retime(r, p))
        for metric, arr in (("pipelined", got.latency_us), ("serial", got.serial_us), ("bound", got.bound_us)):
            assert _close(arr[i], want[metric]), (design, settings, i, metric, arr[i], want[metric])


@pytest.mark.parametrize("design, heads, interleave", [("v6", 32, 2), ("v3", 24, 1), ("fla", 5, 1)])
def test_both_fast_ways_equal_the_replay_on_their_own(design, heads, interleave):
    """Re-timing on the samples it accepts, the compiled model on every sample: each makespan the replay's."""
    s = Settings(heads=heads, tokens=64 * 12, interleave=interleave, numerics=False, keep_trace=False)
    r = evaluate(design, s)
    fields = design_fields(r.profile)
    profiles = sample_profiles(r.profile, fields, sample_values(fields, 8, 3))
    stacked = stack(profiles)
    tpls = templates(r.design, r.execution.pass_graphs, r.profile, s.state_handoff)
    many = templates(r.design, r.execution.pass_graphs, stacked, s.state_handoff)
    p, tpl, tpl_many = r.design.passes[-1], tpls[-1], many[-1]
    counts = [12] * heads
    kw = dict(chunks=1, sequences=12 * heads) if p.layout == "chunks" else dict(chunks=12, sequences=heads,
                                                                                interleave=interleave)
    for serial in (False, True):
        run = simulate(tpl, p.on(r.profile), serial=serial, trace=False, record=True, **kw)
        params = node_params(tpl_many, p.on(stacked), serial, len(profiles))
        fast = retime_schedule(compile_schedule(run), params)
        compiled = Model.of_run(run).replay(params, np.arange(len(profiles)))
        for i, prof in enumerate(profiles):
            one = templates(r.design, r.execution.pass_graphs, prof, s.state_handoff)[-1]
            want = simulate(one, p.on(prof), serial=serial, trace=False, **kw).makespan_us
            assert compiled[i] == want
            if fast.ok[i]:
                assert fast.makespan_us[i] == want
    assert counts


def test_recording_a_replay_changes_nothing_it_reports():
    r = evaluate("v3", Settings(heads=3, chunks=6, numerics=False, keep_trace=True))
    tpl = r.pipelined.template
    a = simulate(tpl, r.profile, chunks=6, sequences=3, trace=True)
    b = simulate(tpl, r.profile, chunks=6, sequences=3, trace=True, record=True)
    assert a.makespan_us == b.makespan_us and a.busy_us == b.busy_us and a.log is None
    simulated = sum(c == 0 for c in a.trace.core)           # the three cores run alike: core 0 is simulated
    assert len(b.log.starts) == 3 * simulated               # one (core, node, shares) triple per started node


def test_a_sample_that_changes_the_schedule_s_shape_is_replayed_and_said_once():
    r = evaluate("v3", Settings(heads=4, chunks=4, numerics=False, keep_trace=False))
    profiles = [r.profile.replace(workspace__slots=s) for s in (1, 2, 3)]
    got = timer(r).time(profiles)
    assert got.ways.counts[REPLAYED] > 0 and len([n for n in got.notes if "workspace.slots" in n]) == 1
    for i, p in enumerate(profiles):
        assert _close(got.latency_us[i], _metrics(retime(r, p))["pipelined"])


def test_stacked_durations_are_the_scalar_ones_bit_for_bit():
    """The uncalibrated profile's ranges move fla's tilings: the samples split into groups that branch alike."""
    r = evaluate("fla", Settings(heads=2, chunks=3, numerics=False, keep_trace=False,
                                 profile="ascend-910b2-uncalibrated"))
    fields = design_fields(r.profile)
    profiles = sample_profiles(r.profile, fields, sample_values(fields, 16, 7))
    groups = stacked_templates(r.design, r.execution.pass_graphs, profiles, "ride")
    assert len(groups) > 1 and sorted(i for g, _, _ in groups for i in g) == list(range(16))
    for idx, _, many in groups:
        for j, i in enumerate(idx):
            one = templates(r.design, r.execution.pass_graphs, profiles[i], "ride")
            for ta, tb in zip(many, one):
                for na, nb in zip(ta.nodes, tb.nodes):
                    for f in ("busy_us", "busy_first_us", "delay_us", "delay_first_us", "work_us", "nbytes"):
                        a = getattr(na, f)
                        assert (a[j] if isinstance(a, np.ndarray) else a) == getattr(nb, f)


def test_the_timings_say_how_each_sample_was_timed():
    r = evaluate("v6", Settings(heads=32, chunks=8, interleave=2, numerics=False, keep_trace=False, record=True))
    fields = design_fields(r.profile)
    got = timer(r).time(sample_profiles(r.profile, fields, sample_values(fields, 4, 0)))
    assert got.ways.total == 4 * 2            # samples x (pipelined, serial) for its one pass
    assert set(got.ways.counts) == {RETIMED, COMPILED, REPLAYED}


def test_kernels_timed_from_their_layout_equal_the_event_model():
    """kda.validate's kernels (drawn, seeded) timed without a recorded replay, the compiled model built from
    each pass's layout of work: every sample's prediction is the event model's replay of it (predict)."""
    from npusim.fit.uncertainty import assumptions
    from kda.studies.validate import load
    rows, models = load()
    keys = sorted(dict.fromkeys(r.key for r in rows), key=str)
    rnd = random.Random(5)
    profile = load_profile("ascend-910b2")
    fields = assumptions(profile)
    profiles = [profile] + sample_profiles(profile, fields, sample_values(fields, 2, 5))
    for key in rnd.sample(keys, 4):
        m = models[key]
        got = m.predict_many(profiles)
        want = [m.predict(p) for p in profiles]
        assert all(_close(a, b) for a, b in zip(got, want)), (key, got, want)
