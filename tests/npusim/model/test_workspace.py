"""The workspace a program's hand-offs need, on the toy program worked by hand: P hands y [1000, 1] fp32
(4000 bytes) to Q through a sync; Q is its last reader."""
import pytest

from npusim.errors import WorkspaceError
from npusim.model.workspace import analyse, check_fits

from tests.conftest import randn, record, toy_program


def _graph(resident=()):
    return record(toy_program(resident=resident), x=randn(1000, 100), w=randn(1000, 1000, seed=1))


def test_a_transient_hand_off_lives_in_the_slot_from_its_sync_to_its_last_reader():
    graph = _graph()
    use = analyse(graph)
    (y,) = use.lifetimes
    steps = [s.name for s in graph.steps]
    assert (y.name, y.nbytes, y.placement) == ("y", 4000, "slot")
    assert steps[y.start] != "P" and steps[y.end] == "Q" and y.start < y.end      # the sync, then Q
    assert use.slot_peak == 4000 and use.slot_release_step == y.end and use.resident == {}


def test_a_resident_hand_off_takes_the_resident_region_and_no_slot():
    use = analyse(_graph(resident=("y",)))
    assert use.resident == {"y": 4000} and use.slot_peak == 0 and use.slot_release_step is None


def test_a_slot_too_small_is_refused_naming_the_tensor_and_the_sizes(toy_profile):
    graph = _graph()
    check_fits(graph, analyse(graph), toy_profile(slot_kib=4.0).workspace)            # 4096 bytes: fits
    with pytest.raises(WorkspaceError, match=r"toy: sync .* needs 3.90625 KiB live in a 3 KiB ping/pong slot "
                                             r"\(y 3.90625 KiB\)"):
        check_fits(graph, analyse(graph), toy_profile(slot_kib=3.0).workspace)
