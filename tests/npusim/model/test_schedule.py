"""Designs of several passes and the engine's work layouts, against timings worked out by hand on the toy
profile of conftest.py (Vec 1e5 elements/us, Cube 1e6 MACs/us, links 1000 B/us, GM free)."""
import pytest

from npusim import build_template, phase_program, simulate
from npusim.model.multipass import simulate_design
from npusim.model.schedule import BARRIER, CHUNKS, LAUNCH, SEQUENTIAL, Design, Pass

from tests.conftest import randn, record, toy_program
from tests.npusim.model.test_engine import toy

X99, W = randn(1, 1000, 99), randn(1, 1000, 1000, seed=1)


@phase_program("loop", returns=("S_new",), state=("S", "S_new"))
def loop_program(npu, x, w, S):
    with npu.vec("P"):
        y = x.sum(-1, keepdim=True) + S       # 99,000 + 1,000 elements = 1 us
    npu.sync(y)                               # 4000 B: 4 us, then the latency
    with npu.cube("Q"):
        S_new = w @ y                         # 1e6 MACs = 1 us; the state goes back to the Vector: its own hand-off
    return S_new


def loop():
    return record(loop_program, state=randn(1, 1000, 1, seed=2), x=X99, w=W)


def test_interleaving_two_sequences_fills_the_hand_off_gaps(toy_profile):
    """Latency 10 us. A chunk after the first: state hand-off 4 + 10, P 1, sync 4 + 10, Q 1 = 30 us; the
    first chunk has no state hand-off: 16 us. Two sequences of two chunks on one core with two slots:
      one after the other: s0c0 0-16; s0c1 takes the second slot and waits for the state (16-46);
        s1c0 gets a slot when s0c0's Q ends at 16, but the state's workspace copy is one per lane: its
        hand-off may not overwrite it before s0c1's P has read it (31): P 31-32, sync 35-49, Q 49-50;
        s1c1: state 50-64, P 64-65, sync 65-79, Q 79-80.                            -> 80 us
      interleaved (s0c0, s1c0, s0c1, s1c1): s0c0 0-16, s1c0 P 1-2, sync 5-19, Q 19-20;
        s0c1: state 16-30, P 30-31, sync 31-45, Q 45-46; s1c1: state 20-34, P 34-35, sync 35-49, Q 49-50 -> 50 us"""
    p = toy_profile(latency=10.0, slots=2)
    tpl = build_template(loop(), p)
    assert simulate(tpl, p, chunks=1).makespan_us == pytest.approx(16.0)
    assert simulate(tpl, p, chunks=2).makespan_us == pytest.approx(46.0)
    assert simulate(tpl, p, chunks=2, sequences=2).makespan_us == pytest.approx(80.0)
    run = simulate(tpl, p, chunks=2, sequences=2, interleave=2)
    assert run.makespan_us == pytest.approx(50.0)
    starts = sorted((e.start, e.seq, e.chunk) for e in run.trace.events() if e.name == "P")
    assert [(s, c) for _, s, c in starts] == [(0, 0), (1, 0), (0, 1), (1, 1)]


def test_each_interleaved_lane_has_its_own_slots(toy_profile):
    """One slot in the profile, two one-chunk sequences on one core (P 1, sync 4 + 10, Q 1 = 16 us each).
    One after the other, the second waits for the first's slot: 0-16, then 16-32 -> 32 us. Interleaved, each
    lane has its slot: s0 P 0-1, s1 P 1-2; s0's sync 1-5 + 10, Q 15-16; s1's sync waits for the link,
    5-9 + 10, Q 19-20 -> 20 us. With one sequence on the core, interleave 2 has no second lane to fill."""
    p = toy_profile(latency=10.0, slots=1)
    tpl = build_template(loop(), p)
    assert simulate(tpl, p, chunks=1, sequences=2).makespan_us == pytest.approx(32.0)
    run = simulate(tpl, p, chunks=1, sequences=2, interleave=2)
    assert run.makespan_us == pytest.approx(20.0)
    assert run.slots == 2
    assert simulate(tpl, p, chunks=1, sequences=1, interleave=2).slots == 1


