"""The Chrome trace export on npusim's own programs: its check finds slices that do not nest (also as Perfetto
converts microseconds to nanoseconds) and flows without both ends, and any program's trace passes it."""
from hypothesis import HealthCheck, given, settings

from npusim import build_template, simulate; from npusim.output import chrome_trace, trace_events
from npusim.model.engine import PHASE, SYNC
from tests.npusim.model.test_engine_properties import cases, graph_and_profile


def phase_slices(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat", "").startswith("phase")]


def test_check_finds_partial_overlaps_truncation_and_unmatched_flows():
    def x(name, ts, dur, **kw):
        return {"name": name, "ph": "X", "pid": 1, "tid": 1, "ts": ts, "dur": dur, **kw}
    assert chrome_trace.check({"traceEvents": [x("a", 0, 2), x("b", 1, 2)]})          # partial overlap
    assert chrome_trace.check({"traceEvents": [x("a", 0, 2), x("b", 0.5, 1)]}) == []  # nested
    assert chrome_trace.check({"traceEvents": [x("child", 0, 1), x("parent", 0, 2)]})  # parent after child
    # touching in microseconds, but 1.001 x 1000 truncates to 1000 ns: 'b' would start 1 ns inside 'a'
    problems = chrome_trace.check({"traceEvents": [x("a", 0.001, 1.0), x("b", 1.001, 1.0)]})
    assert len(problems) == 1 and problems[0].endswith("(ns)")
    bad = {"traceEvents": [x("a", 0, 1, bind_id=7, flow_out=True)]}
    assert any("flow 7" in p for p in chrome_trace.check(bad))
    twice = {"traceEvents": [x("a", 0, 1, bind_id=7, flow_out=True), x("b", 2, 1, bind_id=7, flow_in=True),
                             x("c", 4, 1, bind_id=7, flow_in=True)]}
    assert any("flow 7" in p for p in chrome_trace.check(twice))
    # the exporter's timestamps survive truncation: every ts lands on its nanosecond
    for ns in (0, 1, 364, 999, 1001, 1023, 123456789):
        assert int(trace_events.to_ts(ns) * 1000) == ns


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_any_program_gives_a_valid_trace(toy_profile, case):
    c = case
    graph, profile = graph_and_profile(toy_profile, c)
    tpl = build_template(graph, profile, c["handoff"])
    for serial in (False, True):
        run = simulate(tpl, profile, chunks=c["chunks"], sequences=c["sequences"], serial=serial)
        trace = chrome_trace.build(run)
        assert chrome_trace.check(trace) == []
        phases = [nd for nd in tpl.nodes if nd.kind == PHASE]
        slices = phase_slices(trace)
        per_track = sum(c["vec"] if nd.resource == "vec" else 1 for nd in phases)
        assert len(slices) == per_track * c["chunks"] * c["sequences"]
        flows = sum(1 for e in trace["traceEvents"] if e.get("flow_out"))
        syncs = sum(1 for nd in tpl.nodes if nd.kind == SYNC)
        state_arrows = (c["chunks"] - 1) * c["sequences"] if tpl.state_mode else 0
        assert flows == (syncs * c["chunks"]) * c["sequences"] + state_arrows
