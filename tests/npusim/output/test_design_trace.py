"""Traces of multi-pass designs, against the toy timings of test_schedule.py:
three items of (P 1 us on the Vector, sync 4 + 1 us, Q 1 us on the Cube) on three cores take 7 us a
pass; the toy profile's launch costs 0 and its barrier 1 us."""
import json

import pytest

from npusim import build_template; from npusim.output import chrome_trace
from npusim.model.multipass import simulate_design
from npusim.model.schedule import BARRIER, CHUNKS, Design, Pass
from tests.npusim.model.test_engine import toy
from tests.conftest import toy_program


@pytest.fixture
def design_run(toy_profile):
    p = toy_profile(cores=3)
    design = Design("two", (Pass("a", toy_program(), CHUNKS), Pass("b", toy_program(), CHUNKS, BARRIER)))
    return simulate_design(design, [build_template(toy(), p)] * 2, p, [3])


def test_the_schedule_track_shows_the_launch_the_passes_and_the_barrier(design_run, tmp_path):
    trace = chrome_trace.write(tmp_path / "t.json", design_run, labels=["two"])
    assert chrome_trace.check(trace) == []
    sched = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"].startswith("schedule")]
    spans = [(e["name"].split()[0], round(e["ts"]), round(e["ts"] + e["dur"])) for e in sched]
    assert spans == [("a", 0, 7), ("barrier", 7, 8), ("b", 8, 15)]        # a launch of 0 us is not drawn
    # every pass's phases sit inside its span: pass b's P starts after the barrier, on each of three cores
    b_starts = sorted(e["ts"] for e in trace["traceEvents"]
                      if e["ph"] == "X" and e["name"].startswith("P") and e["ts"] >= 7.5)
    assert len(b_starts) == 3 and b_starts[0] == pytest.approx(8.0, abs=1e-3)
    names = {e["args"]["name"].split(" (")[0] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert {"two · a · AI core 0", "two · b · AI core 2", "two · schedule"} <= names
    assert json.loads((tmp_path / "t.json").read_text())["metadata"]["designs"][0]["passes"][1]["boundary"] == "barrier"
