"""kda_chunk_v6 (ascendc_stubs/kda_chunk_v6): the v6 design of kda/programs/v6.py, the one the project recommends,
as one AscendC kernel on the host emulation, held to the Python side as kda_chunk_v5 is: numbers against the fp64
recurrence (Kimi's gates in bf16 and fp16) and against the v6 design itself, the flags and payloads against the
simulator's timed template, the bytes of every hand-off against the simulator's, the calibrated chip's tile plan,
and faults (a removed wait or set) reported as a race or a hang. The build is tests/conftest.py's."""
from __future__ import annotations

import json
from functools import lru_cache

import pytest

from tests.ascendc.kernel_runs import (CHUNK, DK, DV, FP32_AGREEMENT, against_the_recurrence,
                                       assert_core_memories_bound, errors, load_script, racing, run_kernel, write_inputs)
from ascendc_stubs import bridge
from kda.settings import Settings
from kda.studies.evaluate import evaluate
from kda.reference.parity import assert_close
from kda.programs import get_design
from npusim import load_profile
from npusim.model.multipass import templates


@pytest.fixture(scope="session")
def emu(ascendc_build) -> bridge.Build:
    return ascendc_build


def _workspace_plan(transfer_bytes: int, parts: int) -> int:
    """Per-core workspace bytes of KdaChunkV6Tiling's plan (ascendc_stubs/kda_chunk_v6/op_host), for C = 64,
    d_k = d_v = 128: n = 4 sub-chunks, P = 6 pairs, 4-wide micro-chunks with P4 = 6 pairs; every tensor 512-byte
    aligned; SV twice; S_fp32 (fp32) only with 2-byte transfers."""
    C, dk, dv, S, s, n, P, P4, tb = CHUNK, DK, DV, 16, 4, 4, 6, 6, transfer_bytes
    elems = [(n - 1) * S * dk] * 2 + [P * S * dk] + [n * 3 * s * dk] * 2 + [n * P4 * s * dk]   # ①
    elems += [P * S * S] * 2 + [n * P4 * s * s] * 2 + [C * C] * 2                          # ②, A_neg, D_beta
    elems += [n * (n + 1) // 2 * S * S, S * S, C * C]                                       # the inverse, acc, M
    elems += [C * dk, C * dk, C * (parts * dk + C), C * parts * dk, C * dv, C * dv, dk * dv]   # K_scaled .. S_delta
    total = sum(-(-e * tb // 512) * 512 for e in elems)
    total += 2 * (-(-(parts * dk + C) * dv * tb // 512) * 512)                              # SV, twice
    return total + (dk * dv * 4 if tb == 2 else 0)                                          # S_fp32


@lru_cache(maxsize=None)
def _template():
    """The simulator's timed template of v6 (bf16 transfers: the design's default; the order of syncs does not
    depend on the type)."""
    r = evaluate("v6", Settings(chunks=2, heads=1, dtype="bf16"), timing=False)
    return templates(get_design("v6"), r.execution.pass_graphs, load_profile("ascend-910b2"), "ride")[0]


@pytest.fixture(scope="session")
def fp32_run(emu, tmp_path_factory):
    """2 heads x 4 chunks on 3 AI cores (2 used), fp32 hand-offs, slow gates and an initial state."""
    d = tmp_path_factory.mktemp("v6_fp32")
    x, res = run_kernel(emu.runners["v6"], d)
    return d, x, res


@pytest.fixture(scope="session")
def one_core_run(emu, tmp_path_factory):
    """2 heads x 3 chunks back to back on one AI core (an odd count: the copies' parity runs on across the
    sequences), gates given as alpha (Phase A takes Ln), no initial state."""
    d = tmp_path_factory.mktemp("v6_one_core")
    _, res = run_kernel(emu.runners["v6"], d, aic=1, chunks=3, gate_form="alpha", initial_state=False)
    return d, None, res


# ---- numbers ----

def test_the_design_is_one_fused_pass_with_its_own_state_handoff():
    design = get_design("v6")
    assert [(p.name, p.layout) for p in design.passes] == [("v6", "fused")]
    assert _template().state_mode == "own"
    assert [s.label for s in _template().graph.syncs] == ["①", "②", "③", "④", "⑤", "⑥"]


def test_fp32_matches_the_recurrence_and_the_design(fp32_run):
    d, x, res = fp32_run
    assert res.returncode == 0 and not errors(res), errors(res) or res.stderr
    o, ht, _, _ = against_the_recurrence(d)
    sim = evaluate("v6", Settings(heads=2, chunks=4, dtype="fp32", gates="slow", initial_state=True), inputs=x,
                   timing=False)
    assert_close("o against the v6 design", sim.execution.o, o, FP32_AGREEMENT)
    assert_close("final state against the v6 design", sim.execution.final_state, ht, FP32_AGREEMENT)
    assert res.report["exp_max_arg"] is not None and res.report["exp_max_arg"] <= 0.0   # every exp <= 1
    graph = sim.execution.graph
    assert bridge.kernel_sync_bytes(res.report, graph, None) == {s.number: s.nbytes for s in graph.syncs}
    assert res.report["tensor_bytes"]["S"] == graph.state.nbytes
    assert set(res.report["ub_peak_bytes"].values()) == {res.report["ub_plan_bytes"]}
    # 2 + 2 queue buffers and 5 work tiles of 4,096 fp32, gc and scale Q [64, 64] fp32 kept from A for C, gamma_C
    # twice and beta (32-byte aligned), the micro-diagonal sums 2 x (2 x 4 + 4) x 10 x 8 fp32, the ReduceSum work
    assert res.report["ub_plan_bytes"] == 9 * 4096 * 4 + 2 * 64 * 64 * 4 + 2 * 256 + 256 + 1920 * 4 + 32 == 188_704
    assert res.report["ub_plan_bytes"] <= 192 * 1024
    assert res.report["workspace_bytes_per_core"] == _workspace_plan(4, 1)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_16bit_on_kimi_gates_matches_the_recurrence_as_closely_as_the_design(emu, tmp_path, dtype):
    """2-byte hand-offs on FLA's -5*sigmoid gates (~160 nats per chunk overflow v3's exp(-gc) in fp32): no exp has a
    positive argument, and the kernel rounds where the design's hand-offs round. The state is fp32 between chunks
    and two 16-bit parts for the Cube."""
    x, res = run_kernel(emu.runners["v6"], tmp_path, dtype=dtype, gates="kimi")
    assert res.returncode == 0 and not errors(res), errors(res) or res.stderr
    o, ht, p_o, p_s = against_the_recurrence(tmp_path)
    assert res.report["exp_max_arg"] <= 0.0
    sim = evaluate("v6", Settings(heads=2, chunks=4, dtype=dtype, gates="kimi", initial_state=True), inputs=x,
                   timing=False)
    assert p_o.rel_rms_err < 1.25 * sim.parity_o.rel_rms_err
    assert p_s.rel_rms_err < 1.25 * sim.parity_state.rel_rms_err
    # the same bytes per hand-off as the simulator counts, but for Q_scaled: the Cube multiplies it with the state's
    # two 16-bit parts, so it goes out twice, side by side (+ C x d_k x 2 bytes on ③), as in kda_chunk_v4 and v5
    graph = sim.execution.graph
    expected = {s.number: s.nbytes for s in graph.syncs}
    expected[3] += CHUNK * DK * 2
    assert bridge.kernel_sync_bytes(res.report, graph, None) == expected
    # the kernel's state: fp32, as two 16-bit parts for the Cube; v6.py keeps it in fp32 with bf16 transfers only
    # (state_for_bf16), in fp16 with fp16 transfers
    assert res.report["state_dtype"] == "fp32" and res.report["tensor_bytes"]["S"] == 2 * DK * DV * 2
    assert graph.state.dtype == {"bf16": "fp32", "fp16": "fp16"}[dtype]
    assert res.report["workspace_bytes_per_core"] == _workspace_plan(2, 2)


def test_one_core_odd_chunks_alpha_gates(one_core_run):
    d, _, res = one_core_run
    assert res.returncode == 0 and not errors(res), errors(res) or res.stderr
    assert res.report["block_dim"] == 1
    against_the_recurrence(d)


# ---- the flags and payloads ----

@pytest.mark.parametrize("run", ["fp32_run", "one_core_run"])
def test_flags_and_payloads_follow_the_simulators_syncs(run, request):
    """Per core and unit, every chunk's flags come in the template's order (the own state hand-off "S" = sync 0
    included) and each set publishes the simulator's payload of its sync. The AIC runs them chunk after chunk. The
    AIVs run one chunk ahead: chunk t+1's ① and ③ go out before they wait for chunk t's ⑥ (so the Cube's B and D1
    of chunk t+1 run beside G), and S of chunk t+1 after it (G makes the state)."""
    res = request.getfixturevalue(run)[-1]
    tpl = _template()
    expected = bridge.expected_pass_flag_ops(tpl)
    payload = bridge.expected_pass_payloads(tpl)
    blocks, sequences, chunks = res.report["block_dim"], res.report["sequences"], res.report["chunks"]
    recorded = bridge.recorded_flag_ops(res.report)
    assert len(recorded) == 3 * blocks
    for (block, unit, sub), events in recorded.items():
        where = f"core{block} {unit}{sub}"
        chunks_here = len(range(block, sequences, blocks)) * chunks
        ops = [op for op, _ in events]
        assert bridge.by_chunk(ops) == [expected[unit]] * chunks_here, where
        if unit == "AIC":
            assert ops == expected[unit] * chunks_here, where
        else:
            at = {key: [i for i, op in enumerate(ops) if op == bridge.FlagOp(*key)]
                  for key in ((1, "set"), (3, "set"), (6, "wait"), (bridge.STATE_HANDOFF, "set"))}
            for t in range(chunks_here):
                if (t + 1) % chunks == 0:
                    continue                                   # a sequence's last chunk: nothing ahead
                assert at[(1, "set")][t + 1] < at[(3, "set")][t + 1] < at[(6, "wait")][t] < \
                    at[(bridge.STATE_HANDOFF, "set")][t + 1], (where, t)
        for op, wrote in events:
            if op.op == "set":
                assert set(wrote) == payload[op.sync], (where, op.sync)


def test_flag_ids_follow_the_rules(fp32_run):
    """Distinct, within A2's 0-10, clear of the two Matmul objects' [0, 3] and of SyncAll's 11-14; mode 2; set on
    the pipe that wrote the payload (MTE3 on an AIV, FIX on the AIC)."""
    res = fp32_run[-1]
    assert res.report["matmul_objects"] == 2
    ids = list(res.report["sync_flags"].values())
    assert len(set(ids)) == len(ids) == 6 + 1
    assert all(4 <= i <= 10 for i in ids)
    sets = [e for e in res.report["events"] if e["op"] == "set"]
    assert all(e["mode"] == 2 for e in sets)
    assert {e["pipe"] for e in sets if e["unit"] == "AIV"} == {"PIPE_MTE3"}
    assert {e["pipe"] for e in sets if e["unit"] == "AIC"} == {"PIPE_FIX"}


# ---- removed synchronisation is caught, not a silent wrong answer ----


@pytest.mark.parametrize("fault, sync", [("KDA_DROP_WAIT=13", 3), ("KDA_DROP_WAIT=10", bridge.STATE_HANDOFF)])
def test_a_removed_wait_is_reported_as_a_race(emu, tmp_path, fault, sync):
    """Without ③'s wait, D1 reads Ai_diag, A_neg, D_beta and K_scaled unordered; without the state's own hand-off, D2
    reads S while G writes it (③ does not order it: the AIVs make chunk t+1's A and C before chunk t's state)."""
    _, res = run_kernel(emu.faults["v6"][fault], tmp_path)
    assert res.returncode == 3, res.stderr
    payload = bridge.expected_pass_payloads(_template())[sync]
    read_by_d1 = {"Ai_diag", "A_neg", "D_beta", "K_scaled"} if sync == 3 else {"S"}
    assert read_by_d1 <= racing(res) <= payload, racing(res)
    assert any(e["kind"] == "flag" for e in res.report["errors"])   # its sets were never consumed


def test_a_removed_set_is_reported_as_a_hang(emu, tmp_path):
    # 2 s: a shorter wait is reported as a hang where a loaded machine is merely slow (300 ms was, at load 20)
    _, res = run_kernel(emu.faults["v6"]["KDA_DROP_SET=14"], tmp_path, timeout_ms=2000)
    assert res.returncode == 4, res.stderr
    hangs = [e["message"] for e in res.report["errors"] if e["kind"] == "hang"]
    flag4 = res.report["sync_flags"]["4"]
    assert hangs and f"waits on flag {flag4} " in hangs[0] and ".AIV" in hangs[0]


# ---- the calibrated chip's tiles, its capacities, bad input ----

def test_the_phases_the_chip_tiles_are_the_kernels_or_a_near_tie():
    """Every phase the calibrated chip cuts in more than one tile is one the kernel tiles (A), or one it cuts
    finer than fits only to overlap loads with the matmul (D1: it fits whole) for a gain under 1 % of the phase's
    busy time, which the kernel leaves: it runs D1 as one Matmul call (README "Tiling of the real buffers")."""
    plans = bridge.sim_plans("v6", heads=2, chunks=4, dtype="bf16")
    tiled = {k for k, p in plans.items() if p["tiles"] > 1}
    assert tiled - {"A"} <= {"D1"}
    assert {k for k, p in plans.items() if p["fewest_fitting_tiles"] > 1} <= {"A"}
    for k in tiled - {"A"}:
        p = plans[k]
        assert p["busy_us"] <= p["fewest_fitting_busy_us"] < 1.01 * p["busy_us"], (k, p)


def test_the_kernel_tiles_as_the_calibrated_chip_plans(emu, tmp_path):
    """The calibrated 910B2 chip's plan (bf16, the design's default) goes to the runner as --tiles: A in 3 key-channel
    tiles of the micro-diagonal products, G in one [128, 128] tile, F2 in one Matmul call (the uncalibrated profile
    plans the same). 3 does not divide d_k = 128: the plan's tile is ceil(128 / 3) = 43 channels wide, the kernel's
    48 (whole 32-byte rows of bf16: 16 channels), 48 + 48 + 32. The emulation records the count, the shape (A: the
    widest tile), the UB of a tile on one AIV (hand-counted below) and F2's L1, within the profile's capacities, and
    the outputs match the recurrence. Counts the kernel cannot run are refused by the tiling in one line."""
    profile = load_profile("ascend-910b2")
    plans = bridge.sim_plans("v6", heads=2, chunks=4, dtype="bf16")
    assert {k: plans[k]["tiles"] for k in bridge.KERNEL_TILED["kda_chunk_v6"]} == {"A": 3, "G": 1, "F2": 1}
    assert plans["A"]["tile_shape"] == [1, 4, 4, 10, 43]
    write_inputs(tmp_path, dtype="bf16", gates="kimi")
    res = bridge.run(emu.runners["v6"], tmp_path / "in", tmp_path / "out", aic=3, profile=profile,
                     extra=bridge.tiles_option("kda_chunk_v6", plans))
    assert res.returncode == 0 and not errors(res), errors(res) or res.stderr
    tiles = res.report["tiles"]
    assert {k: (tiles[k]["runs"], tiles[k]["tiles"]) for k in ("A", "G", "F2")} == \
        {"A": (8, 3 * 8), "G": (8, 8), "F2": (8, 8)}               # 2 sequences x 4 chunks
    assert tiles["A"]["shape"] == [4, 4, 10, 48] and tiles["G"]["shape"] == [128, 128] == tiles["F2"]["shape"]
    # A on one AIV, one tile: g, K, Q [16, 48] and the decay factors and a product [4, 48], fp32; the sums of its
    # 2 sub-chunks and one sub-chunk's part of the tile, each 2 (kk, qk) x 4 micro-blocks x 10 entries 32 B apart
    assert tiles["A"]["ub_bytes"] == (3 * 16 + 2 * 4) * 48 * 4 + 3 * 2 * 4 * 10 * 32
    # G: [64, 128] per AIV, S and S_delta in fp32 and S_hi in bf16 (the five work tiles of 16 KiB)
    assert tiles["G"]["ub_bytes"] == 64 * 128 * (4 + 4 + 2) == 5 * 16384
    # F2: mmOut's L1, K = 2 d_k + C = 320 in 5 blocks of 64: A 5 x [128, 64], B 5 x [128, 64], bf16; with mm's the AIC's
    assert tiles["F2"]["l1_bytes"] == 2 * 5 * 128 * 64 * 2
    assert set(res.report["l1_peak_bytes"].values()) == {4 * 5 * 128 * 64 * 2} and 4 * 5 * 128 * 64 * 2 <= 512 * 1024
    against_the_recurrence(tmp_path)
    for bad, what in (("A=16", "A tiles"), ("G=3", "G tiles"), ("F2=3", "F2 tiles")):   # 16 x 8 channels: not 32 B
        r = bridge.run(emu.runners["v6"], tmp_path / "in", tmp_path / "bad", aic=3, extra=("--tiles", bad))
        assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and what in r.stderr, (bad, r.stderr)


def test_the_profiles_core_memories_bound_the_kernel(emu, tmp_path):
    assert_core_memories_bound(emu.runners["v6"], tmp_path, dtype="bf16")


def test_bad_input_gets_one_line(emu, tmp_path):
    """fp16 transfers given to a kernel without them (v3, v4, v5); T not a multiple of the chunk:
    tests/ascendc/test_ascendc_stubs.py, for every kernel."""
    write_inputs(tmp_path / "h", heads=1, chunks=1, dtype="fp16")
    for v in ("v3", "v4", "v5"):
        res = bridge.run(emu.runners[v], tmp_path / "h" / "in", tmp_path / "h" / v)
        assert res.returncode == 2 and res.stderr.strip().count("\n") == 0 and "fp16" in res.stderr, (v, res.stderr)


def test_gen_data_and_verify_round_trip_in_fp16(emu, tmp_path, capsys):
    gen, verify = load_script("gen_data"), load_script("verify")
    assert gen.main(["--out", str(tmp_path / "in"), "--heads", "1", "--chunks", "2", "--dtype", "fp16",
                     "--gates", "kimi", "--initial-state", "--plan", "v6"]) == 0
    meta = dict(line.split() for line in (tmp_path / "in" / "meta.txt").read_text().splitlines())
    assert meta["dtype"] == "fp16" and {k: meta[k] for k in ("a_tiles", "g_tiles", "f2_tiles")} == \
        {"a_tiles": "3", "g_tiles": "1", "f2_tiles": "1"}
    res = bridge.run(emu.runners["v6"], tmp_path / "in", tmp_path / "out",
                     extra=("--tiles", "A={a_tiles},G={g_tiles},F2={f2_tiles}".format(**meta)))
    assert res.returncode == 0, res.stderr
    assert verify.main(["--data", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--json"]) == 0
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert r["o"]["pass"] and r["final_state"]["pass"]
