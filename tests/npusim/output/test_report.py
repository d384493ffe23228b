"""A pass's report and its longest dependency chain, against figures worked by hand on the toy profile of
tests/npusim/model/test_engine.py (P 1 us on Vec, its sync 4 us on the link + 1 us latency, Q 1 us on Cube;
launch free)."""
import numpy as np
import pytest

from npusim import RIDE, build_template, run_and_report
from npusim.output.chain import longest_chain
from npusim.output.report import chain_us, unit_loads

from tests.npusim.model.test_engine import stateful, toy


def test_longest_chain_on_a_graph_worked_by_hand():
    # a -> b, a -> c inside a chunk; c of one chunk feeds a of the next (state)
    # first chunk: a 1, b 1 + 2 = 3, c 1 + 3 = 4; second: a waits for c (4): 4 + 2 = 6, b and c 6 + 2 = 8
    csr = lambda lists: (np.cumsum([0] + [len(x) for x in lists]).astype(np.int64),   # noqa: E731
                         np.array([i for x in lists for i in x], np.int64))
    deps, state = csr([[], [0], [0]]), csr([[2], [], []])
    args = (np.arange(3, dtype=np.int64), *deps, *state, np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0]))
    assert longest_chain(1, 3, *args) == pytest.approx(4.0)
    assert longest_chain(2, 3, *args) == pytest.approx(8.0)


def test_chain_without_state_is_one_chunk(toy_profile):
    tpl = build_template(toy(), toy_profile(), RIDE)
    assert chain_us(tpl, 1) == pytest.approx(7.0)          # 1 + 5 + 1
    assert chain_us(tpl, 3) == pytest.approx(7.0)          # no state: chunks do not wait for each other


def test_chain_runs_through_the_state_hand_off(toy_profile):
    tpl = build_template(stateful(), toy_profile(), RIDE)
    # chunk 0: P 1, sync 5, Q 0.01, sync 1.04, R 0.1 -> 7.15; chunk 1's sync carries the 40 KB state too
    # (5 + 40 us) and waits for chunk 0's R: 7.15 + 45 + 0.01 + 1.04 + 0.1
    assert chain_us(tpl, 2) == pytest.approx(7.15 + 46.15)
    with pytest.raises(ValueError, match="0 chunks"):
        chain_us(tpl, 0)


def test_report_of_three_chunks_on_two_slots(toy_profile):
    rep, piped, serial = run_and_report(toy(), toy_profile(slots=2), chunks=3)
    # makespans worked by hand in test_engine: 15 us pipelined, 3 x 7 serial
    assert rep.pipelined_us == pytest.approx(15.0) and rep.serial_us == pytest.approx(21.0)
    assert rep.speedup == pytest.approx(21 / 15)
    # the link carries 3 x 4 us, the busiest unit; the chain is 7 us: bound 12 us
    loads = unit_loads(piped.template, 3, 1)
    assert sorted(loads.values()) == pytest.approx([3.0, 3.0, 12.0])
    assert rep.bound_unit_us == pytest.approx(12.0) and rep.bound_chain_us == pytest.approx(7.0)
    assert rep.bound_us == pytest.approx(12.0) and rep.efficiency == pytest.approx(12 / 15)
    assert rep.bound_unit.startswith("link")
    # one sync of y [1000, 1] fp32: 4000 B, 1 us + 4000 B / 1000 B/us; no state
    assert rep.syncs_per_chunk == 1 and rep.sync_bytes_per_chunk == [4000]
    assert rep.sync_us_per_chunk == pytest.approx(5.0)
    assert rep.state.mode is None and rep.state.handoffs == 0
    assert rep.phase_us == pytest.approx({"P": 1.0, "Q": 1.0})
    # utilisation: each unit's busy time over the 15 us makespan of the one core
    assert rep.utilization[rep.bound_unit] == pytest.approx(12 / 15)
    d = rep.to_dict()
    assert d["efficiency"] == pytest.approx(0.8) and d["syncs_per_chunk"] == 1


def test_report_counts_state_hand_offs(toy_profile):
    rep, _, _ = run_and_report(stateful(), toy_profile(), chunks=3, sequences=2)
    # the state rides on sync 1: (chunks - 1) hand-offs per sequence, each adding its 40 KB (40 us)
    assert rep.state.mode == RIDE and rep.state.rides_on == "①"
    assert rep.state.handoffs == 2 * 2 and rep.state.time_us == pytest.approx(40.0)
