"""Lanes (npusim/chip/lanes.py): many profiles' numbers carried at once, a branch taken together or refused
with the lanes that go each way, and a stack of profiles with one taken apart again."""
import numpy as np
import pytest

from npusim import load_profile
from npusim.chip.lanes import Diverges, Lanes, larger, stack, take


def test_lanes_branch_together_or_say_which_way_each_goes():
    x = np.array([1.0, 2.0, 3.0]).view(Lanes)
    assert bool(x > 0) is True and bool(x > 5) is False
    with pytest.raises(Diverges) as err:
        bool(x > 1.5)
    assert err.value.mask.tolist() == [False, True, True]
    assert larger(2.0, 3.0) == 3.0 and larger(x, 2.0).tolist() == [2.0, 2.0, 3.0]
    p = load_profile("ascend-910b2")
    s = stack([p.replace(sync__latency_us=v) for v in (0.2, 0.3, 0.4)])
    assert take(s, np.array([False, True, True])).sync.latency_us.tolist() == [0.3, 0.4]
    assert s.chip.ai_cores == p.chip.ai_cores                  # a field no sample changes stays a number
