"""The event model against timings worked out by hand on a toy profile:
Vec 1e5 elements/us, Cube 1e6 MACs/us, links 1000 B/us, sync latency 1 us, GM free.

Toy program: P (Vec) sums x [1000, 100] over its last axis: 1e5 elements = 1 us; y [1000, 1] fp32 is
4000 B: the sync takes 4 us on the link + 1 us latency; Q (Cube) does y^T @ w [1000, 1000]: 1e6 MACs = 1 us.
One chunk therefore ends at exactly 1 + 5 + 1 = 7 us."""
import pytest

from npusim import OWN, RIDE, build_template, phase_program, run_and_report, simulate

from tests.conftest import randn, record, toy_program

X, W = randn(1, 1000, 100), randn(1, 1000, 1000, seed=1)


def toy(resident=()):
    return record(toy_program(resident), x=X, w=W)


def spans(run):
    return {(e.chunk, e.name): (round(e.start, 9), round(e.end, 9)) for e in run.trace.events()}


def test_two_phases_one_sync_exact_end_time(toy_profile):
    run = simulate(toy(), toy_profile(), chunks=1)
    assert run.makespan_us == pytest.approx(7.0)
    assert spans(run) == {(0, "P"): (0, 1), (0, "sync1"): (1, 6), (0, "Q"): (6, 7)}


def test_one_slot_means_no_overlap(toy_profile):
    run = simulate(toy(), toy_profile(slots=1), chunks=3)
    assert run.makespan_us == pytest.approx(21.0)
    assert run.makespan_us == pytest.approx(simulate(toy(), toy_profile(), chunks=3, serial=True).makespan_us)


def test_two_slots_overlap_as_computed_by_hand(toy_profile):
    run = simulate(toy(), toy_profile(slots=2), chunks=3)
    s = spans(run)
    # chunk 1 starts P as soon as the Vector unit is free; its sync waits for the link (busy until 5)
    assert s[(1, "P")] == (1, 2) and s[(1, "sync1")] == (5, 10) and s[(1, "Q")] == (10, 11)
    # chunk 2 needs a slot: chunk 0 frees its slot when Q ends at 7
    assert s[(2, "P")] == (7, 8) and s[(2, "sync1")] == (9, 14) and s[(2, "Q")] == (14, 15)
    assert run.makespan_us == pytest.approx(15.0)


def test_resident_tensor_waits_for_previous_readers(toy_profile):
    s = spans(simulate(toy(resident=("y",)), toy_profile(slots=2), chunks=3))
    # sync ① of chunk 1 overwrites the resident y: it waits until Q of chunk 0 has read it (at 7)
    assert s[(1, "sync1")] == (7, 12) and s[(2, "sync1")] == (13, 18)


def stateful():
    @phase_program("st", returns=("o", "S_new"), state=("S", "S_new"))
    def program(npu, x, S):
        with npu.vec("P"):
            y = x.sum(-1, keepdim=True)          # 1 us; y is 4000 B
        npu.sync(y)                              # 4 us + 1 us
        with npu.cube("Q"):
            o = y.mT @ S                          # 1e4 MACs = 0.01 us
        npu.sync(o)                              # 40 B: 0.04 us + 1 us
        with npu.vec("R"):
            S_new = S * 0.5                       # 1e4 elements = 0.1 us
        return o, S_new
    return record(program, state=randn(1, 1000, 10, seed=3), x=X)


def test_state_hand_off_rides_or_has_its_own_sync(toy_profile):
    p = toy_profile()
    ride = build_template(stateful(), p, RIDE)
    assert ride.state_mode == RIDE and ride.nodes[ride.state_sync].label == "①"
    own = build_template(stateful(), p, OWN)
    assert own.state_mode == OWN and own.nodes[own.state_sync].name == "state"
    # serial: chunk 0 = 1 + 5 + 0.01 + 1.04 + 0.1 = 7.15 us; chunk 1 adds the 40 KB state (40 us):
    # riding on ① it costs only its bytes, as its own sync it also costs a fixed latency.
    assert simulate(ride, p, chunks=2, serial=True).makespan_us == pytest.approx(7.15 + 47.15)
    assert simulate(own, p, chunks=2, serial=True).makespan_us == pytest.approx(7.15 + 48.15)


