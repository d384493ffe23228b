"""--trace FILE.pftrace: the Chrome trace's events in Perfetto's protobuf format (npusim/output/perfetto_trace.py),
read back with the perfetto package's own message classes: every slice a begin and an end that close in the
JSON's nesting on its track, every arrow a flow from its producer's end to its consumer's, every counter
series a counter track, names and args interned."""
from collections import Counter, defaultdict

import pytest

from npusim.output import chrome_trace, perfetto_trace

from kda.cli.run import main
from kda.settings import Settings
from kda.studies.evaluate import evaluate


@pytest.fixture(scope="module")
def both():
    pytest.importorskip("perfetto")
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace
    r = evaluate("v6", Settings(chunks=5, heads=4, cores=2, interleave=2, chunk_size=16, d_k=32, d_v=32,
                                numerics=False))
    trace = chrome_trace.build(r.design_run, heads=4)
    return trace, Trace.FromString(perfetto_trace.encode(trace))


def _strings(packets):
    """Interned strings by table and id, as the packets define them."""
    out = defaultdict(dict)
    for p in packets:
        for table in ("event_names", "event_categories", "debug_annotation_names"):
            for entry in getattr(p.interned_data, table):
                out[table][entry.iid] = entry.name
        for entry in p.interned_data.debug_annotation_string_values:
            out["strings"][entry.iid] = entry.str.decode()
    return out


def test_every_slice_opens_and_closes_on_its_track_as_in_the_json(both):
    trace, pb = both
    packets = list(pb.packet)
    tracks = {p.track_descriptor.uuid: p.track_descriptor for p in packets if p.HasField("track_descriptor")}
    thread_names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
                    if e["ph"] == "M" and e["name"] == "thread_name"}
    strings = _strings(packets)
    opened, got = defaultdict(list), Counter()
    for p in packets:
        te = p.track_event
        if not p.HasField("track_event") or te.type == te.TYPE_COUNTER:
            continue
        name = tracks[te.track_uuid].name
        if te.type == te.TYPE_SLICE_BEGIN:
            opened[te.track_uuid].append((p.timestamp, strings["event_names"][te.name_iid]))
        else:                                  # an end closes the last slice opened on its track
            start, title = opened[te.track_uuid].pop()
            got[(name, title, start, p.timestamp)] += 1
    want = Counter()
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            s = int(e["ts"] * 1000)
            want[(thread_names[(e["pid"], e["tid"])], e["name"], s, s + int(e["dur"] * 1000))] += 1
    assert got == want and all(not v for v in opened.values())


def test_arrows_are_flows_and_counters_are_counter_tracks(both):
    trace, pb = both
    packets = list(pb.packet)
    outs = {e["bind_id"] for e in trace["traceEvents"] if e.get("flow_out")}
    ins = {e["bind_id"] for e in trace["traceEvents"] if e.get("flow_in")}
    flows = [fid for p in packets for fid in p.track_event.flow_ids]
    ends = [fid for p in packets for fid in p.track_event.terminating_flow_ids]
    assert outs and sorted(flows) == sorted(outs) and sorted(ends) == sorted(ins) == sorted(outs)
    counters = [p for p in packets if p.HasField("track_event") and p.track_event.type == p.track_event.TYPE_COUNTER]
    assert len(counters) == sum(len(e["args"]) for e in trace["traceEvents"] if e["ph"] == "C")
    # a phase's args come back by their interned names, a string by its interned value
    strings = _strings(packets)
    phase = next(p for p in packets if p.track_event.type == p.track_event.TYPE_SLICE_BEGIN
                 and strings["event_categories"][p.track_event.category_iids[0]].startswith("phase"))
    args = {strings["debug_annotation_names"][a.name_iid]: a for a in phase.track_event.debug_annotations}
    phase_name = strings["strings"][args["phase"].string_value_iid]
    assert strings["event_names"][phase.track_event.name_iid].startswith(phase_name + "[")
    assert args["chunk"].int_value == 0


def test_without_the_package_a_pftrace_is_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(perfetto_trace, "available", lambda: False)
    assert main(["--chunks", "2", "--no-numerics", "--trace", str(tmp_path / "t.pftrace")]) == 2
    err = capsys.readouterr().err
    assert "perfetto package" in err and err.count("\n") == 1
