"""Profile ranges, Latin hypercube sampling, rank influences and `kda.cli.run --uncertainty`."""
import json
import math

import numpy as np
import pytest

from kda.settings import Settings
from kda.studies.evaluate import evaluate
from kda.cli.run import main
from kda.studies.uncertainty import Uncertainty, lines, propagate
from npusim import ProfileError, load_profile, shipped_profiles
from npusim.fit.uncertainty import Assumption, assumptions, latin_hypercube, sample_values, spearman


def _profile(tmp_path, sync_line, name="p.toml"):
    p = tmp_path / name
    p.write_text(f'inherits = "seed-doc"\nname = "ranged"\n[sync]\nlatency_us = {sync_line}\n')
    return p


def test_every_assumed_field_of_a_shipped_profile_has_a_range_around_its_value():
    for name in shipped_profiles():
        p = load_profile(name)
        fitted = {k for k, src in p.sources.items() if src.startswith(("FITTED", "MEASURED"))}
        assert set(p.ranges) == set(p.assumptions) | fitted, name      # fitted, measured: their interval
        for key, (lo, hi) in p.ranges.items():
            assert 0 < lo <= p.value(key) <= hi and p.range_reasons[key].strip(), key
    assert load_profile("ascend-910b2-uncalibrated").ranges["sync.latency_us"] == (0.1, 5.0)


@pytest.mark.parametrize("line, message", [
    ('{ value = 1.0, range = [2.0, 0.5], range_reason = "x" }', "sync.latency_us: range [2, 0.5] has lo > hi"),
    ('{ value = 9.0, range = [0.5, 2.0], range_reason = "x" }', "sync.latency_us = 9 lies outside its range [0.5, 2]"),
    ('{ value = 1.0, range = [nan, 2.0], range_reason = "x" }', "sync.latency_us: range bounds must be finite"),
    ('{ value = nan, range = [0.5, 2.0], range_reason = "x" }', "sync.latency_us must be >= 0, got nan"),
    ('{ value = 1.0, range = [0.5, 2.0] }', "sync.latency_us has a range but no range_reason"),
    ('{ value = 1.0, range = [0.5], range_reason = "x" }', "sync.latency_us: range must be [lo, hi]"),
    ('{ value = 1.0, range = [0.0, 2.0], range_reason = "x" }', "sync.latency_us: range lower bound must be > 0"),
    ('{ value = 1.0, ranje = [0.5, 2.0] }', "sync.latency_us has an unknown key 'ranje'"),
])
def test_bad_ranges_are_one_line_naming_the_field(tmp_path, line, message):
    with pytest.raises(ProfileError) as err:
        load_profile(_profile(tmp_path, line))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_bad_range_on_the_command_line_is_exit_2(tmp_path, capsys):
    path = _profile(tmp_path, '{ value = 1.0, range = [2.0, 0.5], range_reason = "x" }')
    assert main(["--profile", str(path), "--chunks", "1", "--no-numerics"]) == 2
    err = capsys.readouterr().err.strip()
    assert "lo > hi" in err and "sync.latency_us" in err and len(err.splitlines()) == 1


def test_an_overridden_value_drops_the_inherited_range(tmp_path):
    (tmp_path / "q.toml").write_text('inherits = "ascend-910b2"\n[sync]\nlatency_us = 9.0\n')
    p = load_profile(tmp_path / "q.toml")
    assert "sync.latency_us" not in p.ranges and "isa.vec_dependent_cycles" in p.ranges


def test_latin_hypercube_puts_one_point_in_each_stratum_and_is_seeded():
    u = latin_hypercube(50, 3, seed=7)
    for j in range(3):
        assert sorted(np.floor(u[:, j] * 50).astype(int)) == list(range(50))
    assert np.array_equal(u, latin_hypercube(50, 3, seed=7))
    assert not np.array_equal(u, latin_hypercube(50, 3, seed=8))


def test_samples_are_log_uniform_within_the_range():
    p = load_profile("ascend-910b2-uncalibrated")
    fields = [f for f in assumptions(p) if f.field == "sync.latency_us"]
    x = sample_values(fields, 1000, seed=1)[:, 0]
    assert x.min() >= 0.1 and x.max() <= 5.0
    # log-uniform on [0.1, 5]: the median is the geometric mean sqrt(0.5) = 0.7071; a tenth lie below 0.1 * 50**0.1
    assert np.median(x) == pytest.approx(math.sqrt(0.5), rel=0.01)
    assert np.mean(x < 0.1 * 50 ** 0.1) == pytest.approx(0.1, abs=0.002)


def test_spearman_by_hand():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 1000]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks x (1,2,3,4), y (2,1,4,3): d^2 = 4, rho = 1 - 6*4 / (4*15) = 0.6
    assert spearman([1, 2, 3, 4], [20, 10, 40, 30]) == pytest.approx(0.6)
    assert spearman([1, 2, 3], [5, 5, 5]) == 0.0