def test_state_dependency_orders_chunks(toy_profile):
    run = simulate(stateful(), toy_profile(slots=2), chunks=3)
    ev = spans(run)
    for t in (1, 2):   # the hand-off that carries S into chunk t starts after R of chunk t-1
        assert ev[(t, "sync1")][0] >= ev[(t - 1, "R")][1] - 1e-9


def test_same_inputs_give_identical_traces(toy_profile):
    a = simulate(stateful(), toy_profile(), chunks=5, sequences=3)
    b = simulate(stateful(), toy_profile(), chunks=5, sequences=3)
    assert a.trace.events() == b.trace.events() and a.makespan_us == b.makespan_us


def test_sequences_spread_over_cores(toy_profile):
    one = simulate(toy(), toy_profile(cores=1), chunks=2, sequences=4)
    four = simulate(toy(), toy_profile(cores=4), chunks=2, sequences=4)
    assert {e.core for e in four.trace.events()} == {0, 1, 2, 3}
    assert four.makespan_us == pytest.approx(simulate(toy(), toy_profile(), chunks=2).makespan_us)
    assert one.makespan_us > 2 * four.makespan_us


def test_report_bound_is_below_pipelined_and_serial(toy_profile):
    rep, piped, serial = run_and_report(stateful(), toy_profile(), chunks=6, sequences=2)
    assert rep.bound_us <= rep.pipelined_us + 1e-9 <= rep.serial_us + 1e-9
    assert 0 < rep.efficiency <= 1 and rep.speedup >= 1
    assert rep.syncs_per_chunk == 2 and rep.state.rides_on == "①" and rep.state.handoffs == 5 * 2


def test_lockstep_classes_give_the_per_core_timeline(toy_profile):
    # 7 sequences on 3 cores: classes of 3 and 2 sequences; no contention in the toy profile
    p = toy_profile(cores=3)
    a = simulate(stateful(), p, chunks=4, sequences=7)
    b = simulate(stateful(), p, chunks=4, sequences=7, symmetric=False)
    assert a.trace.events() == b.trace.events() and a.busy_us == b.busy_us
    assert a.makespan_us == b.makespan_us and a.waves == 3


def test_chip_bandwidth_contention_shows(toy_profile):
    # the toy sync moves 4000 B at 1000 B/us per core; four cores at once need 4000 B/us from the L2
    free = simulate(toy(), toy_profile(cores=4), chunks=3, sequences=4)
    tight = simulate(toy(), toy_profile(cores=4, l2_bw=2.0), chunks=3, sequences=4)    # 2000 B/us
    assert free.makespan_us == pytest.approx(15.0)          # as one core alone (test above)
    assert tight.makespan_us > free.makespan_us
    first_sync = next(e for e in tight.trace.events() if e.name == "sync1")
    assert first_sync.busy_end - first_sync.start == pytest.approx(4000 * 4 / 2000)   # a quarter of 2000 B/us
    assert tight.shared_us["l2"] == pytest.approx(4 * 3 * 4000 / 2000)
    alone = simulate(toy(), toy_profile(cores=1, l2_bw=2.0), chunks=3, sequences=1)
    assert alone.makespan_us == pytest.approx(15.0)           # one core never exceeds its share


