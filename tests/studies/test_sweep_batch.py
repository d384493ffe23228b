"""Sweep points that differ only in profile fields: recorded once per design and shape, replayed on each
profile, and every row (and cache line) the same as each point evaluated on its own."""
import pytest

import kda.studies.evaluate as evaluate_module
from kda.sweep import parse_spec, run_sweep
from kda.sweep.runner import groups

pytest.importorskip("pandas")

# timing only, 3 chunks of 64 on the document's profile: every column kept (no metrics)
PROFILE_AXES = {"numerics": False,
                "axes": {"version": ["v3", "fla"], "chunk-size": [64, 256],
                         "sync.latency_us": [0.1, 0.3, 0.5, 1.0, 2.0]},
                "fixed": {"profile": "seed-doc", "chunks": 3}}


def _recordings(monkeypatch) -> list:
    """Every recording of phase graphs for timing (evaluate's timed_graphs), by design."""
    calls, real = [], evaluate_module.timed_graphs

    def counted(design, settings, precision):
        calls.append(design.name)
        return real(design, settings, precision)
    monkeypatch.setattr(evaluate_module, "timed_graphs", counted)
    return calls


def _both_ways(spec: dict, tmp_path, monkeypatch):
    recorded = _recordings(monkeypatch)
    batched = run_sweep(parse_spec(spec), cache=tmp_path / "batched.jsonl")
    n_batched = len(recorded)
    alone = run_sweep(parse_spec(spec), cache=tmp_path / "alone.jsonl", batch=False)
    assert (batched.ran, alone.ran) == (len(alone.rows), len(alone.rows))
    assert batched.rows == alone.rows             # every column, every value, in the same order
    assert [list(r) for r in batched.rows] == [list(r) for r in alone.rows]
    # each row cached under its own point's key with its digest: the same lines, in the same order
    assert (tmp_path / "batched.jsonl").read_bytes() == (tmp_path / "alone.jsonl").read_bytes()
    return batched.rows, n_batched, len(recorded) - n_batched


def test_profile_axes_are_recorded_once_per_design_and_shape_with_the_same_rows(tmp_path, monkeypatch):
    rows, batched, alone = _both_ways(PROFILE_AXES, tmp_path, monkeypatch)
    assert len(rows) == 20 and alone == 20
    assert batched == 4                           # one recording per design and chunk size
    # fla at chunk 256: its workspace plan does not fit a slot on any of the profiles: five failed rows
    fla256 = [r for r in rows if r["version"] == "fla" and r["chunk_size"] == 256]
    assert len(fla256) == 5 and all(r["status"] == "failed" and "slot" in r["error"] for r in fla256)
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok and all(r["profile_overrides.sync.latency_us"] == r["sync.latency_us"] for r in ok)
    # the override reaches the replay: v3 at chunk 64, serial: each of its syncs pays 1.9 us more per chunk
    # at 2.0 than at 0.1 (3 chunks x its syncs per chunk)
    v3 = {r["sync.latency_us"]: r for r in rows if r["version"] == "v3" and r["chunk_size"] == 64}
    syncs = v3[0.1]["layer.syncs_per_chunk"]
    assert v3[2.0]["layer.serial_us"] - v3[0.1]["layer.serial_us"] == pytest.approx(3 * syncs * 1.9)


def test_a_structural_field_gives_the_same_rows_either_way(tmp_path, monkeypatch):
    spec = {"numerics": False, "axes": {"chip.ai_cores": [1, 2], "workspace.slots": [2, 3]},
            "fixed": {"profile": "seed-doc", "chunks": 2, "heads": 2, "version": "v3"}}
    rows, batched, alone = _both_ways(spec, tmp_path, monkeypatch)
    assert (batched, alone) == (1, 4)
    assert [r["layer.cores_used"] for r in rows] == [1, 1, 2, 2]


def test_points_with_numerics_or_another_shape_run_on_their_own():
    numerics = parse_spec({"axes": {"sync.latency_us": [0.5, 1.0]}, "fixed": {"profile": "seed-doc", "chunks": 1}})
    assert [len(t) for t in groups(numerics.points())] == [1, 1]
    timing = parse_spec({"numerics": False, "axes": {"chunks": [1, 2], "sync.latency_us": [0.5, 1.0, 2.0]},
                         "fixed": {"profile": "seed-doc"}})
    assert [[p.index for p in t] for t in groups(timing.points())] == [[0, 1, 2], [3, 4, 5]]
