"""The AscendC skeletons of v3 and v4 (ascendc_stubs/kda_chunk_v3, kda_chunk_v4) on the host emulation, held to
the Python side: parity with the recurrence, the cross-core flags and payloads the simulator records for each
version, and faults the emulator must catch. cmake + g++ build everything once per session (about 24 s of CPU)."""
from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import pytest
import torch

from tests.ascendc.kernel_runs import CHUNK, DK, DV, ROOT, errors, load_script, racing
from ascendc_stubs import bridge  # noqa: E402
from kda.settings import Settings  # noqa: E402
from kda.studies.evaluate import evaluate
from kda.driver.inputs import make_inputs  # noqa: E402
from kda.reference.parity import assert_close, compare  # noqa: E402
from kda.reference.recurrence import naive_recurrent_kda  # noqa: E402

VERSIONS = ("v3", "v4")


@pytest.fixture(scope="session")
def emu(ascendc_build) -> bridge.Build:
    return ascendc_build   # tests/conftest.py: built once per session


@pytest.fixture(scope="session", params=VERSIONS)
def version(request) -> str:
    return request.param


_SIM: dict[str, tuple] = {}


def _sim(version: str):
    """The simulator's recorded graph of a version and the sync its state hand-off rides on (from its report)."""
    if version not in _SIM:
        r = evaluate(version, Settings(chunks=2, dtype="fp32"))
        graph = r.execution.graph
        _SIM[version] = graph, next(s.number for s in graph.syncs if s.label == r.report.state.rides_on)
    return _SIM[version]


def _run(emu_exe: Path, d: Path, *, dtype="fp32", gates="slow", gate_form="log", slots=2, aic=24, heads=2, chunks=4,
         initial_state=True, timeout_ms=2000, extra=()):
    x = make_inputs(1, chunks * CHUNK, heads, DK, DV, gates, 0, initial_state)
    bridge.write_inputs(d / "in", x, dtype=dtype, chunk_size=CHUNK, gate=gate_form)
    res = bridge.run(emu_exe, d / "in", d / "out", slots=slots, timeout_ms=timeout_ms, aic=aic, extra=extra)
    return x, res


def _parity(d: Path):
    m, x = bridge.read_inputs(d / "in")
    o, ht = bridge.read_outputs(d / "out", m)
    ref_o, ref_s = naive_recurrent_kda(x.q, x.k, x.v, x.g, x.beta, m.scale, x.initial_state, True, dtype=torch.float64)
    return (ref_o, o), (ref_s, ht)


def _assert_bytes_per_sync(res: bridge.EmuRun, graph, rides: int, extra: dict[int, int] | None = None):
    """The kernel's workspace tensors of each sync (and the state where it rides) take the bytes the simulator
    counts for that sync, plus `extra`."""
    sim = {s.number: s.nbytes + (graph.state.nbytes if s.number == rides else 0) for s in graph.syncs}
    for n, b in (extra or {}).items():
        sim[n] += b
    assert bridge.kernel_sync_bytes(res.report, graph, rides) == sim


def _assert_exp_factors_at_most_one(version: str, res: bridge.EmuRun):
    """v4 takes no exp of a positive argument, the emulator's Exp says (v3's exp(-gc) does)."""
    if version == "v4":
        assert res.report["exp_max_arg"] is not None and res.report["exp_max_arg"] <= 0.0


@pytest.fixture(scope="session")
def fp32_run(emu, version, tmp_path_factory):
    """2 heads x 4 chunks, fp32 hand-offs, slow gates and an initial state (the state matters), 2 AI cores."""
    d = tmp_path_factory.mktemp(f"{version}_fp32")
    return d, _run(emu.runners[version], d)[1]


@pytest.fixture(scope="session")
def one_core_run(emu, version, tmp_path_factory):
    """The same heads back to back on one AI core, one workspace slot, gates given as alpha (Phase A takes Ln)."""
    d = tmp_path_factory.mktemp(f"{version}_one_core")
    return d, _run(emu.runners[version], d, gate_form="alpha", slots=1, aic=1)[1]


# ---- the emulator itself ----

