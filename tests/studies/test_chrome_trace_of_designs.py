"""The Chrome trace of a design's run: JSON of the right shape, every phase once per chunk and sequence on each
of its tracks, every arrow with both ends on the right phases, timestamps that agree with the report, and
kda-run's --trace."""
import json
from collections import Counter, defaultdict

import pytest

from npusim.output import chrome_trace

from kda.cli.run import main
from kda.settings import Settings
from kda.studies.evaluate import evaluate
from tests.npusim.output.test_chrome_trace import phase_slices


@pytest.fixture(scope="module")
def v3():
    # 2 sequences on 2 AI cores, 2 Vector units per core; small shapes keep the numerics quick
    return evaluate("v3", Settings(chunks=5, heads=2, chunk_size=16, d_k=32, d_v=32, profile="ascend-910b2"))


@pytest.fixture(scope="module")
def trace(v3):
    return chrome_trace.build(v3.pipelined, heads=2)


def thread_names(trace):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
            if e["ph"] == "M" and e["name"] == "thread_name"}


def test_trace_is_valid_json_of_the_right_shape(v3, tmp_path):
    path = tmp_path / "t.json"
    chrome_trace.write(path, v3.pipelined, heads=2)
    trace = json.loads(path.read_text(encoding="utf-8"))
    assert set(trace) == {"traceEvents", "displayTimeUnit", "metadata"}
    assert {e["ph"] for e in trace["traceEvents"]} == {"X", "M", "C"}
    assert chrome_trace.check(trace) == []
    meta = trace["metadata"]
    assert (meta["version"], meta["profile"], meta["dtype"], meta["mode"]) == ("v3", "ascend-910b2", "bf16",
                                                                              "pipelined")
    # one process per AI core; Cube, Vec0, Vec1, the links and the workspace slots as threads
    procs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert sorted(procs) == [1, 2] and all("AI core" in n and "v3" in n for n in procs.values())
    names = set(thread_names(trace).values())
    assert {"Cube", "Vec0", "Vec1", "link Vec→Cube", "link Cube→Vec", "workspace ping", "workspace pong"} <= names


def test_every_phase_appears_once_per_chunk_and_sequence_on_each_of_its_tracks(v3, trace):
    names = thread_names(trace)
    seen = Counter((e["args"]["phase"], e["args"]["sequence"], e["args"]["chunk"], names[(e["pid"], e["tid"])])
                   for e in phase_slices(trace))
    g = v3.execution.graph
    expected = {(p.name, s, c, track): 1 for p in g.phases for s in range(2) for c in range(5)
                for track in (["Cube"] if p.unit == "cube" else ["Vec0", "Vec1"])}
    assert dict(seen) == expected
    d3 = next(e for e in phase_slices(trace) if e["name"] == "D[s1 c3]")
    assert d3["args"]["macs"] == g.phase("D").macs and d3["args"]["ops"] == len(g.phase("D").ops)
    assert d3["args"]["head"] == 1 and d3["args"]["batch"] == 0
    # D reads M through ③ and the state riding on it; it sends U, WS, O_inter, A_qk_raw through ④
    assert d3["args"]["sync_bytes_in"] == g.syncs[2].nbytes + g.state.nbytes
    assert d3["args"]["sync_bytes_out"] == g.syncs[3].nbytes


def test_every_flow_has_both_ends_from_the_producing_to_the_consuming_phase(v3, trace):
    ends = defaultdict(dict)
    for e in trace["traceEvents"]:
        if "bind_id" in e:
            side = "out" if e.get("flow_out") else "in"
            assert side not in ends[e["bind_id"]]
            ends[e["bind_id"]][side] = e
    g = v3.execution.graph
    syncs = len(g.syncs) * 5 * 2
    state = 4 * 2                                 # chunks 1-4 of both sequences get the state
    assert len(ends) == syncs + state
    assert all(set(d) == {"out", "in"} for d in ends.values())
    # each end sits inside the phase slice it belongs to, on the same thread
    slices = phase_slices(trace)

    def owner(end, phase_name, chunk):
        return [p for p in slices if (p["pid"], p["tid"]) == (end["pid"], end["tid"])
                and p["args"]["phase"] == phase_name and p["args"]["chunk"] == chunk
                and p["ts"] <= end["ts"] and end["ts"] + end["dur"] <= p["ts"] + p["dur"] + 1e-9]
    for d in ends.values():
        a = d["out"]["args"]
        out_chunk = a.get("from_chunk", a["chunk"])
        assert len(owner(d["out"], a["producer"], out_chunk)) == 1
        assert len(owner(d["in"], a["consumer"], a["chunk"])) == 1
        assert d["out"]["ts"] < d["in"]["ts"]
    labels = Counter(d["out"]["args"].get("sync", "S") for d in ends.values())
    assert labels == {**{s.label: 10 for s in g.syncs}, "S": 8}
    one = next(d["out"] for d in ends.values() if d["out"]["args"].get("sync") == "④")
    assert one["name"] == f"④ U, WS, O_inter, A_qk_raw · {g.syncs[3].nbytes / 1024:g} KiB →"


