"""kda_chunk_v5 (ascendc_stubs/kda_chunk_v5): the v5 design of kda/programs/v5.py as one AscendC kernel, on the
host emulation, held to the Python side pass by pass: numbers against the fp64 recurrence and against the v5
design itself (one tolerance helper, kda.reference.parity.assert_close), the flags and payloads of each pass against the
simulator's timed templates, the bytes of every hand-off against the simulator's, and faults (a removed wait, set
or barrier) reported as a race or a hang. The build is tests/conftest.py's, shared with tests/test_ascendc_*.py."""
from __future__ import annotations

from functools import lru_cache

import pytest

from tests.ascendc.kernel_runs import (CHUNK, DK, DV, FP32_AGREEMENT, against_the_recurrence,
                                       assert_core_memories_bound, errors, racing, run_kernel, write_inputs)
from ascendc_stubs import bridge
from kda.settings import Settings
from kda.studies.evaluate import evaluate
from kda.reference.parity import assert_close
from kda.programs import get_design
from npusim import load_profile
from npusim.model.multipass import templates
from npusim.model.schedule import BARRIER, CHUNKS, SEQUENTIAL

PASSES = ("intra", "state")


@pytest.fixture(scope="session")
def emu(ascendc_build) -> bridge.Build:
    return ascendc_build


