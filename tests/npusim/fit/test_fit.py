"""The bounded fit's verdicts (npusim/fit/least_squares.py) on predictors whose answer is known in closed form:
a latency proportional to one field, so that in log terms the Jacobian is a column of ones and the standard
error follows from the residuals by hand."""
import math

import pytest

from npusim import load_profile
from npusim.fit.least_squares import fit
from npusim.fit.uncertainty import Assumption

BASE = load_profile("ascend-910b2").replace(sync__latency_us=1.0)
# three rows of one unit each, measured e^0.1, e^-0.1 and 1: the best value is their geometric mean, 1.0
# (the profile's own, so the weak pull towards it vanishes); the log residuals are -0.1, 0.1 and 0
MEASURED = [math.exp(0.1), math.exp(-0.1), 1.0]
PREDICTORS = [lambda p: p.sync.latency_us] * 3
# residual variance over the free degrees of freedom: 0.02 / (3 rows - 1 field) = 0.01; (J^T J)^-1 = 1/3
SE = math.sqrt(0.02 / (3 - 1) / 3)          # 0.0577


def _one(lo, hi):
    return fit(BASE, [Assumption("sync.latency_us", 1.0, lo, hi, "a test")], PREDICTORS, MEASURED)


def test_the_standard_error_uses_the_free_degrees_of_freedom():
    (f,) = _one(0.5, 2.0).fields                 # 2 SE = 0.115 < half the range (log 4 / 2 = 0.69)
    assert f.determined and f.value == pytest.approx(1.0, abs=1e-6)
    assert f.rel_se == pytest.approx(SE, rel=1e-3)


def test_a_field_whose_two_standard_errors_span_half_its_range_is_too_uncertain():
    # range [0.9, 1.1]: log width 0.2007, half of it 0.100 < 2 SE = 0.115: not determined, and left as it was
    result = _one(0.9, 1.1)
    (f,) = result.fields
    assert not f.determined and f.why.startswith("too uncertain") and f.value == 1.0
    assert f.rel_se == pytest.approx(SE, rel=1e-3)
    assert result.profile.sync.latency_us == 1.0
    # a range just wide enough (half its log width above 2 SE): determined
    w = 2 * (2 * SE) * 1.05
    assert _one(math.exp(-w / 2), math.exp(w / 2)).fields[0].determined


def test_rms_is_in_log_terms():
    result = _one(0.5, 2.0)
    assert result.rms_after == pytest.approx(math.sqrt(0.02 / 3), rel=1e-4)


class _Counted:
    """A model whose latency is a closed form of two fields; predict_many gives the same numbers and counts
    the batches it was asked for."""

    def __init__(self, a: float, b: float):
        self.a, self.b, self.batches = a, b, []

    def predict(self, p):
        return self.a * p.sync.latency_us + self.b * p.chip.launch_overhead_us

    def predict_many(self, profiles):
        self.batches.append(len(profiles))
        return [self.predict(p) for p in profiles]


def test_a_batched_jacobian_gives_the_fit_of_the_one_by_one_jacobian():
    from npusim.fit.least_squares import batch_of
    fields = [Assumption("sync.latency_us", 1.0, 0.1, 5.0, "a test"),
              Assumption("chip.launch_overhead_us", 20.0, 5.0, 80.0, "a test")]
    models = [_Counted(a, b) for a, b in ((1, 1), (10, 1), (100, 1), (1, 3))]
    measured = [3.0 * a + 30.0 * b for a, b in ((1, 1), (10, 1), (100, 1), (1, 3))]   # latency 3, launch 30
    alone = fit(BASE, fields, [m.predict for m in models], measured)
    batched = fit(BASE, fields, [m.predict for m in models], measured, many=batch_of(models))
    assert [f.value for f in batched.fields] == [f.value for f in alone.fields]
    assert list(batched.after) == list(alone.after) and batched.evaluations == alone.evaluations
    assert alone.fields[0].value == pytest.approx(3.0, rel=1e-3) and alone.fields[1].value == pytest.approx(30.0, rel=1e-3)
    assert models[0].batches and all(n >= 2 for n in models[0].batches)   # the Jacobian's points, together
