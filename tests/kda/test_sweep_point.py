"""A sweep's point: one evaluation flattened into one row; a point that fails is a row naming why (cacheable
when the input is at fault), never an exception; points that differ only in profile fields, recorded once,
give the rows each would give alone."""
import math
from pathlib import PurePosixPath

import pytest

from kda.settings import Settings
from kda.sweep.point import FAILED, OK, _overflow_text, _parity_text, flatten, run_point, run_points

SMALL = dict(chunks=2, profile="ascend-910b2", chunk_size=16, d_k=32, d_v=32)


def test_flatten_makes_dotted_columns_and_lists_json_cells():
    data = {"a": 1, "b": {"c": 2.5, "d": {"e": "x"}}, "f": [1, 2], "g": {}, "h": float("inf"), "i": (3,)}
    assert flatten(data) == {"a": 1, "b.c": 2.5, "b.d.e": "x", "f": "[1, 2]", "g": None, "h": float("inf"),
                             "i": "[3]"}


def test_flatten_writes_what_json_cannot_hold_inside_a_list_as_its_text():
    assert flatten({"paths": [PurePosixPath("a/b"), 2]}) == {"paths": '["a/b", 2]'}


def test_a_point_that_fails_parity_says_so_with_both_errors():
    p = {"pass": False, "rel_rms_err": 0.01234, "state": {"rel_rms_err": None}, "note": "bf16 state"}
    assert _parity_text(p) == "fails parity: output rel RMS 0.0123, final state inf/NaN (bf16 state)"
    assert _parity_text({"pass": True, "rel_rms_err": 0.5}) is None
    assert _parity_text(None) is None


def test_an_overflow_names_the_tensor_where_and_chunk():
    o = {"tensor": "S_new", "phase": "G", "chunk": 3}
    assert _overflow_text(o) == "overflow: inf/NaN first in S_new (G, chunk 3)"
    assert _overflow_text({**o, "where": "sync ③"}) == "overflow: inf/NaN first in S_new (sync ③, chunk 3)"
    assert _overflow_text(None) is None


def test_a_bad_version_is_a_failed_cacheable_row_not_an_exception():
    row, cacheable = run_point("no-such-design", Settings(**SMALL))
    assert row["status"] == FAILED and cacheable
    assert "unknown version 'no-such-design'" in row["error"]
    assert set(row) == {"status", "error"}


def test_a_bad_profile_field_is_a_failed_row_naming_it():
    row, cacheable = run_point("v3", Settings(**SMALL, numerics=False, overrides={"no_such_field": 1}))
    assert row["status"] == FAILED and cacheable
    assert "no_such_field" in row["error"]


@pytest.fixture(scope="module")
def v3_row():
    return run_point("v3", Settings(**SMALL))


def test_a_good_point_is_ok_with_its_settings_as_columns(v3_row):
    row, cacheable = v3_row
    assert row["status"] == OK and row["error"] is None and cacheable
    assert (row["version"], row["chunks"], row["chunk_size"], row["d_k"], row["d_v"]) == ("v3", 2, 16, 32, 32)
    assert row["tokens"] == 2 * 16                   # chunks x chunk_size
    assert row["parity.pass"] is True and row["safe"] is True
    assert not any(isinstance(v, dict) for v in row.values())


def test_the_workspace_holds_the_fp32_state_and_its_slots(v3_row):
    row, _ = v3_row
    assert row["workspace_kib.resident"] == pytest.approx(32 * 32 * 4 / 1024)     # d_k x d_v fp32: 4 KiB
    # needed = resident + slots x slot, with the profile's two ping/pong slots
    assert row["workspace_kib.needed"] == pytest.approx(row["workspace_kib.resident"] + 2 * row["workspace_kib.slot"])


def test_points_differing_in_profile_fields_give_the_rows_each_gives_alone():
    base = dict(SMALL, numerics=False)
    variants = [Settings(**base, overrides={"sync.latency_us": v}) for v in (0.5, 2.0)]
    rows, notes = run_points("v3", variants)
    assert isinstance(notes, list) and len(rows) == 2
    for (row, cacheable), s in zip(rows, variants):
        alone, _ = run_point("v3", s)
        assert cacheable and row["status"] == OK
        assert row["layer.latency_us"] == pytest.approx(alone["layer.latency_us"], rel=1e-9)
    slow, fast = rows[1][0]["layer.latency_us"], rows[0][0]["layer.latency_us"]
    assert math.isfinite(slow) and slow > fast       # a slower hand-off cannot shorten the layer
