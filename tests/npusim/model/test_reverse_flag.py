"""A flag into the next work item (`npu.sync(after=..., next_item=True)`): Catlass's depth-1 WithReverse flag,
by which the unit that set a done flag waits, before its next item, for the other unit to pass its wait.
Timings worked out by hand on the toy profile of test_engine.py (Vec 1e5 elements/us, Cube 1e6 MACs/us,
links 1000 B/us, sync latency 1 us, GM free)."""
import numpy as np
import pytest

from npusim import build_template, phase_program, simulate
from npusim.chip.lanes import stack
from npusim.errors import DataflowError
from npusim.model.multipass import simulate_design
from npusim.model.schedule import single_pass
from npusim.model.whatif.retime import compile_schedule, node_params, retime
from npusim.model.whatif.runs import CompiledRuns, NotServed
from npusim.model.whatif.structure import Model

from tests.conftest import randn, record

A, W, X = randn(1, 1000, 1), randn(1, 1000, 1000, seed=1), randn(1, 1000, 100, seed=2)


def done_then_vector(reverse: bool):
    return record(done_program(reverse), a=A, w=W, x=X)


def done_program(reverse: bool):
    """Q (Cube): z = a^T w, 1e6 MACs = 1 us; z [1, 1000] fp32 = 4000 B: the done flag 4 us on the link + 1 us;
    R (Vec): x + z^T over [1000, 100], 1 us. With `reverse`, the Vector unit passing its wait (an empty phase)
    flags the Cube, which waits for it before its next item's Q: 0 B, the 1 us latency alone."""
    @phase_program("done", returns=("o",))
    def program(npu, a, w, x):
        with npu.cube("Q"):
            z = a.mT @ w
        npu.sync(z)
        if reverse:
            with npu.vec("passed"):
                pass
            npu.sync(after="passed", next_item=True)
        with npu.vec("R"):
            o = x + z.mT
        return o
    return program


def spans(run):
    return {(e.chunk, e.name): (round(e.start, 9), round(e.end, 9)) for e in run.trace.events()}


def test_without_the_flag_the_cube_runs_ahead(toy_profile):
    s = spans(simulate(done_then_vector(False), toy_profile(slots=8), chunks=3))
    # Q back to back; the done flags queue on the link: 1-5, 5-9, 9-13, each + 1 us; R after each
    assert [s[(c, "Q")] for c in range(3)] == [(0, 1), (1, 2), (2, 3)]
    assert [s[(c, "R")] for c in range(3)] == [(6, 7), (10, 11), (14, 15)]


def test_the_reverse_flag_keeps_the_cube_one_item_ahead(toy_profile):
    run = simulate(done_then_vector(True), toy_profile(slots=8), chunks=3)
    s = spans(run)
    # item 0: Q 0-1, done 1-5 (+1: 6), the Vector passes its wait at 6, its flag back arrives at 7: item 1's
    # Q runs 7-8, its done 8-12 (+1: 13), the flag back 13 -> 14: item 2's Q 14-15, done 15-19 (+1), R 20-21
    assert [s[(c, "Q")] for c in range(3)] == [(0, 1), (7, 8), (14, 15)]
    assert [s[(c, "passed")][0] for c in range(3)] == [6, 13, 20]
    assert [s[(c, "R")] for c in range(3)] == [(6, 7), (13, 14), (20, 21)]
    assert run.makespan_us == pytest.approx(21.0)


def test_the_flag_is_an_edge_into_the_next_item(toy_profile):
    graph = done_then_vector(True)
    flag = graph.syncs[-1]
    assert flag.next_item and flag.producer == "passed" and flag.consumer == "Q" and flag.direction == "vec->cube"
    tpl = build_template(graph, toy_profile())
    q = next(n.index for n in tpl.nodes if n.name == "Q")
    assert (next(n.index for n in tpl.nodes if n.name == flag.name), q) in tpl.war_edges
    assert tpl.nodes[q].deps == ()                 # nothing inside its own item
    assert "into the next item's Phase Q" in graph.describe()


def test_a_flag_into_the_next_item_carries_no_tensors():
    @phase_program("bad", returns=("o",))
    def program(npu, a, w, x):
        with npu.cube("Q"):
            z = a.mT @ w
        npu.sync(z)
        with npu.vec("R"):
            o = x + z.mT
        npu.sync(o, next_item=True)
        return o
    with pytest.raises(DataflowError, match="into the next item carries tensors"):
        record(program, a=A, w=W, x=X)


def test_the_fast_replays_follow_the_flag(toy_profile):
    """The compiled model and re-timing make the event model's decisions with the flag's edge as well."""
    graph = done_then_vector(True)
    profiles = [toy_profile(latency=x, slots=8) for x in (1.0, 0.5, 2.0)]
    stacked = stack(profiles)
    run = simulate(build_template(graph, profiles[0]), profiles[0], chunks=4, sequences=2, trace=False,
                   record=True)
    params = node_params(build_template(graph, stacked), stacked, False, len(profiles))
    compiled = Model.of_run(run).replay(params, np.arange(len(profiles)))
    fast = retime(compile_schedule(run), params)
    for i, p in enumerate(profiles):
        want = simulate(build_template(graph, p), p, chunks=4, sequences=2, trace=False).makespan_us
        assert compiled[i] == want
        assert not fast.ok[i] or fast.makespan_us[i] == want
    # latency 2, the 8 items one after another on the one core: Q 1, done 4 + 2, the flag back 2 (the Cube
    # waits for it after its last item too)
    assert want == pytest.approx(8 * (1 + 4 + 2 + 2))


def test_a_flag_into_the_next_item_is_refused_with_interleaved_sequences(toy_profile):
    with pytest.raises(ValueError, match="flag into the next item .* interleave 1"):
        simulate(done_then_vector(True), toy_profile(slots=8), chunks=2, sequences=2, interleave=2)


def test_the_compiled_runs_serve_the_flag_and_leave_interleaving_to_the_event_model(toy_profile):
    """The compiled model's runs are the event model's with the flag (two cores sharing a 2 GB/s HBM); with
    two sequences interleaved, which the event model refuses, it says it cannot serve them."""
    program = done_program(True)
    design, p = single_pass(program), toy_profile(slots=8, cores=2, chip_bw=2)
    tpls = [build_template(record(program, a=A, w=W, x=X), p)]
    fast = CompiledRuns(design, [4, 3, 2]).design_run(tpls, p).passes[0].run
    exact = simulate_design(design, tpls, p, [4, 3, 2], trace=False).passes[0].run
    assert (fast.makespan_us, list(fast.busy_us.items()), fast.shared_us) == \
        (exact.makespan_us, list(exact.busy_us.items()), exact.shared_us)
    assert exact.shared_us["hbm"] > 0
    with pytest.raises(NotServed, match="refuses"):
        CompiledRuns(design, [4, 3, 2], interleave=2).design_run(tpls, p)