def _workspace_plan(transfer_bytes: int, parts: int) -> int:
    """Per-core workspace bytes of KdaChunkV5Tiling's plan (ascendc_stubs/kda_chunk_v5/op_host), for C = 64,
    d_k = d_v = 128: n = 4 sub-chunks, P = 6 pairs, 4-wide micro-chunks with P4 = 6 pairs; every tensor 512-byte
    aligned; K_decay and SV twice; S_fp32 (fp32) only with bf16 transfers."""
    C, dk, dv, S, s, n, P, P4, tb = CHUNK, DK, DV, 16, 4, 4, 6, 6, transfer_bytes
    elems = [(n - 1) * S * dk] * 2 + [P * S * dk] + [n * 3 * s * dk] * 2 + [n * P4 * s * dk]   # intra ①
    elems += [P * S * S] * 2 + [n * P4 * s * s] * 2 + [C * C] * 2                          # ②, A_neg, D_beta
    elems += [n * (n + 1) // 2 * S * S, S * S]                                              # the inverse, acc
    elems += [C * dk, 2 * C * dk, C * parts * dk, C * dv, C * dv, dk * dv]                  # K_scaled .. S_delta
    total = sum(-(-e * tb // 512) * 512 for e in elems)
    total += 2 * (-(-(parts * dk + C) * dv * tb // 512) * 512)                              # SV, twice
    return total + (dk * dv * 4 if tb == 2 else 0)                                          # S_fp32


@lru_cache(maxsize=None)
def _design_templates():
    """The simulator's timed template of each v5 pass (bf16 transfers: the design's default, and where its
    workspace fits the 910B2 profile's slots; the order of syncs does not depend on the type)."""
    r = evaluate("v5", Settings(chunks=2, heads=1, dtype="bf16"), timing=False)
    tpls = templates(get_design("v5"), r.execution.pass_graphs, load_profile("ascend-910b2"), "ride")
    return dict(zip(PASSES, tpls))


@pytest.fixture(scope="session")
def fp32_run(emu, tmp_path_factory):
    """2 heads x 4 chunks (8 items over 3 AI cores: uneven; 2 sequences: one core idle in the state pass), fp32
    hand-offs, slow gates and an initial state."""
    d = tmp_path_factory.mktemp("v5_fp32")
    x, res = run_kernel(emu.runners["v5"], d)
    return d, x, res


@pytest.fixture(scope="session")
def one_core_run(emu, tmp_path_factory):
    """2 heads x 3 chunks back to back on one AI core (an odd count: the copies' parity runs on across the
    sequences), gates given as alpha (Phase A takes Ln), no initial state."""
    d = tmp_path_factory.mktemp("v5_one_core")
    _, res = run_kernel(emu.runners["v5"], d, aic=1, chunks=3, gate_form="alpha", initial_state=False)
    return d, res


# ---- numbers ----

def test_the_design_is_two_passes_with_a_barrier():
    """What the kernel implements: an intra pass over all items, an all-core barrier, a sequential state pass
    whose state travels on a hand-off of its own (kda/programs/v5.py)."""
    design = get_design("v5")
    assert [(p.name, p.layout) for p in design.passes] == [("intra", CHUNKS), ("state", SEQUENTIAL)]
    assert design.passes[1].boundary == BARRIER
    assert _design_templates()["state"].state_mode == "own"


def test_fp32_matches_the_recurrence_and_the_design(fp32_run):
    d, x, res = fp32_run
    assert res.returncode == 0 and not errors(res), errors(res) or res.stderr
    o, ht, _, _ = against_the_recurrence(d)
    sim = evaluate("v5", Settings(heads=2, chunks=4, dtype="fp32", gates="slow", initial_state=True), inputs=x,
                   timing=False)
    assert_close("o against the v5 design", sim.execution.o, o, FP32_AGREEMENT)
    assert_close("final state against the v5 design", sim.execution.final_state, ht, FP32_AGREEMENT)
    assert res.report["exp_max_arg"] is not None and res.report["exp_max_arg"] <= 0.0   # every exp <= 1
    # each hand-off of each pass takes the bytes the simulator counts for it; the state's own hand-off the state's
    intra, state = sim.execution.pass_graphs
    for graph in (intra, state):
        assert bridge.kernel_sync_bytes(res.report, graph, None) == {s.number: s.nbytes for s in graph.syncs}
    assert res.report["tensor_bytes"]["S"] == state.state.nbytes
    # the Vector side's UB plan is what it allocated, and fits the 192 KiB of an A2 AIV; the workspace is the plan
    assert set(res.report["ub_peak_bytes"].values()) == {res.report["ub_plan_bytes"]}
    assert res.report["ub_plan_bytes"] <= 192 * 1024
    assert res.report["workspace_bytes_per_core"] == _workspace_plan(4, 1) == 714_752


@pytest.mark.parametrize("gates", ["slow", "kimi"])
def test_bf16_matches_the_recurrence_as_closely_as_the_design(emu, tmp_path, gates):
    """bf16 hand-offs, the state in fp32 between chunks and in two bf16 parts for the Cube. Kimi's gates (~160 nats
    per chunk overflow v3's exp(-gc) in fp32) pass: no exp has a positive argument."""
    x, res = run_kernel(emu.runners["v5"], tmp_path, dtype="bf16", gates=gates)
    assert res.returncode == 0 and not errors(res), errors(res) or res.stderr
    o, ht, p_o, p_s = against_the_recurrence(tmp_path)
    assert res.report["exp_max_arg"] <= 0.0
    sim = evaluate("v5", Settings(heads=2, chunks=4, dtype="bf16", gates=gates, initial_state=True), inputs=x,
                   timing=False)
    assert sim.execution.pass_graphs[1].state.dtype == "fp32" and res.report["state_dtype"] == "fp32"
    # the kernel rounds where the design's hand-offs round: about the design's error, not more
    assert p_o.rel_rms_err < 1.25 * sim.parity_o.rel_rms_err
    assert p_s.rel_rms_err < 1.25 * sim.parity_state.rel_rms_err
    # the same bytes per hand-off as the simulator counts, but for Q_scaled: the Cube multiplies it with the state's
    # two bf16 parts, so it goes out twice, side by side (+ C x d_k x 2 bytes on ①), as in kda_chunk_v4
    intra, state = sim.execution.pass_graphs
    assert bridge.kernel_sync_bytes(res.report, intra, None) == {s.number: s.nbytes for s in intra.syncs}
    expected = {s.number: s.nbytes for s in state.syncs}
    expected[1] += CHUNK * DK * 2
    assert bridge.kernel_sync_bytes(res.report, state, None) == expected
    assert res.report["tensor_bytes"]["S"] == state.state.nbytes
    assert res.report["workspace_bytes_per_core"] == _workspace_plan(2, 2) == 505_344


def test_one_core_odd_chunks_alpha_gates(one_core_run):
    d, res = one_core_run
    assert res.returncode == 0 and not errors(res), errors(res) or res.stderr
    assert res.report["block_dim"] == 1
    against_the_recurrence(d)


# ---- where the work runs, and the flags and payloads of each pass ----

def test_items_spread_over_all_cores_and_sequences_stay_on_one(emu, tmp_path):
    """One head of 4 chunks on 4 AI cores: the intra pass (CHUNKS) gives each core one item, the state pass
    (SEQUENTIAL) runs the one sequence on core 0; the other cores only meet the barrier."""
    _, res = run_kernel(emu.runners["v5"], tmp_path, heads=1, chunks=4, aic=4)
    assert res.returncode == 0 and not errors(res), errors(res)
    assert res.report["block_dim"] == 4
    expected = {p: bridge.expected_pass_flag_ops(t) for p, t in _design_templates().items()}
    for (block, unit, sub), per_pass in bridge.recorded_pass_flag_ops(res.report, PASSES).items():
        assert [op for op, _ in per_pass["intra"]] == expected["intra"][unit], f"core{block} {unit}{sub}"
        state = [op for op, _ in per_pass["state"]]
        assert bridge.by_chunk(state) == ([expected["state"][unit]] * 4 if block == 0 else []), f"core{block} {unit}"
    barriers = [e for e in res.report["events"] if e["op"] == "syncall"]
    assert len(barriers) == 3 * 4                              # every AIC and AIV of every core, once


@pytest.mark.parametrize("run", ["fp32_run", "one_core_run"])
def test_flags_and_payloads_follow_the_simulators_syncs_pass_by_pass(run, request):
    """Per core and unit: the intra pass is the template's flag sequence once per item of the core; in the state
    pass every chunk's flags come in the template's order (the own state hand-off "S" = sync 0 included), and each
    set publishes the simulator's payload of its sync. The AIVs run one chunk ahead: chunk t+1's ① goes out before
    they wait for chunk t's ④ (so the Cube's D1 of chunk t+1 runs beside G), and S of chunk t+1 after it (G makes
    the state)."""
    res = request.getfixturevalue(run)[-1]
    tpls = _design_templates()
    expected = {p: bridge.expected_pass_flag_ops(t) for p, t in tpls.items()}
    payload = {p: bridge.expected_pass_payloads(t) for p, t in tpls.items()}
    blocks, sequences, chunks = res.report["block_dim"], res.report["sequences"], res.report["chunks"]
    recorded = bridge.recorded_pass_flag_ops(res.report, PASSES)
    assert len(recorded) == 3 * blocks
    for (block, unit, sub), per_pass in recorded.items():
        where = f"core{block} {unit}{sub}"
        items = len(range(block, sequences * chunks, blocks))
        chunks_here = len(range(block, sequences, blocks)) * chunks
        assert [op for op, _ in per_pass["intra"]] == expected["intra"][unit] * items, where
        ops = [op for op, _ in per_pass["state"]]
        assert bridge.by_chunk(ops) == [expected["state"][unit]] * chunks_here, where
        if unit == "AIC":
            assert ops == expected["state"][unit] * chunks_here, where
        else:
            for t in range(chunks_here):
                if (t + 1) % chunks == 0:
                    continue                                   # a sequence's last chunk: nothing ahead
                wait4 = [i for i, op in enumerate(ops) if op == bridge.FlagOp(4, "wait")][t]
                set1 = [i for i, op in enumerate(ops) if op == bridge.FlagOp(1, "set")][t + 1]
                set_s = [i for i, op in enumerate(ops) if op == bridge.FlagOp(bridge.STATE_HANDOFF, "set")][t + 1]
                assert set1 < wait4 < set_s, (where, t)
        for name in PASSES:
            for op, wrote in per_pass[name]:
                if op.op == "set":
                    assert set(wrote) == payload[name][op.sync], (where, name, op.sync)


def test_flag_ids_follow_the_rules(fp32_run):
    """Distinct within each pass, within A2's 0-10, clear of the two Matmul objects' [0, 3] and of SyncAll's 11-14;
    mode 2; set on the pipe that wrote the payload (MTE3 on an AIV, FIX on the AIC)."""
    res = fp32_run[-1]
    reserved = set(range(2 * res.report["matmul_objects"]))
    assert res.report["matmul_objects"] == 2
    for name, flags in res.report["pass_flags"].items():
        ids = list(flags.values())
        assert len(set(ids)) == len(ids) == len(_design_templates()[name].graph.syncs) + (name == "state")
        assert all(0 <= i <= 10 and i not in reserved for i in ids)
    sets = [e for e in res.report["events"] if e["op"] == "set"]
    assert all(e["mode"] == 2 for e in sets)
    assert {e["pipe"] for e in sets if e["unit"] == "AIV"} == {"PIPE_MTE3"}
    assert {e["pipe"] for e in sets if e["unit"] == "AIC"} == {"PIPE_FIX"}


# ---- removed synchronisation is caught, not a silent wrong answer ----


@pytest.mark.parametrize("fault, pass_name, sync", [("KDA_DROP_WAIT=13", "intra", 3),
                                                    ("KDA_DROP_WAIT=20", "state", bridge.STATE_HANDOFF)])
def test_a_removed_wait_is_reported_as_a_race(emu, tmp_path, fault, pass_name, sync):
    """Without intra ③'s wait, D reads Ai_diag, A_neg and D_beta unordered; without the state's own hand-off, D2
    reads S while G writes it (① does not order it: the AIVs make chunk t+1's operands before chunk t's state).
    The passes reuse flag ids, so a set left unconsumed in one pass may be taken by the other pass's wait on the
    same id: the payload of that sync may race too (intra ③ and state ③ share id 6: V_pseudo). Reported, not
    silent."""
    _, res = run_kernel(emu.faults["v5"][fault], tmp_path)
    assert res.returncode == 3, res.stderr
    tpls = _design_templates()
    payload = bridge.expected_pass_payloads(tpls[pass_name])[sync]
    flag = res.report["pass_flags"][pass_name][str(sync)]
    same_id = set().union(*(bridge.expected_pass_payloads(tpls[p])[int(n)]
                            for p, flags in res.report["pass_flags"].items() if p != pass_name
                            for n, f in flags.items() if f == flag))
    assert payload <= racing(res) <= payload | same_id, racing(res)
    assert any(e["kind"] == "flag" for e in res.report["errors"])   # its sets were never consumed


def test_a_removed_set_is_reported_as_a_hang(emu, tmp_path):
    # 2 s: a shorter wait is reported as a hang where a loaded machine is merely slow (300 ms was, at load 20)
    _, res = run_kernel(emu.faults["v5"]["KDA_DROP_SET=24"], tmp_path, timeout_ms=2000)
    assert res.returncode == 4, res.stderr
    hangs = [e["message"] for e in res.report["errors"] if e["kind"] == "hang"]
    flag4 = res.report["pass_flags"]["state"]["4"]
    assert hangs and f"waits on flag {flag4} " in hangs[0] and ".AIV" in hangs[0]


def test_a_removed_barrier_is_reported_as_a_race(emu, tmp_path):
    """Without the SyncAll, core 0's state pass reads the M and A_qk that core 1's intra pass writes, unordered."""
    _, res = run_kernel(emu.faults["v5"]["KDA_DROP_BARRIER=1"], tmp_path, heads=1, chunks=4, aic=2)
    assert res.returncode == 3, res.stderr
    assert res.report["drop_barrier"] == 1
    assert racing(res) == {"M", "A_qk"}


def test_the_profiles_core_memories_bound_the_kernel(emu, tmp_path):
    assert_core_memories_bound(emu.runners["v5"], tmp_path, dtype="fp32")


# The plans of both 910B2 profiles (bf16, C = 64, d_k = d_v = 128): state.A's tiles and width, F2's calls and width.
# The calibrated chip's measured per-instruction and per-transfer costs make fewer, larger tiles cheaper.
PLANS = {"ascend-910b2": (1, 128, 1, 128), "ascend-910b2-uncalibrated": (8, 16, 2, 64)}


@pytest.mark.parametrize("profile_name", sorted(PLANS))
def test_the_kernel_tiles_as_the_simulator_plans(emu, tmp_path, profile_name):
    """The profile's core-memory plan (npusim/chip/pipes.py plan_phase) goes to the runner as --tiles
    (bridge.tiles_option); for every phase the kernel tiles that way, the emulation records as many tiles per chunk
    as the plan and the plan's tile shape ([sequence, rows, the last axis cut]), each Vector tile's UB (hand-counted
    below) within the profile's capacity, the Cube phase's Matmul tiling (F2: singleCoreN = the plan's cut of d_v)
    and its L1 within the profile's, and the outputs still match the recurrence. Every phase the simulator tiles
    is one of them. On the calibrated chip state A is one [C, d_k] tile (each AIV its half) and F2 one call."""
    a_tiles, a_width, f2_tiles, f2_width = PLANS[profile_name]
    profile = load_profile(profile_name)
    plans = bridge.sim_plans("v5", heads=2, chunks=4, dtype="bf16", profile=profile_name)
    tiled = bridge.KERNEL_TILED["kda_chunk_v5"]
    assert plans["state.A"]["tiles"] == a_tiles and plans["state.A"]["tile_shape"] == [1, 64, a_width]
    assert plans["intra.A"]["tiles"] == 2                 # the micro-diagonal products, by key-channel halves
    assert {k for k, p in plans.items() if p["tiles"] > 1} - set(tiled) == set()
    write_inputs(tmp_path, dtype="bf16")
    res = bridge.run(emu.runners["v5"], tmp_path / "in", tmp_path / "out", aic=3, profile=profile,
                     extra=bridge.tiles_option("kda_chunk_v5", plans))
    assert res.returncode == 0 and not errors(res), errors(res) or res.stderr
    cap = res.report["capacities"]["ub"]
    assert cap == plans["state.A"]["capacity_bytes"] == 192 * 1024
    for key in tiled:
        use, plan = res.report["tiles"][key], plans[key]
        assert use["runs"] == 2 * 4                        # sequences x chunks
        assert use["tiles"] == plan["tiles"] * use["runs"], (key, use, plan["tiles"])
        assert [1, *use["shape"]] == plan["tile_shape"], (key, use, plan)
        if plan["unit"] == "vec":
            assert use["ub_bytes"] <= cap
        else:
            assert use["l1_bytes"] <= res.report["capacities"]["l1"] == plan["capacity_bytes"] == 512 * 1024
    # state.A on one AIV, one tile: gc, K, Q and two temporaries [64, w] (w: its part of the tile, at most its 64)
    assert res.report["tiles"]["state.A"]["ub_bytes"] == 5 * 64 * min(a_width, 64) * 4
    # intra.A on one AIV, one tile: g, K, Q [16, 64] and the decay factors and a product [4, 64], fp32; the sums of
    # its 2 sub-chunks and one sub-chunk's part of the tile, each 2 (kk, qk) x 4 micro-blocks x 10 entries 32 B apart
    assert res.report["tiles"]["intra.A"]["ub_bytes"] == (3 * 16 + 2 * 4) * 64 * 4 + 3 * 2 * 4 * 10 * 32
    # state.G: one [128, 128] tile, [64, 128] per AIV: S and S_delta in fp32 and S_hi in bf16 (80 KiB, the five
    # work tiles of 16 KiB that the kernel allocates)
    assert plans["state.G"]["tiles"] == 1
    assert res.report["tiles"]["state.G"]["ub_bytes"] == 64 * 128 * (4 + 4 + 2) == 5 * 16384
    # state.F2: f2_tiles Matmul calls per chunk of f2_width columns of O each; mmOut's L1, K = 2 d_k + C = 320 in 5
    # blocks of 64: A 5 x [128, 64], B 5 x [f2_width, 64] (base N cut with singleCoreN), bf16; with mm's (5 x [128, 64]
    # each) the AIC's
    assert plans["state.F2"]["tiles"] == f2_tiles and plans["state.F2"]["tile_shape"] == [1, 128, f2_width]
    f2_l1 = (5 * 128 * 64 + 5 * f2_width * 64) * 2
    assert res.report["tiles"]["state.F2"]["l1_bytes"] == f2_l1
    assert set(res.report["l1_peak_bytes"].values()) == {f2_l1 + 2 * 5 * 128 * 64 * 2}
    assert res.report["ub_plan_bytes"] <= cap
    against_the_recurrence(tmp_path)
    if profile_name != "ascend-910b2-uncalibrated":
        return
    # F2 in one call instead of two: every column of O is the same sum, so o is the same to the bit
    one = bridge.tiles_option("kda_chunk_v5", plans)[1].replace("state.F2=2", "state.F2=1")
    res = bridge.run(emu.runners["v5"], tmp_path / "in", tmp_path / "f2", aic=3, profile=profile, extra=("--tiles", one))
    assert res.returncode == 0 and res.report["tiles"]["state.F2"]["shape"] == [128, 128]
    assert (tmp_path / "f2" / "o.bin").read_bytes() == (tmp_path / "out" / "o.bin").read_bytes()
    # without --tiles: state A one [C, d_k / 2] tile per AIV, the micro-diagonal blocks every key channel at once
    res = bridge.run(emu.runners["v5"], tmp_path / "in", tmp_path / "plain", aic=3, profile=profile)
    assert res.returncode == 0 and res.report["tiles"]["state.A"]["tiles"] == 2 * res.report["tiles"]["state.A"]["runs"]
    assert res.report["tiles"]["intra.A"]["tiles"] == res.report["tiles"]["intra.A"]["runs"]
    # a tile count the kernel cannot run is refused by the tiling in one line
    res = bridge.run(emu.runners["v5"], tmp_path / "in", tmp_path / "bad", aic=3, extra=("--tiles", "state.A=3"))
    assert res.returncode == 2 and "state.A tiles" in res.stderr
    res = bridge.run(emu.runners["v5"], tmp_path / "in", tmp_path / "bad", aic=3, extra=("--tiles", "intra.A=3"))
    assert res.returncode == 2 and "intra.A tiles" in res.stderr
    res = bridge.run(emu.runners["v5"], tmp_path / "in", tmp_path / "bad", aic=3, extra=("--tiles", "state.F2=3"))
    assert res.returncode == 2 and "state.F2 tiles" in res.stderr
