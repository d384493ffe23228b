"""A group's host floor, worked by hand, and each model's latency under several profiles at once."""
import numpy as np
import pytest

from npusim import load_profile
from npusim.chip.floor import floors, model_times


def test_a_group_s_floor_is_its_weighted_mean_gap_clipped_at_zero():
    # group a: gaps 2 and 5 us at measured 10 and 20 us, weights 1/100 and 1/400:
    # (2/100 + 5/400) / (1/100 + 1/400) = 0.0325 / 0.0125 = 2.6; group b predicts above its one row: 0
    got = floors(groups=["a", "a", "b"], measured=[10.0, 20.0, 10.0], predicted=[8.0, 15.0, 12.0])
    assert got == {"a": pytest.approx(2.6), "b": 0.0}


class _OneByOne:
    def __init__(self):
        self.calls = 0

    def predict(self, profile):
        self.calls += 1
        return 2.0 * profile.sync.latency_us


class _Batched(_OneByOne):
    def predict_many(self, profiles):
        self.calls += 1
        return [10.0 + p.sync.latency_us for p in profiles]


def test_model_times_batches_where_it_can_and_times_a_shared_model_once():
    base = load_profile("ascend-910b2")
    profiles = [base.replace(sync__latency_us=x) for x in (1.0, 2.0, 3.0)]
    one, batched = _OneByOne(), _Batched()
    times = model_times([one, batched, one], profiles)
    assert np.array_equal(times, [[2.0, 4.0, 6.0], [11.0, 12.0, 13.0], [2.0, 4.0, 6.0]])
    assert one.calls == 3 and batched.calls == 1      # one profile at a time for `one`, and only once
