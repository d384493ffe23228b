"""The multi-pass designs (fla, v5) against the fp64 recurrence through kda.chunk_kda and the CLI, FLA's
varlen (cu_seqlens), and what their layout does on the chip."""
import json

import pytest
import torch

import kda
from kda.settings import Settings
from kda.studies.evaluate import evaluate
from kda.driver.inputs import make_inputs
from kda.reference.parity import compare
from kda.reference.recurrence import naive_recurrent_kda
from kda.cli.run import main
from npusim import Precision

# slow gates in bf16 need the recommended policy: the state pass's hand-offs in fp16 (bounded values)
SLOW_BF16 = {"v5": {n: "fp16" for n in ("M", "K_scaled", "Q_scaled", "K_decay", "U", "WS", "V_pseudo", "S_delta")},
             "fla": {n: "fp16" for n in ("A_inv", "W", "U", "V_new", "H", "K_decay", "WS", "S_delta")},
             "v6": {n: "fp16" for n in ("K_scaled", "Q_scaled", "K_decay", "U", "WS", "V_pseudo", "S_delta")}}


def _check(version, gates, dtype, B=2, T=200, H=2, d=32):
    x = make_inputs(B, T, H, d, d, gates, 0, True)
    ref_o, ref_S = naive_recurrent_kda(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, True, dtype=torch.float64)
    precision = None
    if gates == "slow" and dtype == "bf16" and version in SLOW_BF16:     # mform passes with its defaults
        precision = Precision("bf16", SLOW_BF16[version], state="fp32")
    o, S = kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, True, version=version,
                         transfer_dtype=dtype, precision=precision)
    # the reference sees q, k, v as GM holds them (rounded to the transfer type)
    p = Precision(dtype)
    r = lambda t: p.round(t.float(), dtype)
    ref_o, ref_S = naive_recurrent_kda(r(x.q), r(x.k), r(x.v), x.g, x.beta, None, x.initial_state, True,
                                       dtype=torch.float64)
    return compare(ref_o, o), compare(ref_S, S)


@pytest.mark.parametrize("version", ["fla", "v5", "mform", "v6"])
@pytest.mark.parametrize("gates", ["seed", "kimi", "strong", "slow"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_designs_match_the_recurrence(version, gates, dtype):
    po, ps = _check(version, gates, dtype)
    assert po.passed and ps.passed, (po, ps)
    if dtype == "fp32":
        assert po.rel_rms_err < 1e-5 and ps.rel_rms_err < 1e-5


@pytest.mark.parametrize("version", ["fla", "v5", "v4", "mform", "v6"])
def test_cu_seqlens_runs_each_sequence_on_its_own(version):
    lengths = [70, 5, 130]
    x = make_inputs(1, sum(lengths), 2, 16, 16, "kimi", 1, False)
    cu = torch.tensor([0, 70, 75, 205])
    o, S = kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, None, None, True, version=version, transfer_dtype="fp32",
                         cu_seqlens=cu)
    assert S.shape == (3, 2, 16, 16)
    a = 0
    for i, n in enumerate(lengths):
        part = lambda t: t[:, a:a + n]
        ro, rS = naive_recurrent_kda(part(x.q), part(x.k), part(x.v), part(x.g), part(x.beta), None, None, True,
                                     dtype=torch.float64)
        assert compare(ro, o[:, a:a + n]).rel_rms_err < 1e-5 and compare(rS, S[i:i + 1]).rel_rms_err < 1e-5
        a += n


def test_cu_seqlens_that_do_not_match_the_inputs_are_refused():
    x = make_inputs(1, 100, 1, 8, 8, "seed", 0, False)
    for cu, msg in (([0, 50, 90], "ends at 90"), ([0, 60, 60, 100], "increase strictly"), ([1, 100], "start at 0")):
        with pytest.raises(kda.KdaInputError, match=msg):
            kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, version="v5", cu_seqlens=cu)


def test_v5_spreads_one_head_over_every_core():
    r = evaluate("v5", Settings(heads=1, tokens=131072, numerics=False, keep_trace=False))
    intra, state = r.design_report.passes
    assert intra.layout == "chunks" and intra.cores == 24 and intra.items == 2048
    assert state.cores == 1
    assert r.design_report.launches == 1 and r.design_report.barriers == 1


def test_one_pass_designs_report_the_same_latency_both_ways():
    r = evaluate("v3", Settings(heads=3, chunks=8, numerics=False))
    assert r.design_report.latency_us == pytest.approx(r.report.pipelined_us)
    assert r.design_report.floor_us < r.design_report.latency_us


def test_floor_counts_inputs_outputs_and_states_once():
    """bf16 q, k, v, o (2 B), fp32 g and beta (4 B), fp32 initial and final state, at 1.6 TB/s."""
    s = Settings(heads=2, tokens=1000, d_k=64, d_v=32, numerics=False)
    r = evaluate("v5", s)
    expect = 2 * 1000 * ((2 * 64 + 2 * 32) * 2 + (64 + 1) * 4) + 2 * 2 * 64 * 32 * 4
    assert r.design_report.floor_bytes == expect
    assert r.design_report.floor_us == pytest.approx(expect / 1.6e6)


