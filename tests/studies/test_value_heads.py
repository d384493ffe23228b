"""Grouped value heads in the timing (python -m kda.run --value-heads HV): a work item is one q/k head with
its HV/H value heads, which load the q/k tile from GM once; the numerics give each value head its group's
q and k. No timings here: GM bytes, counts and parity."""
from __future__ import annotations

import json

import pytest

from kda.cli.run import main
from kda.studies.evaluate import Settings, evaluate, make_settings_inputs
from kda.studies.timing import chunk_counts, floor_bytes


def run_json(capsys, *args):
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_group_loads_q_and_k_once(capsys):
    """v3 reads each chunk's q and k from GM once per work item: 4 value heads over 2 q/k heads save the
    q and k of 2 heads, 256 tokens x 2 heads x (q, k) x 128 x 2 bytes (bf16) = 262,144 bytes, and nothing else."""
    args = ("--version", "v3", "--chunks", "4", "--no-numerics")
    per_value_head = run_json(capsys, *args, "--heads", "4")
    grouped = run_json(capsys, *args, "--heads", "2", "--value-heads", "4")
    assert per_value_head["layer"]["hbm_bytes"] - grouped["layer"]["hbm_bytes"] == 256 * 2 * 2 * 128 * 2
    assert grouped["value_heads"] == 4 and grouped["heads"] == 2 and grouped["layer"]["cores_used"] == 2  # 2 items
    assert per_value_head["value_heads"] == 4 and per_value_head["layer"]["cores_used"] == 4
    sync_bytes = lambda d: d["programs"][0]["sync_bytes_per_chunk"]
    assert sync_bytes(grouped) == [2 * b for b in sync_bytes(per_value_head)]          # hand-offs per value head


def test_floor_counts_q_and_k_per_qk_head():
    s = Settings(batch=1, heads=2, value_heads=4, chunks=1, chunk_size=64, d_k=128, d_v=64, dtype="bf16")
    T = 64
    by_hand = T * (2 * 2 * 128 * 2 + 4 * (2 * 64 * 2 + 129 * 4)) + 2 * 4 * 128 * 64 * 4
    assert floor_bytes(s, "bf16") == by_hand
    assert chunk_counts(s) == [1, 1]                  # one work item per q/k head


def test_grouped_numerics_share_q_and_k_and_pass_parity():
    s = Settings(batch=1, heads=2, value_heads=4, chunks=2, chunk_size=32, d_k=32, d_v=32, dtype="fp32")
    x = make_settings_inputs(s)
    assert x.q.shape[2] == 4 and (x.q[:, :, 0] == x.q[:, :, 1]).all() and (x.k[:, :, 2] == x.k[:, :, 3]).all()
    assert not (x.q[:, :, 1] == x.q[:, :, 2]).all() and not (x.v[:, :, 0] == x.v[:, :, 1]).all()
    r = evaluate("v3", s)
    assert r.passed and r.design_report is not None and r.design_run.sequences == 2


@pytest.mark.parametrize("args, message", [
    (["--heads", "2", "--value-heads", "3"], "--value-heads must be a positive multiple of --heads 2, got 3"),
    (["--value-heads", "0"], "--value-heads must be a positive multiple of --heads 1, got 0"),
    (["--value-heads", "2", "--backward"], "--value-heads sets generated inputs and times the forward"),
])
def test_bad_value_heads_exit_2_with_one_line(capsys, args, message):
    assert main(["--chunks", "1", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