SELFTEST = {   # scenario -> (exit status, error kinds it must report)
    "mode2": (0, set()), "float16": (0, set()),
    "overflow": (3, {"overflow"}), "twice": (3, {"rule"}), "reserved": (3, {"api"}), "setpipe": (3, {"rule"}),
    "ub": (3, {"api"}), "align": (3, {"api"}), "bounds": (3, {"bounds"}), "hazard": (3, {"hazard", "ub-hazard"}),
    "race": (3, {"race"}), "hang": (4, {"hang"}), "ubhazard": (3, {"ub-hazard"}), "ubfence": (0, set()),
    "matrix": (0, set()), "across": (3, {"bounds"}), "reducesum": (0, set()),
}


@pytest.mark.parametrize("scenario", sorted(SELFTEST))
def test_emulator_enforces_the_hardware_rules(emu, tmp_path, scenario):
    status, kinds = SELFTEST[scenario]
    p = subprocess.run([str(emu.selftest), scenario, str(tmp_path / "r.json")], capture_output=True, text=True,
                       timeout=30)
    report = json.loads((tmp_path / "r.json").read_text())
    assert p.returncode == status, p.stderr
    assert {e["kind"] for e in report["errors"]} == kinds, report["errors"]
    if scenario == "mode2":   # the AIC's wait returns only after both AIVs set (AIV1 sets 100 ms late)
        ev = report["events"]
        aic_wait = next(e["seq"] for e in ev if e["unit"] == "AIC" and e["op"] == "wait")
        aiv_sets = [e["seq"] for e in ev if e["unit"] == "AIV" and e["op"] == "set"]
        assert len(aiv_sets) == 2 and aic_wait > max(aiv_sets)
        assert sum(e["unit"] == "AIV" and e["op"] == "wait" for e in ev) == 2   # one AIC set released both
    if scenario == "reducesum":   # Exp(-1, 0.5) ran: the largest argument is reported
        assert report["exp_max_arg"] == 0.5


# ---- numbers ----

def test_fp32_matches_the_recurrence(version, fp32_run):
    d, res = fp32_run
    assert res.returncode == 0 and not errors(res), errors(res) or res.stderr
    (ref_o, o), (ref_s, ht) = _parity(d)
    assert_close("o", ref_o, o)
    assert_close("final state", ref_s, ht)
    _assert_exp_factors_at_most_one(version, res)
    _assert_bytes_per_sync(res, *_sim(version))
    # the Vector side's UB plan is what it allocated, and fits the 192 KiB of an A2 AIV
    assert set(res.report["ub_peak_bytes"].values()) == {res.report["ub_plan_bytes"]}
    assert res.report["ub_plan_bytes"] <= 192 * 1024


def test_one_core_one_slot_alpha_gates(version, one_core_run):
    d, res = one_core_run
    assert res.returncode == 0 and not errors(res), errors(res) or res.stderr
    assert res.report["block_dim"] == 1 and res.report["slots"] == 1
    (ref_o, o), (ref_s, ht) = _parity(d)
    assert_close("o", ref_o, o)
    assert_close("final state", ref_s, ht)
    _assert_exp_factors_at_most_one(version, res)


@pytest.mark.parametrize("version, gates", [("v3", "seed"), ("v4", "slow"), ("v4", "kimi")])
def test_bf16_matches_the_recurrence_as_closely_as_the_simulator(emu, tmp_path, version, gates):
    """bf16 hand-offs; v4 under its default policy, the state in fp32 between chunks (slow gates: it matters)."""
    x, res = _run(emu.runners[version], tmp_path, dtype="bf16", gates=gates)
    assert res.returncode == 0 and not errors(res), errors(res) or res.stderr
    (ref_o, o), (ref_s, ht) = _parity(tmp_path)
    p_o, p_s = assert_close("o", ref_o, o), assert_close("final state", ref_s, ht)
    _assert_exp_factors_at_most_one(version, res)
    # bf16 hand-offs cost the simulator about as much: the kernel rounds where the simulator's syncs round
    sim = evaluate(version, Settings(heads=2, chunks=4, dtype="bf16", gates=gates, initial_state=True), inputs=x,
                   timing=False)
    if version == "v4":
        assert sim.execution.graph.state.dtype == "fp32" and res.report["state_dtype"] == "fp32"
    # the same bytes per sync as the simulator counts, but for v4's Q_scaled: the Cube multiplies it with the
    # state's two bf16 parts, so it goes out twice, side by side (+ C x d_k x 2 bytes on ①)
    _assert_bytes_per_sync(res, sim.execution.graph, 3, {1: CHUNK * DK * 2} if version == "v4" else None)
    assert p_o.rel_rms_err < 1.25 * sim.parity_o.rel_rms_err
    assert p_s.rel_rms_err < 1.25 * sim.parity_state.rel_rms_err


