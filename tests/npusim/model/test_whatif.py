"""What-ifs on the toy of test_engine.py (P 1 us on Vec, its 4000 B sync 4 us on the link + the sync latency L,
Q 1 us on Cube; two slots, three chunks), timed for several latencies at once and held to makespans worked by
hand and to the event model's own replay (SimPy).

By hand, pipelined: chunk 0 P 0-1, sync 1-5, Q 5+L to 6+L; chunk 1 P 1-2, its sync waits for the link: 5-9,
Q 9+L to 10+L; chunk 2 waits for chunk 0's slot (freed at 6+L): P 6+L to 7+L, sync from max(9, 7+L) for 4 us,
Q L later: L = 0.5 -> 14.5, L = 1 -> 15, L = 2 -> 16. Serial: 3 x (1 + 4 + L + 1)."""
import random

import numpy as np
import pytest

from npusim import build_template, simulate
from npusim.chip.lanes import stack
from npusim.model.schedule import single_pass
from npusim.model.whatif.compiled import busy_past_share
from npusim.model.whatif.maxplus import previous_greater
from npusim.model.whatif.retime import node_params
from npusim.model.whatif.structure import Model
from npusim.model.whatif.timer import COMPILED, REPLAYED, RETIMED, DesignTimer

from tests.conftest import toy_program
from tests.npusim.model.test_engine import toy

LATENCIES = (0.5, 1.0, 2.0)
PIPELINED = [14.5, 15.0, 16.0]
SERIAL = [3 * (6 + lat) for lat in LATENCIES]


def _profiles(toy_profile):
    return [toy_profile(latency=lat) for lat in LATENCIES]


def test_compiled_replay_gives_the_event_models_makespans(toy_profile):
    profiles = _profiles(toy_profile)
    run = simulate(build_template(toy(), profiles[1]), profiles[1], chunks=3, trace=False, record=True)
    stacked = stack(profiles)
    params = node_params(build_template(toy(), stacked), stacked, False, len(profiles))
    got = Model.of_run(run).replay(params, np.arange(len(profiles)))
    assert got.tolist() == pytest.approx(PIPELINED)
    assert got.tolist() == [simulate(toy(), p, chunks=3, trace=False).makespan_us for p in profiles]


@pytest.mark.parametrize("retime", [False, True])
def test_design_timer_times_every_latency(toy_profile, retime):
    profiles = _profiles(toy_profile)
    timer = DesignTimer(single_pass(toy_program()), [toy()], profiles[1], [3], state_handoff="ride",
                        retime=retime)
    t = timer.time(profiles, bound=False)
    assert t.latency_us.tolist() == pytest.approx(PIPELINED)
    assert t.serial_us.tolist() == pytest.approx(SERIAL)
    assert t.errors == {} and t.ways.counts[REPLAYED] == 0
    assert t.ways.counts[RETIMED if retime else COMPILED] > 0


def test_a_sample_that_changes_the_slots_is_replayed_by_the_event_model(toy_profile):
    base = toy_profile()
    timer = DesignTimer(single_pass(toy_program()), [toy()], base, [3], state_handoff="ride")
    t = timer.time([base, toy_profile(slots=1)], serial=False, bound=False)
    # one slot: no overlap, 3 x 7 us (test_engine)
    assert t.latency_us.tolist() == pytest.approx([15.0, 21.0])
    assert t.ways.counts[REPLAYED] == 1 and any("workspace.slots" in n for n in t.notes)


def test_busy_past_the_share_by_hand():
    # not pipelined: the unit holds its own 3 us (5 busy - 2 of transfer) or the share, whichever is longer
    assert busy_past_share(False, 1.0, 5.0, 4.0, False, 0.0, 0.0, 0.0, 0.0, 1, 2.0) == (6.0, 4.0)
    assert busy_past_share(False, 1.0, 5.0, 1.0, False, 0.0, 0.0, 0.0, 0.0, 1, 2.0) == (5.0, 3.0)
    # pipelined over 3 tiles, its 2 us of transfer stretched to the 4 us share (x2): load 2, compute 3,
    # store 2: fill and drain 2 + 3 + 2, then 2 more tiles at the slowest stage, 3 each
    assert busy_past_share(True, 9.0, 9.0, 4.0, True, 2.0, 1.0, 3.0, 1.0, 3, 0.0) == (13.0, 4.0)


def test_previous_greater_against_a_plain_loop():
    rng = random.Random(3)
    keys = np.array(rng.sample(range(100), 50), np.int64)      # distinct, as the event ids it is given
    group = np.array([rng.randrange(3) for _ in range(50)], np.int64)
    want = []
    for i in range(50):
        earlier = [j for j in range(i) if group[j] == group[i] and keys[j] > keys[i]]
        want.append(earlier[-1] if earlier else -1)
    assert previous_greater(keys, group).tolist() == want