def test_variable_lengths_replay_each_sequence_its_own_chunks(toy_profile):
    p = toy_profile(latency=10.0)
    tpl = build_template(loop(), p)
    run = simulate(tpl, p, chunks=[1, 2], sequences=2, trace=True)
    assert sorted((e.seq, e.chunk) for e in run.trace.events() if e.name == "P") == [(0, 0), (1, 0), (1, 1)]
    assert run.instances == 3
    with pytest.raises(ValueError, match="interleave"):
        simulate(tpl, p, chunks=2, interleave=0)


def test_passes_run_one_after_another_with_launches_and_barriers(toy_profile):
    """The toy program (P 1 us, sync 4 + 1 us, Q 1 us) as a CHUNKS pass: three items on one core with two
    slots take 15 us (tests/npusim/model/test_engine.py), on three cores 7 us. Launches cost 0 and the default barrier
    1 us in the toy profile."""
    graph = toy()
    design_l = Design("two", (Pass("a", toy_program(), CHUNKS), Pass("b", toy_program(), CHUNKS, LAUNCH)))
    design_b = Design("two", (Pass("a", toy_program(), CHUNKS), Pass("b", toy_program(), CHUNKS, BARRIER)))
    for cores, per_pass in ((1, 15.0), (3, 7.0)):
        p = toy_profile(cores=cores)
        tpls = [build_template(graph, p)] * 2
        assert simulate_design(design_l, tpls, p, [3]).latency_us == pytest.approx(2 * per_pass)
        run = simulate_design(design_b, tpls, p, [3])
        assert run.latency_us == pytest.approx(2 * per_pass + 1.0)
        assert run.passes[1].start_us == pytest.approx(per_pass + 1.0)
        assert run.passes[0].run.cores_used == cores and design_b.launches == 1 and design_b.barriers == 1


def test_a_design_states_its_layout_and_is_checked():
    with pytest.raises(ValueError, match="unknown layout 'diagonal'"):
        Pass("x", toy_program(), "diagonal")
    with pytest.raises(ValueError, match="unknown boundary"):
        Pass("x", toy_program(), CHUNKS, "teleport")
    with pytest.raises(ValueError, match="carries a state"):
        Pass("x", loop_program, CHUNKS)
    with pytest.raises(ValueError, match="no passes"):
        Design("empty", ())
    assert Pass("x", loop_program, SEQUENTIAL).carries_state


def test_a_pass_that_states_its_interleave_streams_its_sequences_so_whatever_the_run_asks(toy_profile):
    """The loop program's two sequences of two chunks on one core with two slots (latency 10 us): 80 us one
    sequence after the other, 50 us alternating them (test_interleaving_two_sequences_fills_the_hand_off_gaps).
    A pass that says how the kernel streams its sequences keeps that order whatever --interleave the run
    has; a pass that says nothing follows the run. Launches cost 0 in the toy profile: the latency is the pass's."""
    p = toy_profile(latency=10.0, slots=2)
    tpls = [build_template(loop(), p)]
    two = Design("two", (Pass("walk", loop_program, SEQUENTIAL, interleave=2),))
    one = Design("one", (Pass("walk", loop_program, SEQUENTIAL, interleave=1),))
    free = Design("free", (Pass("walk", loop_program, SEQUENTIAL),))
    assert simulate_design(two, tpls, p, [2, 2], interleave=1).latency_us == pytest.approx(50.0)
    assert simulate_design(one, tpls, p, [2, 2], interleave=2).latency_us == pytest.approx(80.0)
    assert simulate_design(free, tpls, p, [2, 2], interleave=1).latency_us == pytest.approx(80.0)
    assert simulate_design(free, tpls, p, [2, 2], interleave=2).latency_us == pytest.approx(50.0)


def test_an_interleave_is_a_count_of_sequences_for_a_pass_that_walks_them():
    for bad in (0, -1):
        with pytest.raises(ValueError, match="interleave is a number >= 1"):
            Pass("x", loop_program, SEQUENTIAL, interleave=bad)
    with pytest.raises(ValueError, match="for a pass that walks sequences"):
        Pass("x", toy_program(), CHUNKS, interleave=2)