def test_v4_passes_gates_that_overflow_v3_in_fp32(emu, tmp_path):
    """FLA's -5*sigmoid gates (~160 nats per chunk): v3's exp(-gc) overflows fp32 in Phase A, v4 takes no exp
    of a positive argument and matches the recurrence."""
    _, v4 = _run(emu.runners["v4"], tmp_path / "v4", gates="kimi")
    assert v4.returncode == 0 and not errors(v4), errors(v4) or v4.stderr
    (ref_o, o), (ref_s, ht) = _parity(tmp_path / "v4")
    assert_close("o", ref_o, o)
    assert_close("final state", ref_s, ht)
    assert v4.report["exp_max_arg"] <= 0.0
    _, v3 = _run(emu.runners["v3"], tmp_path / "v3", gates="kimi")
    assert v3.report["exp_max_arg"] > math.log(torch.finfo(torch.float32).max)
    (_, o3), _ = _parity(tmp_path / "v3")
    assert not torch.isfinite(o3).all()


def test_v4_state_in_two_bf16_parts_beats_one(emu, tmp_path):
    """With bf16 transfers the Cube reads the fp32 state as S_hi + S_lo (default) rather than bf16(S) alone
    (FLA's cast, --state-parts 1): the output keeps the accuracy the fp32 state buys in the simulator."""
    rms = {}
    for parts in (1, 2):
        d = tmp_path / f"parts{parts}"
        _, res = _run(emu.runners["v4"], d, dtype="bf16", extra=("--state-parts", str(parts)))
        assert res.returncode == 0 and not errors(res) and res.report["state_parts"] == parts, errors(res)
        (ref_o, o), _ = _parity(d)
        rms[parts] = compare(ref_o, o).rel_rms_err
    assert rms[2] < rms[1]


# ---- flags and payloads against the simulator's graph ----

@pytest.mark.parametrize("run", ["fp32_run", "one_core_run"])
def test_flags_follow_the_simulators_syncs(run, request, version):
    graph, _ = _sim(version)
    d, res = request.getfixturevalue(run)
    expected = bridge.expected_flag_ops(graph)
    per_core = bridge.recorded_flag_ops(res.report)
    blocks = res.report["block_dim"]
    sequences, chunks = res.report["sequences"], res.report["chunks"]
    assert len(per_core) == 3 * blocks                          # every AIC and both AIVs of every core
    for (block, unit, sub), events in per_core.items():
        chunks_here = len(range(block, sequences, blocks)) * chunks
        ops = [op for op, _ in events]
        assert ops == expected[unit] * chunks_here, f"core{block} {unit}{sub}"
        assert len(ops) == len(graph.syncs) * chunks_here       # one set or wait per sync and chunk


@pytest.mark.parametrize("run", ["fp32_run", "one_core_run"])
def test_payloads_follow_the_simulators_syncs(run, request, version):
    """What each set publishes (the hand-off tensors its unit wrote since its previous set) is the simulator's
    payload of that sync, and the state S goes out with the sync the simulator says it rides on."""
    graph, rides = _sim(version)
    assert rides == 3
    d, res = request.getfixturevalue(run)
    expected = bridge.expected_payloads(graph, rides)
    for (block, unit, sub), events in bridge.recorded_flag_ops(res.report).items():
        for op, wrote in events:
            if op.op == "set":
                assert set(wrote) == expected[op.sync], f"core{block} {unit}{sub} sync {op.sync}"