def test_cli_runs_a_design_with_numerics_and_interleave(capsys):
    assert main(["--version", "v5", "--chunks", "3", "--heads", "2", "--cores", "1", "--dk", "32", "--dv", "32", "--dtype", "fp32",
                 "--interleave", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["parity"]["pass"] and d["errors"]["o"] < 1e-5 and d["interleave"] == 2
    assert [p["name"] for p in d["layer"]["passes"]] == ["intra", "state"]


def test_cli_varlen_and_bad_shapes(capsys):
    assert main(["--version", "fla", "--seqlens", "100,30", "--dk", "16", "--dv", "16", "--dtype", "fp32",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["parity"]["pass"] and d["seqlens"] == [100, 30] and d["tokens"] == 130
    for args, msg in ((["--interleave", "0"], "--interleave must be >= 1"), (["--seqlens", ""], "--seqlens is empty"),
                      (["--seqlens", "10,0"], "at least one token"), (["--seqlens", "10,x"], "not a whole number"),
                      (["--version", "v9"], "unknown version 'v9'"),
                      (["--seqlens", "10", "--batch", "2"], "replaces --batch")):
        assert main(["--no-numerics", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert msg in err and len(err.splitlines()) == 1


def test_mform_keeps_its_state_on_the_cube_through_gm():
    """The state pass is one Cube phase: no hand-off, the state reloaded from GM each chunk (L0C -> FixPipe ->
    GM -> L1 on A2) beside T and C_state, H stored. By hand, bf16, d = 128, one tile (loads, MACs and the
    FixPipe store one after another): MTE2 96 KiB at 57.6 GB/s, [128 x 256] @ [256 x 128] at 4096 MACs a
    cycle plus the 100-cycle matmul overhead at 1.8 GHz, FixPipe 32 KiB at 115.2 GB/s."""
    from kda.driver.execute import record_graphs
    from kda.programs import get_design
    from npusim import build_template, load_profile
    graphs, _ = record_graphs(get_design("mform"), chunk_size=64, d_k=128, d_v=128, precision=Precision("bf16"))
    state = graphs[1]
    (phase,) = state.phases
    assert phase.unit == "cube" and not state.syncs
    assert phase.gm_read_bytes == 3 * 128 * 128 * 2 and phase.gm_write_bytes == 128 * 128 * 2
    assert phase.ops[0].macs == 128 * 128 * 256 and phase.ops[0].operand_bytes == 2
    tpl = build_template(state, load_profile("ascend-910b2-uncalibrated"))   # the flat costs worked out below
    (node,) = tpl.nodes
    expect = 3 * 32768 / 57.6e3 + (128 * 128 * 256 / 4096 + 100) / 1.8e3 + 32768 / 115.2e3
    assert node.busy_us == pytest.approx(expect, rel=1e-6)


def test_a_state_handed_between_units_is_not_reloaded():
    """v5's state pass hands its state over a link: no Cube phase loads it from GM as well."""
    from kda.driver.execute import record_graphs
    from kda.programs import get_design
    graphs, _ = record_graphs(get_design("v5"), chunk_size=64, d_k=128, d_v=128,
                              precision=Precision("bf16", state="fp32"))
    d2 = next(p for p in graphs[1].phases if p.name == "D2")
    assert d2.gm_read_bytes == 0


def test_v6_hands_off_six_payloads_that_fit_a_slot_each():
    """v6 (one loop) keeps v5's intra hand-offs and sends the state pass's operands with ③, from Phase C.
    bf16, C = 64, d = 128, by hand: ① v5's factors, K_left and Q_left 3 x 16 x 128, K_right 6 x 16 x 128,
    K_left4 and Q_left4 4 x 3 x 4 x 128, K_right4 4 x 6 x 4 x 128 -> (3 + 3 + 6) x 2048 + (3 + 3 + 6) x
    2048 elements x 2 B = 96 KiB; ③ Ai_diag 4 x 16 x 16, A_neg, D_beta, A_qk 64 x 64, K_scaled, Q_scaled,
    K_decay 64 x 128 -> (1024 + 3 x 4096 + 3 x 8192) x 2 B = 74 KiB; both within the 128 KiB slot."""
    from kda.driver.execute import record_graphs
    from kda.programs import get_design
    graphs, _ = record_graphs(get_design("v6"), chunk_size=64, d_k=128, d_v=128,
                              precision=Precision("bf16", state="fp32"))
    g = graphs[0]
    sizes = {s.label: s.nbytes for s in g.syncs}
    assert sizes == {"①": 96 * 1024, "②": 7680, "③": 74 * 1024, "④": 2 * 16384, "⑤": 16384, "⑥": 32768}
    assert [p.name for p in g.syncs[0].payload] == ["K_left", "Q_left", "K_right", "K_left4", "Q_left4", "K_right4"]
    assert not any(p.redundant or p.unused for s in g.syncs for p in s.payload)
    r = evaluate("v6", Settings(heads=2, chunks=4, numerics=False))
    assert r.workspace_error is None and r.design_run is not None