def test_a_shared_transfer_counts_the_transfers_already_under_way():
    """Hand-computed: 1000 B/us shared. A (1000 B) alone at t=0 takes 1 us; B (1000 B) starting at 0.5 while
    A runs gets half the rate: 2 us, to 2.5; C at 1.5 (A done, B still under way) also gets half: 2 us;
    D at 4 (nothing under way) takes 1 us. A lockstep class of 3 identical transfers alone takes 3 us."""
    from npusim.model.engine import _Share
    share = _Share(1000.0)
    assert share.transfer_us(0.0, 1000, 0.0, 1) == pytest.approx(1.0)
    assert share.transfer_us(0.5, 1000, 0.0, 1) == pytest.approx(2.0)
    assert share.transfer_us(1.5, 1000, 0.0, 1) == pytest.approx(2.0)
    assert share.transfer_us(4.0, 1000, 0.0, 1) == pytest.approx(1.0)
    assert _Share(1000.0).transfer_us(0.0, 1000, 0.0, 3) == pytest.approx(3.0)
    assert _Share(1000.0).transfer_us(0.0, 1000, 5.0, 1) == pytest.approx(5.0)   # never above the core's own rate


def test_a_transfer_ending_exactly_now_no_longer_shares():
    """Hand-computed, 1000 B/us shared: A (1000 B) from 0 ends at exactly 1.0; B starting at 1.0 has the whole
    rate (1 us), not half (2 us)."""
    from npusim.model.engine import _Share
    share = _Share(1000.0)
    assert share.transfer_us(0.0, 1000, 0.0, 1) == pytest.approx(1.0)
    assert share.transfer_us(1.0, 1000, 0.0, 1) == pytest.approx(1.0)


def test_a_lockstep_class_holds_its_share_for_every_core_of_it():
    """Hand-computed, 1000 B/us shared: a class of 3 cores moving 1000 B each from 0 takes 3 us (a third
    each); one more transfer at 0.5 finds those 3 under way and gets a quarter: 4 us, to 4.5. At 3.0 the class
    is done and the single one still under way: a class of 2 gets a third each, 3 us."""
    from npusim.model.engine import _Share
    share = _Share(1000.0)
    assert share.transfer_us(0.0, 1000, 0.0, 3) == pytest.approx(3.0)
    assert share.transfer_us(0.5, 1000, 0.0, 1) == pytest.approx(4.0)
    assert share.transfer_us(3.0, 1000, 0.0, 2) == pytest.approx(3.0)
    assert share.busy == pytest.approx(6 * 1000 / 1000)          # 6 transfers of 1 us of the whole rate


def test_the_cores_of_a_class_share_the_chip_in_the_replay(toy_profile):
    # 3 cores in lockstep, L2 shared at 2000 B/us: each core's first sync (4000 B) gets a third: 6 us,
    # above its own 4 us at 1000 B/us; the first chunk ends at 1 + (6 + 1) + 1 = 9 us
    run = simulate(toy(), toy_profile(cores=3, l2_bw=2.0), chunks=1, sequences=3)
    syncs = [e for e in run.trace.events() if e.name == "sync1"]
    assert len(syncs) == 3 and all(e.busy_end - e.start == pytest.approx(6.0) for e in syncs)
    assert run.makespan_us == pytest.approx(9.0)
    # each core simulated on its own: the first finds nothing under way (4 us, its own rate), the second
    # the first (2 cores: 4 us), the third both (6 us)
    alone = simulate(toy(), toy_profile(cores=3, l2_bw=2.0), chunks=1, sequences=3, symmetric=False)
    assert sorted(e.busy_end - e.start for e in alone.trace.events() if e.name == "sync1") == \
        [pytest.approx(4.0), pytest.approx(4.0), pytest.approx(6.0)]


def test_the_first_chunk_of_each_sequence_pays_the_sync_latency(toy_profile):
    # 2 sequences on one core, one chunk each, serial: every sync is 4 us + 1 us of latency: 2 x 7 us
    run = simulate(toy(), toy_profile(latency=3.0), chunks=1, sequences=2, serial=True)
    assert run.makespan_us == pytest.approx(2 * (1 + 4 + 3 + 1))
    spans = [(e.seq, e.end - e.busy_end) for e in run.trace.events() if e.name == "sync1"]
    assert spans == [(0, pytest.approx(3.0)), (1, pytest.approx(3.0))]