def test_flag_ids_follow_the_rules(fp32_run):
    _, res = fp32_run
    flags = res.report["sync_flags"]
    ids = list(flags.values())
    reserved_by_matmul = set(range(2 * res.report["matmul_objects"]))
    assert len(set(ids)) == len(ids) == 6
    assert all(0 <= i <= 10 and i not in range(11, 15) and i not in reserved_by_matmul for i in ids)
    assert all(e["mode"] == 2 for e in res.report["events"] if e["op"] == "set")
    assert {e["pipe"] for e in res.report["events"] if e["op"] == "set" and e["unit"] == "AIV"} == {"PIPE_MTE3"}
    assert {e["pipe"] for e in res.report["events"] if e["op"] == "set" and e["unit"] == "AIC"} == {"PIPE_FIX"}


# ---- removed synchronisation is caught, not a silent wrong answer ----

@pytest.mark.parametrize("sync", [3, 6])
def test_a_removed_wait_is_reported_as_a_race(emu, tmp_path, version, sync):
    graph, rides = _sim(version)
    _, res = _run(emu.faults[version][f"KDA_DROP_WAIT={sync}"], tmp_path)
    assert res.returncode == 3, res.stderr
    assert res.report["drop_wait"] == sync
    payload = bridge.expected_payloads(graph, rides)[sync]
    races = racing(res)
    # every tensor of that sync the phase right after the wait reads races; so may a resident tensor whose
    # overwrite by the next chunk the wait also orders (without ⑥, Phase A of chunk t+1 rewrites K_decay while
    # Phase F of chunk t reads it: the simulator's write-after-read edge on resident tensors)
    resident = {n for n, t in graph.tensors.items() if t.placement == "resident"}
    read_next = bridge.read_right_after(graph, sync, rides)
    assert read_next and read_next <= races and races <= payload | resident, races
    # the consumer never consumed the producer's sets: reported too
    assert any(e["kind"] == "flag" for e in res.report["errors"])


def test_a_removed_set_is_reported_as_a_hang(emu, tmp_path, version):
    _, res = _run(emu.faults[version]["KDA_DROP_SET=4"], tmp_path, timeout_ms=300)
    assert res.returncode == 4, res.stderr
    hangs = [e["message"] for e in res.report["errors"] if e["kind"] == "hang"]
    flag4 = res.report["sync_flags"]["4"]
    assert hangs and f"waits on flag {flag4} " in hangs[0] and ".AIV" in hangs[0]


# ---- the scripts for the NPU flow, and bad input ----

