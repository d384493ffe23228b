"""A run's derived figures, by hand on the toy program (P then Q, 1 us each; a 1 us hand-off latency)."""
import pytest

from npusim import NpuSimError, simulate
from npusim.model.run import Run

from tests.npusim.model.test_engine import toy


def test_the_latency_adds_one_launch_to_the_makespan(toy_profile):
    run = simulate(toy(), toy_profile().replace(chip__launch_overhead_us=5.0), chunks=1)
    assert isinstance(run, Run) and run.latency_us == pytest.approx(run.makespan_us + 5.0)


def test_lanes_slots_and_waves_of_five_sequences_on_two_cores(toy_profile):
    # sequences 0, 2, 4 on core 0 and 1, 3 on core 1: three waves; two at a time alternate on a core
    run = simulate(toy(), toy_profile(cores=2, slots=2), chunks=2, sequences=5, interleave=2)
    assert (run.cores_used, run.waves, run.lanes(0), run.lanes(1)) == (2, 3, 2, 2)
    assert run.slots == 4 and run.instances == 10


def test_a_run_without_a_trace_says_so_when_one_is_asked_for(toy_profile):
    run = simulate(toy(), toy_profile(), chunks=1, trace=False)
    with pytest.raises(NpuSimError, match="without a trace"):
        run.traced()
