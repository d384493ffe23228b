"""Overlap metrics: the interval arithmetic, a timeline worked out by hand, and properties of any run.

The hand-worked timeline is test_engine.py's toy (P on Vec 1 us, a 4000 B sync: 4 us on the link + 1 us,
Q on Cube 1 us) over 3 chunks with 2 slots:
  P0 [0,1]  sync [1,6) (link to 5)  Q0 [6,7]
  P1 [1,2]  sync [5,10) (link to 9) Q1 [10,11]
  P2 [7,8]  sync [9,14) (link to 13) Q2 [14,15]"""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npusim import build_template, simulate
from npusim.output.critical_path import critical_path
from npusim.output.overlap import analyse, gaps, intersect, merge, subtract, total

from tests.npusim.model.test_engine import toy
from tests.npusim.model.test_engine_properties import cases, graph_and_profile


def test_interval_arithmetic_by_hand():
    a = merge([(5, 7), (0, 2), (1, 3), (7, 8), (9, 9)])
    assert a == [(0, 3), (5, 8)]
    b = [(2, 6)]
    assert intersect(a, b) == [(2, 3), (5, 6)]
    assert subtract(a, b) == [(0, 2), (6, 8)]
    assert gaps(a, 0, 10) == [(3, 5), (8, 10)]
    assert total(a) == 6


intervals = st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)).map(lambda t: (min(t), max(t))),
                     max_size=12)


@given(x=intervals, y=intervals)
def test_interval_arithmetic_properties(x, y):
    a, b = merge(x), merge(y)
    assert all(p[1] < q[0] for p, q in zip(a, a[1:]))              # sorted, disjoint, not touching
    assert total(merge(a + b)) == total(a) + total(b) - total(intersect(a, b))
    assert total(subtract(a, b)) == total(a) - total(intersect(a, b))
    assert merge(subtract(a, b) + intersect(a, b)) == a
    assert total(gaps(a, 0, 50)) == 50 - total(a)


def test_hand_worked_timeline(toy_profile):
    run = simulate(toy(), toy_profile(slots=2), chunks=3)
    o = analyse(run)
    assert o.span_us == pytest.approx(15)
    assert o.cube_busy_us == pytest.approx(3) and o.vec_busy_us == pytest.approx(3)
    assert o.concurrent_us == pytest.approx(0)            # P2 [7,8] only touches Q0 [6,7]
    # hand-offs in flight over [1,14]; Cube or Vec busy on [0,2], [6,8], [10,11]
    assert o.exposed_sync_us == pytest.approx(4 + 2 + 3)
    cube, vec = o.idle["cube"], o.idle["vec"]
    assert (cube.gaps, cube.idle_us, cube.longest_gap_us, cube.longest_gap_at_us) == (3, 12, 6, 0)
    assert (vec.gaps, vec.idle_us, vec.longest_gap_us, vec.longest_gap_at_us) == (2, 12, 7, 8)
    # the link is the bottleneck: P0, then the three transfers back to back, the last latency, Q2
    cp = o.critical
    assert [(s.name, s.chunk, s.via) for s in cp.steps] == [
        ("P", 0, "data"), ("sync1", 0, "unit"), ("sync1", 1, "unit"), ("sync1", 2, "data"), ("Q", 2, "end")]
    assert cp.by_kind == pytest.approx({"vec": 1, "sync transfer": 12, "sync latency": 1, "cube": 1})
    assert cp.length_us == pytest.approx(15) and cp.sync_us == pytest.approx(13) and cp.syncs == 3
    # steady state over chunks 1-2: 4 us per chunk, the link's 4 us of work per chunk
    assert o.period_us == pytest.approx(4) and o.period_chunks == (1, 2)
    assert o.period_bound_us == pytest.approx(4) and o.period_bound_by == "link:vec->cube"
    assert o.period_efficiency == pytest.approx(1)


def test_serial_run_overlaps_nothing(toy_profile):
    o = analyse(simulate(toy(), toy_profile(), chunks=3, serial=True))
    assert o.concurrent_us == 0 and o.critical.length_us == pytest.approx(21)
    assert {s.via for s in o.critical.steps[:-1]} == {"order"}
    assert o.period_us == pytest.approx(7) and o.period_bound_us == pytest.approx(7)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_critical_path_spans_the_run_for_any_program(toy_profile, case):
    c = case
    graph, profile = graph_and_profile(toy_profile, c)
    tpl = build_template(graph, profile, c["handoff"])
    for serial, interleave in ((False, 1), (True, 1), (False, 2), (True, 2)):
        run = simulate(tpl, profile, chunks=c["chunks"], sequences=c["sequences"], serial=serial,
                       interleave=interleave)
        o = analyse(run)
        # the walk back explains every microsecond: no gaps, nothing counted twice
        assert o.critical.length_us == pytest.approx(run.makespan_us, abs=1e-6)
        assert o.critical.by_kind.get("wait", 0.0) == pytest.approx(0.0, abs=1e-6)
        assert 0 <= o.concurrent_us <= min(o.cube_busy_us, o.vec_busy_us) + 1e-9
        # (the period over so few chunks may still include the pipeline's fill, so it is not held to the
        # per-chunk bound here; tests/studies/test_overlap_of_designs.py does over 8 chunks of v3)
        assert o.period_us is None if c["chunks"] == 1 else o.period_us > 0


def test_the_critical_path_walked_on_its_own(toy_profile):
    """npusim.output.critical_path on the hand-worked timeline above: the same walk back from Q2."""
    cp = critical_path(simulate(toy(), toy_profile(slots=2), chunks=3))
    assert [(s.name, s.chunk, s.via) for s in cp.steps] == [
        ("P", 0, "data"), ("sync1", 0, "unit"), ("sync1", 1, "unit"), ("sync1", 2, "data"), ("Q", 2, "end")]
    assert cp.length_us == pytest.approx(15) and cp.syncs == 3