def test_gen_data_and_verify_scripts_round_trip(emu, tmp_path, capsys, version):
    gen, verify = load_script("gen_data"), load_script("verify")
    assert gen.main(["--out", str(tmp_path / "in"), "--heads", "1", "--chunks", "2", "--dtype", "bf16",
                     "--initial-state"]) == 0
    res = bridge.run(emu.runners[version], tmp_path / "in", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    assert verify.main(["--data", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--json"]) == 0
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert r["o"]["pass"] and r["final_state"]["pass"]
    # a wrong output fails verification
    o = tmp_path / "out" / "o.bin"
    o.write_bytes(bytes(len(o.read_bytes())))
    assert verify.main(["--data", str(tmp_path / "in"), "--out", str(tmp_path / "out")]) == 1


@pytest.mark.parametrize("kernel", ["v3", "v4", "v5", "v6"])
def test_runner_rejects_a_shape_it_does_not_support(emu, tmp_path, kernel):
    x = make_inputs(1, 96, 1, DK, DV, "seed", 0)           # T = 96 is not a multiple of the chunk (64)
    bridge.write_inputs(tmp_path / "in", x, chunk_size=CHUNK)
    res = bridge.run(emu.runners[kernel], tmp_path / "in", tmp_path / "out")
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "multiple of the chunk size" in res.stderr


def test_v4_runner_rejects_two_state_parts_with_fp32_transfers(emu, tmp_path):
    x = make_inputs(1, CHUNK, 1, DK, DV, "seed", 0)
    bridge.write_inputs(tmp_path / "in", x, chunk_size=CHUNK)
    res = bridge.run(emu.runners["v4"], tmp_path / "in", tmp_path / "out", extra=("--state-parts", "2"))
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "one fp32 part" in res.stderr


def test_msprof_summary_becomes_calibration_rows(tmp_path, capsys):
    """op_summary_to_csv.py on an op_summary CSV in msprof's documented column layout (CANN profiling docs,
    op_summary: "Op Name", "OP Type", "Task Type", "Task Duration(us)", ...): one calibration row per launch of
    the kernel's operator type, nothing from other operators; bad input gets one line and exit status 2."""
    conv = load_script("op_summary_to_csv")
    x = make_inputs(1, 2 * CHUNK, 2, DK, DV, "seed", 0)
    bridge.write_inputs(tmp_path / "in", x, dtype="bf16", chunk_size=CHUNK)
    summary = tmp_path / "op_summary_0_1.csv"
    summary.write_text(
        "Device_id,Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Dim,"
        "Mix Block Dim\n"
        "0,KdaChunkV3_0,KdaChunkV3,MIX_AIC,1000.0,123.5,0,2,4\n"
        "0,Cast_1,Cast,AI_VECTOR_CORE,1130.0,3.25,6.5,8,N/A\n"
        "0,KdaChunkV3_2,KdaChunkV3,MIX_AIC,1140.0,120.0,6.75,2,4\n")
    out = tmp_path / "timings.csv"
    assert conv.main(["--summary", str(summary), "--data", str(tmp_path / "in"), "--kernel", "v3", "--out", str(out)]) == 0
    assert out.read_text().splitlines() == [
        "kernel,shape,dtype,measured_us",
        "v3,B=1;T=128;H=2;K=128;V=128;C=64,bf16,123.5",
        "v3,B=1;T=128;H=2;K=128;V=128;C=64,bf16,120"]
    # no launch of v4's operator in that file; an unknown kernel; a summary without the duration column
    assert conv.main(["--summary", str(summary), "--data", str(tmp_path / "in"), "--kernel", "v4"]) == 2
    assert conv.main(["--summary", str(summary), "--data", str(tmp_path / "in"), "--kernel", "v9"]) == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("Op Name,OP Type\nKdaChunkV3_0,KdaChunkV3\n")
    assert conv.main(["--summary", str(bad), "--data", str(tmp_path / "in"), "--kernel", "v3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "KdaChunkV4" in err[0] and "'v9'" in err[1] and "Task Duration(us)" in err[2]


CAL, UNCAL = "ascend-910b2", "ascend-910b2-uncalibrated"


@pytest.mark.parametrize("profile, dtype, tiles", [(CAL, "fp32", 1), (CAL, "bf16", 1), (UNCAL, "fp32", 8),
                                                   (UNCAL, "bf16", 4)])
def test_v3_phase_a_tiles_as_the_simulator_plans(emu, tmp_path, profile, dtype, tiles):
    """v3's Phase A runs in the plan's tiles (bridge.tiles_option -> --tiles A=N,G=N), on the calibrated chip and on
    the uncalibrated profile: the calibrated chip's measured per-instruction and per-transfer costs make one
    [C, d_k] tile (each AIV its half) cheaper than the uncalibrated profile's 8 (fp32) or 4 (bf16) key-channel
    slices. The emulation records as many per chunk as the plan, the plan's shape [sequence, C, d_k / N], each
    tile's UB on one AIV within the capacity, and the outputs still match the recurrence. G, the only other
    phase the simulator tiles: see the test below."""
    plans = bridge.sim_plans("v3", heads=2, chunks=4, dtype=dtype, profile=profile)
    assert {k for k, p in plans.items() if p["tiles"] > 1} <= {"A", "G"}
    assert plans["A"]["tiles"] == tiles and plans["A"]["tile_shape"] == [1, 64, 128 // tiles]
    _, res = _run(emu.runners["v3"], tmp_path, dtype=dtype, aic=3, extra=bridge.tiles_option("kda_chunk_v3", plans))
    assert res.returncode == 0 and not errors(res), errors(res) or res.stderr
    use = res.report["tiles"]["A"]
    assert use["runs"] == 2 * 4 and use["tiles"] == tiles * use["runs"], use
    assert [1, *use["shape"]] == plans["A"]["tile_shape"]
    w = min(128 // tiles, 64)                 # one AIV, one tile: gc, K, Q and a temporary, [64, w] fp32 each
    assert use["ub_bytes"] == 4 * 64 * w * 4 <= res.report["capacities"]["ub"] == plans["A"]["capacity_bytes"]
    for ref, got in _parity(tmp_path):
        assert_close("v3 tiled", ref, got)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_v4_phase_a_tiles_as_the_simulator_plans(emu, tmp_path, dtype):
    """v4's Phase A diagonal blocks run in the plan's tiles (--tiles A=8, the same count on the calibrated chip and
    the uncalibrated profile): 8 key-channel slices per chunk of the [n, 136, d_k] products (n = 4 sub-chunks,
    16 x 17 / 2 pairs each), each split between the AIVs by sub-chunk. The emulation records the plan's count and
    shape, the UB a tile takes on one AIV (hand-counted below) within the capacity, and the outputs still match the
    recurrence; a count that does not divide d_k is refused in one line."""
    plans = bridge.sim_plans("v4", heads=2, chunks=4, dtype=dtype)
    assert {k for k, p in plans.items() if p["tiles"] > 1} == {"A"}
    assert plans["A"]["tiles"] == 8 and plans["A"]["tile_shape"] == [1, 4, 136, 16]
    assert bridge.sim_plans("v4", heads=2, chunks=4, dtype=dtype, profile=UNCAL)["A"]["tiles"] == 8
    _, res = _run(emu.runners["v4"], tmp_path, dtype=dtype, aic=3, extra=bridge.tiles_option("kda_chunk_v4", plans))
    assert res.returncode == 0 and not errors(res), errors(res) or res.stderr
    use = res.report["tiles"]["A"]
    assert use["runs"] == 2 * 4 and use["tiles"] == 8 * use["runs"], use
    assert [1, *use["shape"]] == plans["A"]["tile_shape"]
    # one AIV, one tile: g, K, Q, the decay factors and a product, [16, 16] fp32 each; the sums of its 2
    # sub-chunks and one tile's part, each 2 x 136 entries (A_kk, A_qk) 32 bytes apart
    assert use["ub_bytes"] == 5 * 16 * 16 * 4 + 3 * 2 * 136 * 32
    assert use["ub_bytes"] <= res.report["ub_plan_bytes"] <= res.report["capacities"]["ub"] == plans["A"]["capacity_bytes"]
    _assert_exp_factors_at_most_one("v4", res)
    for ref, got in _parity(tmp_path):
        assert_close("v4 tiled", ref, got)
    bad = bridge.run(emu.runners["v4"], tmp_path / "in", tmp_path / "bad", aic=3, extra=("--tiles", "A=3"))
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "A tiles" in bad.stderr


@pytest.mark.parametrize("profile, dtype, tiles", [(CAL, "fp32", 1), (CAL, "bf16", 1), (UNCAL, "fp32", 4),
                                                   (UNCAL, "bf16", 2)])
def test_phase_g_tiles_as_the_simulator_plans(emu, tmp_path, version, profile, dtype, tiles):
    """Phase G's state update runs in the plan's tiles: S [d_k, d_v] cut along d_v, on the calibrated chip in one
    [128, 128] tile, on the uncalibrated profile in 4 x [128, 32] (fp32) or 2 x [128, 64] (bf16); each tile is split
    between the AIVs by rows (each its 64 key channels). One AIV's piece of the calibrated tile, [64, 128] = 8,192
    fp32 values, is twice a work tile (4,096): S and S_delta each take two neighbouring work tiles. The emulation
    records the count and shape, the UB a tile takes on one AIV (hand-counted below), and the outputs match the
    recurrence. A count that does not divide d_v (3) is refused in one line."""
    plans = bridge.sim_plans(version, heads=2, chunks=4, dtype=dtype, profile=profile)
    w = 128 // tiles
    assert plans["G"]["tiles"] == tiles and plans["G"]["tile_shape"] == [1, 128, w]
    _, res = _run(emu.runners[version], tmp_path, dtype=dtype, aic=3, extra=bridge.tiles_option(bridge.KERNELS[version], plans))
    assert res.returncode == 0 and not errors(res), errors(res) or res.stderr
    use = res.report["tiles"]["G"]
    assert use["runs"] == 2 * 4 and use["tiles"] == tiles * use["runs"], use
    assert [1, *use["shape"]] == plans["G"]["tile_shape"]
    # S_prev and S_delta, [64, w] fp32 each; v4 with bf16 transfers also S_hi = bf16(S) for the state's two parts
    hi = 64 * w * 2 if version == "v4" and dtype == "bf16" else 0
    assert use["ub_bytes"] == 2 * 64 * w * 4 + hi <= res.report["capacities"]["ub"] == plans["G"]["capacity_bytes"]
    assert res.report["ub_plan_bytes"] <= res.report["capacities"]["ub"]
    for ref, got in _parity(tmp_path):
        assert_close(f"{version} G tiled", ref, got)
    bad = bridge.run(emu.runners[version], tmp_path / "in", tmp_path / "bad", aic=3, extra=("--tiles", "G=3"))
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "G tiles" in bad.stderr


@pytest.mark.parametrize("kernel_version", ["v3", "v4", "v5", "v6"])
def test_the_operator_takes_the_plans_tiles_as_attributes(tmp_path, capsys, kernel_version):
    """The CANN path (not compiled here: no CANN) gets the plan's tile counts as operator attributes, one per phase
    the kernel tiles as planned (bridge.tile_attr): the msopgen description and op_host's OpDef declare them in the
    same order with the same defaults, and the TilingFunc reads each at its index and passes it to the tiling.
    gen_data.py --plan writes the plan's values into meta.txt for the NPU app; they are the host runner's --tiles."""
    kernel = bridge.KERNELS[kernel_version]
    folder = ROOT / "ascendc_stubs" / kernel
    desc = json.loads((folder / f"{kernel}.json").read_text())[0]["attr"]
    src = (folder / "op_host" / f"{kernel}.cpp").read_text()
    opdef = re.findall(r'this->Attr\("(\w+)"\)\.AttrType\((\w+)\)\.(\w+)\(([^)]*)\)', src)
    assert [a["name"] for a in desc] == [name for name, *_ in opdef]
    for a, (_, kind, _, default) in zip(desc, opdef):
        assert kind == a["param_type"].upper()
        assert default == a.get("default_value", "")
    names = [a["name"] for a in desc]
    read = dict(re.findall(r"GetAttrPointer<int64_t>\((\d+)\);\s*// (\w+)", src))
    tiled = bridge.KERNEL_TILED[kernel]
    for phase in tiled:
        attr = bridge.tile_attr(phase)
        assert attr in names and read.get(str(names.index(attr))) == attr, (attr, read)
    assert len(re.findall(rf"static_cast<uint32_t>\(\*\w+Tiles\)", src)) == len(tiled)   # all passed on
    # the plan's values, by gen_data.py --plan, as the runner's --tiles has them
    dtype = "bf16"
    gen = load_script("gen_data")
    assert gen.main(["--out", str(tmp_path / "in"), "--heads", "1", "--chunks", "2", "--dtype", dtype,
                     "--plan", kernel_version]) == 0
    meta = dict(line.split() for line in (tmp_path / "in" / "meta.txt").read_text().splitlines())
    plans = bridge.sim_plans(kernel_version, heads=1, chunks=2, dtype=dtype)
    option = dict(item.split("=") for item in bridge.tiles_option(kernel, plans)[1].split(","))
    assert {bridge.tile_attr(k): n for k, n in option.items()} == {a: meta[a] for a in map(bridge.tile_attr, tiled)}
    assert bridge.tile_attrs(kernel, plans) == {bridge.tile_attr(k): int(n) for k, n in option.items()}