def test_timestamps_agree_with_the_report():
    r = evaluate("v3", Settings(chunks=6, chunk_size=32, d_k=64, d_v=64, profile="seed-doc"))
    trace = chrome_trace.build(r.pipelined)
    assert chrome_trace.check(trace) == []
    ends = [e["ts"] + e["dur"] for e in trace["traceEvents"] if e["ph"] == "X"]
    assert max(ends) == pytest.approx(r.report.pipelined_us - r.report.launch_us, abs=1e-3)
    assert trace["metadata"]["latency_us"] == pytest.approx(r.report.pipelined_us)
    events = {(e.chunk, e.name): e for e in r.pipelined.trace.events()}
    for s in phase_slices(trace):
        e = events[(s["args"]["chunk"], s["args"]["phase"])]
        assert s["ts"] == pytest.approx(e.start, abs=1e-3) and s["dur"] == pytest.approx(e.end - e.start, abs=1e-3)
    # the workspace counter: resident region and the two slots, within the plan
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C" and e["name"] == "workspace KiB"]
    assert set(counters[0]["args"]) == {"resident", "ping", "pong"}
    plan = r.profile.workspace
    assert all(c["args"]["ping"] <= plan.slot_kib and c["args"]["pong"] <= plan.slot_kib for c in counters)
    assert max(c["args"]["ping"] for c in counters) > 0 and counters[0]["args"]["resident"] > 0


def test_two_interleaved_heads_show_their_own_resident_regions_and_slots():
    """Two heads on one core, interleaved: the counter has a resident region and a ping/pong pair for each."""
    one = evaluate("v3", Settings(chunks=4, chunk_size=32, d_k=64, d_v=64, profile="seed-doc", numerics=False))
    two = evaluate("v3", Settings(chunks=4, chunk_size=32, d_k=64, d_v=64, profile="seed-doc", numerics=False,
                                  heads=2, cores=1, interleave=2))
    counters = {}
    for name, r in (("one", one), ("two", two)):
        trace = chrome_trace.build(r.pipelined)
        assert chrome_trace.check(trace) == []
        counters[name] = [e for e in trace["traceEvents"] if e["ph"] == "C" and e["name"] == "workspace KiB"]
    assert set(counters["two"][0]["args"]) == {"resident", "ping", "pong", "slot2", "slot3"}
    assert counters["two"][0]["args"]["resident"] == 2 * counters["one"][0]["args"]["resident"] > 0
    assert all(max(c["args"][s] for c in counters["two"]) > 0 for s in ("ping", "pong", "slot2", "slot3"))


def test_serial_and_several_runs_share_a_file(v3):
    trace = chrome_trace.build([v3.pipelined, v3.serial], labels=["pipelined", "serial"])
    assert chrome_trace.check(trace) == []
    procs = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert len(procs) == 4 and sum("serial" in p for p in procs) == 2
    assert [m["mode"] for m in trace["metadata"]["runs"]] == ["pipelined", "serial"]


def test_cli_writes_a_trace_per_version(tmp_path, capsys):
    path = tmp_path / "all.json"
    small = ["--chunks", "2", "--chunk-size", "16", "--dk", "32", "--dv", "32"]
    assert main(["--version", "all", *small, "--profile", "seed-doc", "--trace", str(path)]) == 0
    trace = json.loads(path.read_text(encoding="utf-8"))
    assert chrome_trace.check(trace) == []
    versions = [m["version"] for m in trace["metadata"]["runs"]]
    from kda.programs import DESIGNS, PROGRAMS
    assert versions[:len(PROGRAMS)] == list(PROGRAMS)           # then each pass of the multi-pass designs
    assert versions[len(PROGRAMS):] == [p.program.name for d in DESIGNS.values() if not d.single for p in d.passes]
    assert [d["design"] for d in trace["metadata"]["designs"]] == list(DESIGNS)
    assert main([*small, "--serial", "--trace", str(path)]) == 0
    assert json.loads(path.read_text(encoding="utf-8"))["metadata"]["mode"] == "serial"
    capsys.readouterr()
    assert main([*small, "--trace", str(tmp_path / "no" / "t.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no directory" in err[0]

