"""Properties of the event model over random small programs, profiles and run sizes."""
import math
from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npusim import phase_program, run_and_report
from tests.conftest import randn, record


def chain_program(n_phases: int, state_reader: int | None, resident_first: bool, resend_x: bool):
    """Phases alternate units and end on Vec; each reads its predecessor's tensor through a sync.
    The last phase makes the next chunk's state; `state_reader` (a phase index) also reads the state."""
    units = ["vec" if (n_phases - 1 - i) % 2 == 0 else "cube" for i in range(n_phases)]

    @phase_program("random", returns=("S_new",), state=("S", "S_new"), resident=("t[0]",) if resident_first else ())
    def program(npu, x, w, S):
        t = []
        for i, unit in enumerate(units[:-1]):
            with (npu.vec if unit == "vec" else npu.cube)(f"P{i}"):
                src = x if i == 0 else t[-1]
                if unit == "vec":
                    t.append(src * 2.0 + S if i == state_reader else src * 2.0)
                else:
                    t.append(src @ (S if i == state_reader else w))
            npu.sync(t[-1], x) if (resend_x and i == 0) else npu.sync(t[-1])
        with npu.vec(f"P{n_phases - 1}"):
            S_new = t[-1] * 0.5 + S
        return S_new
    return program


@st.composite
def cases(draw):
    n_phases = draw(st.integers(2, 6))
    cube_phases = [i for i in range(n_phases - 1) if (n_phases - 1 - i) % 2 == 1]
    return dict(
        n_phases=n_phases,
        state_reader=draw(st.sampled_from([None, *cube_phases, *[i for i in range(n_phases - 1) if i not in cube_phases]])),
        resident_first=draw(st.booleans()),
        resend_x=draw(st.booleans()),
        n=draw(st.sampled_from([4, 8, 16])),
        chunks=draw(st.integers(1, 5)),
        sequences=draw(st.integers(1, 3)),
        cores=draw(st.integers(1, 2)),
        vec=draw(st.integers(1, 2)),
        slots=draw(st.integers(1, 3)),
        latency=draw(st.sampled_from([0.0, 0.5, 2.0])),
        handoff=draw(st.sampled_from(["ride", "own"])),
    )


def graph_and_profile(toy_profile, c: dict):
    """The recorded graph of a drawn case's program, and its toy profile."""
    n = c["n"]
    program = chain_program(c["n_phases"], c["state_reader"], c["resident_first"], c["resend_x"])
    graph = record(program, state=randn(1, n, n, seed=2), x=randn(1, n, n), w=randn(1, n, n, seed=1))
    return graph, toy_profile(latency=c["latency"], slots=c["slots"], cores=c["cores"], vec=c["vec"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_schedule_respects_units_dependencies_and_workspace(toy_profile, case):
    c = case
    graph, profile = graph_and_profile(toy_profile, c)
    report, run, serial = run_and_report(graph, profile, chunks=c["chunks"], sequences=c["sequences"],
                                         state_handoff=c["handoff"])
    tpl = run.template
    events = run.trace.events()
    assert len(events) == tpl.n * c["chunks"] * c["sequences"]

    # 1. no unit (or link) runs two nodes at once
    by_unit = defaultdict(list)
    for e in events:
        by_unit[(e.core, e.unit)].append((e.start, e.busy_end))
    for spans in by_unit.values():
        spans.sort()
        for (s0, e0), (s1, _) in zip(spans, spans[1:]):
            assert s1 >= e0 - 1e-9

    # 2. no node starts before what it depends on is done: its syncs, the state, earlier readers
    end = {(e.seq, e.chunk, e.index): e.end for e in events}
    for e in events:
        for d in tpl.nodes[e.index].deps:
            assert e.start >= end[(e.seq, e.chunk, d)] - 1e-9
        if e.chunk > 0:
            for a, b in tpl.state_edges + tpl.war_edges:
                if b == e.index:
                    assert e.start >= end[(e.seq, e.chunk - 1, a)] - 1e-9

    # 3. workspace occupancy never exceeds a slot
    cap = profile.workspace.slot_kib * 1024
    assert all(0 <= b <= cap for _, _, _, b in run.trace.occupancy)
    assert all(b == 0 for b in _final_occupancy(run.trace.occupancy))

    # 4. the bound is a lower bound; overlap never loses to no overlap here
    assert report.bound_us <= run.latency_us + 1e-9
    assert run.latency_us <= serial.latency_us + 1e-9
    assert math.isclose(serial.makespan_us, _serial_sum(tpl, c["chunks"], c["sequences"], c["cores"]), rel_tol=1e-9)


def _final_occupancy(samples):
    last = {}
    for t, core, slot, b in samples:
        last[(core, slot)] = b
    return last.values()


def _serial_sum(tpl, chunks, sequences, cores):
    first = sum(n.busy_first_us + n.delay_first_us for n in tpl.nodes)
    rest = sum(n.busy_us + n.delay_us for n in tpl.nodes)
    per_core = -(-sequences // min(cores, sequences))
    return per_core * (first + (chunks - 1) * rest)