def test_serial_latency_moves_by_six_syncs_per_unit_of_sync_latency(tmp_path):
    """v3, one chunk: six syncs on the serial path and no state hand-off, so every sample's serial latency is
    the nominal one plus 6 x (sampled - nominal sync latency); the sync latency explains all of the spread."""
    path = _profile(tmp_path, '{ value = 1.0, source = "ASSUMED: test", range = [0.25, 4.0], range_reason = "test" }')
    r = evaluate("v3", Settings(chunks=1, profile=str(path), numerics=False))
    u = propagate([r], 40, seed=3)
    lat = u.values[:, 0]
    expected = r.report.serial_us + 6 * (lat - 1.0)
    assert np.allclose(u.latencies["v3"]["serial"], expected, rtol=1e-9)
    infl = u.influences("v3", "serial")
    assert infl[0].field == "sync.latency_us" and infl[0].share == pytest.approx(1.0)
    iv = u.interval("v3", "serial")
    assert iv.lo < iv.median < iv.hi and iv.nominal == r.report.serial_us
    # the median sample is near the geometric mean of the range, 1.0
    assert iv.median == pytest.approx(r.report.serial_us, abs=6 * 0.1)
    assert np.array_equal(propagate([r], 40, seed=3).latencies["v3"]["serial"], u.latencies["v3"]["serial"])


def test_win_shares_count_samples_and_split_ties():
    lat = {"a": {"pipelined": np.array([1.0, 5.0, 2.0, 3.0])}, "b": {"pipelined": np.array([2.0, 4.0, 2.0, 1.0])}}
    u = Uncertainty(4, 0, [], np.zeros((4, 0)), ["a", "b"], lat, {})
    assert u.win_shares() == {"a": pytest.approx(0.375), "b": pytest.approx(0.625)}


def test_cli_uncertainty_json_and_fixed_fields(capsys):
    assert main(["--version", "all", "--chunks", "2", "--no-numerics", "--uncertainty", "8", "--json",
                 "--set", "sync.latency_us=0.3"]) == 0
    d = json.loads(capsys.readouterr().out)
    unc = d[0]["uncertainty"]
    assert unc["samples"] == 8 and "sync.latency_us" not in [f["field"] for f in unc["fields"]]
    assert sum(unc["wins"].values()) == pytest.approx(1.0)
    for v in ("v1", "v3", "v4"):
        iv = unc["latency_us"][v]["pipelined"]
        assert iv["p05"] <= iv["median"] <= iv["p95"]


def test_cli_uncertainty_needs_two_samples(capsys):
    assert main(["--chunks", "1", "--no-numerics", "--uncertainty", "1"]) == 2
    assert "--uncertainty needs at least 2 samples" in capsys.readouterr().err


def test_the_latin_hypercube_follows_the_seed():
    a, b, a2 = latin_hypercube(8, 3, 1), latin_hypercube(8, 3, 2), latin_hypercube(8, 3, 1)
    assert np.array_equal(a, a2) and not np.array_equal(a, b)
    for u in (a, b):                       # one point in each eighth of every axis
        assert all(sorted(np.floor(u[:, j] * 8).astype(int)) == list(range(8)) for j in range(3))


def test_uncertainty_samples_differ_with_the_seed(capsys):
    def spread(seed):
        assert main(["--no-numerics", "--chunks", "2", "--dk", "16", "--dv", "16", "--uncertainty", "4",
                     "--seed", str(seed), "--json"]) == 0
        d = json.loads(capsys.readouterr().out)["uncertainty"]
        d.pop("seed")                                  # the samples, not the label, must follow the seed
        return d
    assert spread(1) == spread(1) and spread(1) != spread(2)


def test_drivers_are_the_fields_that_explain_most_of_a_designs_interval():
    """A latency that is x0 exactly: x0 explains all of it (rho^2 = 1), so it alone drives the interval, though x1,
    its exact reverse, explains as much; a constant latency: no field above 5 %."""
    fields = [Assumption("a.x0", 2.0, 1.0, 4.0, ""), Assumption("a.x1", 2.0, 1.0, 4.0, "")]
    values = np.array([[1.0, 4.0], [2.0, 3.0], [3.0, 2.0], [4.0, 1.0]])
    series = {"d": values[:, 0].copy(), "flat": np.full(4, 7.0)}
    lat = {v: {m: y for m in ("pipelined", "serial", "bound")} for v, y in series.items()}
    nominal = {v: {m: 1.0 for m in ("pipelined", "serial", "bound")} for v in series}
    u = Uncertainty(4, 0, fields, values, ["d", "flat"], lat, nominal,
                    statuses={"a.x0": "ASSUMED", "a.x1": "FITTED"})
    assert [(i.field, i.share) for i in u.drivers("d")] == [("a.x0", pytest.approx(1.0))]
    assert u.drivers("flat") == []
    assert u.to_dict()["drivers"] == {"d": ["a.x0"], "flat": []}
    text = "\n".join(lines(u))
    assert "  a.x0 = 2 in [1, 4] (ASSUMED)" in text and "  a.x1 = 2 in [1, 4] (FITTED)" in text
    assert "  d        a.x0 100% (ASSUMED)" in text and "  flat     no field above 5 %" in text
    assert "docs/how-to/measure-assumed.md" in text        # an ASSUMED field drives one: how to measure it
