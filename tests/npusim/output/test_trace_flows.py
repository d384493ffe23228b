"""A trace's arrows: one per hand-off and per state hand-off, named with tensors and bytes, each end on a child
slice of its phase (arrows in at its start, arrows out at its end, 1 ns inside it)."""
from npusim import RIDE, build_template, simulate
from npusim.output import chrome_trace
from npusim.output.trace_flows import KIB, anchors

from tests.npusim.model.test_engine import stateful, toy


def _x(name, cat, pid, tid, s, e, args, **extra):
    return {"name": name, "cat": cat, "s": s, "e": e, **extra}


def test_anchors_in_at_start_out_at_end_one_child_each():
    ins = [(1, "a", "sync", {})]
    outs = [(2, "b", "sync", {}), None, (3, "c", "state", {})]
    evs = anchors(0, 0, 0, 100, ins, outs, _x)
    # 4 ends on a 100 ns phase: each child min((100 - 1) // 4, 100 // 4) = 24 ns wide
    assert [(e["name"], e["s"], e["e"], e["bind_id"]) for e in evs] == [
        ("→ a", 0, 24, 1), ("b →", 75, 99, 2), ("c →", 27, 51, 3)]
    assert evs[0]["flow_in"] and evs[1]["flow_out"] and evs[2]["cat"] == "flow-out,state"
    assert anchors(0, 0, 0, 100, [], [], _x) == []
    # a 1 ns phase has no room: zero-width children at its start
    assert [(e["s"], e["e"]) for e in anchors(0, 0, 5, 6, ins, outs[:1], _x)] == [(5, 5), (5, 5)]


def _arrows(run):
    return sorted(e["name"] for e in chrome_trace.build(run)["traceEvents"] if e.get("flow_out"))


def test_one_arrow_per_sync_and_chunk_named_with_its_bytes(toy_profile):
    run = simulate(toy(), toy_profile(), chunks=2)
    # y [1000, 1] fp32 = 4000 B = 4000 / 1024 KiB
    assert 4000 / KIB == 3.90625
    assert _arrows(run) == ["① y · 3.90625 KiB →"] * 2


def test_state_arrow_from_one_chunk_to_the_next(toy_profile):
    p = toy_profile()
    run = simulate(build_template(stateful(), p, RIDE), p, chunks=2)
    names = _arrows(run)
    # S [1000, 10] fp32 = 40000 B = 39.0625 KiB, riding on sync ① from chunk 1 on: one state arrow
    assert sum(n.startswith("S ") for n in names) == 1
    assert "S S_new→S · 39.0625 KiB (rides on ①) →" in names
    assert sum("①" in n and not n.startswith("S ") for n in names) == 2        # ① in each chunk
