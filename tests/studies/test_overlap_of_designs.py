"""Overlap metrics of a design's run (npusim/output/overlap.py on v3): consistent with the run, and written into
its JSON."""
import pytest

from npusim.output.overlap import analyse

from kda.settings import Settings
from kda.studies.evaluate import evaluate


def test_v3_metrics_are_consistent_and_in_the_json():
    r = evaluate("v3", Settings(chunks=8, chunk_size=32, d_k=64, d_v=64, profile="seed-doc"))
    o = analyse(r.pipelined)
    assert o.critical.length_us == pytest.approx(r.pipelined.makespan_us)
    assert sum(o.critical.by_kind.values()) == pytest.approx(r.pipelined.makespan_us)
    assert 0 <= o.concurrent_us <= min(o.cube_busy_us, o.vec_busy_us)
    assert o.period_bound_us <= o.period_us + 1e-9 and 0 < o.period_efficiency <= 1
    # the report's busy time per unit is the merged busy time here (a unit runs one thing at a time)
    assert o.cube_busy_us == pytest.approx(r.report.busy_us["cube"])
    j = r.to_json()["pipeline"]["overlap"]
    assert j["concurrent_us"] == pytest.approx(o.concurrent_us)
    assert j["critical"]["sync_us"] == pytest.approx(o.critical.sync_us) and "steps" not in j["critical"]
    assert set(j["idle"]) == {"cube", "vec", "link:vec->cube", "link:cube->vec"}

