"""Grouped value heads in the timing (python -m kda.run --value-heads HV): a work item is one q/k head with
its HV/H value heads, which load the q/k tile from GM once; the numerics give each value head its group's
q and k. No timings here: GM bytes, counts and parity."""
from __future__ import annotations

import json

import pytest

from kda.cli.run import main
from kda.settings import Settings
from kda.studies.evaluate import evaluate
from kda.settings.inputs import make_settings_inputs
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


QK_TILE = 64 * 128 * 2          # one chunk's q (or k) of one q/k head: 64 tokens x d_k 128 x 2 B (bf16)
V_TILE = 64 * 128 * 2           # one chunk's v of one value head: 64 tokens x d_v 128 x 2 B


def _timed(version: str, value_heads: int):
    s = Settings(heads=2, value_heads=value_heads, chunks=1, d_k=128, d_v=128, numerics=False, keep_trace=False)
    r = evaluate(version, s)
    assert r.workspace_error is None and r.capacity_error is None and r.design_report is not None
    return r


def _gm_reads(graph, name: str) -> list[int]:
    """Bytes of each phase's GM load of input `name` (one per reading phase), per work item and chunk."""
    meta = graph.tensors.get(name)
    return [] if meta is None or meta.origin != "gm" else [meta.nbytes] * len(meta.readers)


@pytest.mark.parametrize("version", ["v1", "v2", "v3", "v4", "v5", "v6", "fla", "mform"])
def test_every_design_times_grouped_heads_at_d128(version):
    """At d = 128 (where one value head's buffers nearly fill the UB) every design times 2 q/k heads with 4
    value heads: q and k cost the same GM bytes as with 2 value heads (one 16 KiB tile per reading phase),
    v, the state and everything else per value head twice as much, and the latency grows by less than 2x."""
    one, two = _timed(version, 2), _timed(version, 4)
    for pr1, pr2 in zip(one.design_run.passes, two.design_run.passes):
        g1, g2 = pr1.run.template.graph, pr2.run.template.graph
        qk1 = _gm_reads(g1, "Q") + _gm_reads(g1, "K")
        assert qk1 == _gm_reads(g2, "Q") + _gm_reads(g2, "K")
        assert all(b == QK_TILE for b in qk1)
        assert _gm_reads(g2, "V") == [2 * b for b in _gm_reads(g1, "V")] and all(b == V_TILE for b in _gm_reads(g1, "V"))
        if g1.state is not None:
            assert g2.state.nbytes == 2 * g1.state.nbytes == 2 * 128 * 128 * (4 if g1.state.dtype == "fp32" else 2)
        per_item = lambda g: sum(p.gm_read_bytes + p.gm_write_bytes for p in g.phases)
        assert per_item(g2) - sum(qk1) == 2 * (per_item(g1) - sum(qk1))      # all but q and k doubles
        for plan in pr2.run.template.plans:        # a phase iterating its value heads loads q/k once per tile
            phase, loads = g2.phase(plan.phase), dict(plan.loads)
            for lo in (lo for lo in phase.locals if lo.name in ("Q", "K") and lo.source == "gm" and plan.parts > 1):
                n = plan.tiles          # n column tiles of ceil(128 / n) columns, each 64-token row padded to 32 B
                assert loads[lo.name] == (QK_TILE * n if lo.whole else n * 64 * -(-(-(-128 // n) * 2) // 32) * 32)
    assert one.design_run.latency_us < two.design_run.latency_us < 2 * one.design_run.latency_us


def test_version_all_with_value_heads_times_every_design(capsys):
    runs = run_json(capsys, "--version", "all", "--no-numerics", "--heads", "2", "--value-heads", "4",
                    "--chunks", "1")
    assert len(runs) == 8
    assert all(r["value_heads"] == 4 and r["layer"] is not None and r["capacity_error"] is None
               and r["workspace_error"] is None for r in runs)
