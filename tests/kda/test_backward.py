"""The backward pass: every gradient of both backward designs against the fp64 autograd
reference (the token-by-token recurrence, independent of the chunk form), hand-derived gradients,
gradcheck, recompute against store, bad input, and the CLI."""
import json

import pytest
import torch
from torch.overrides import TorchFunctionMode

import kda
from kda import KdaInputError
from kda.driver.backward import execute_backward, kept_bytes
from kda.studies.backward_eval import evaluate_backward
from kda.settings import Settings
from kda.driver.inputs import make_inputs
from kda.reference.parity import assert_close, tolerance
from kda.reference.recurrence_bwd import recurrent_kda_grads
from kda.cli.run import main
from npusim import Precision
from npusim.record.ops import base_name
from npusim.model.schedule import CHUNKS, SEQUENTIAL, Design, Pass

GRADS = ("dq", "dk", "dv", "dg", "dbeta", "dh0")


def grad_outputs(x, seed=7):
    gen = torch.Generator().manual_seed(seed)
    B, T, H, K = x.q.shape
    V = x.v.shape[-1]
    return torch.randn(B, T, H, V, generator=gen), torch.randn(B, H, K, V, generator=gen)


@pytest.mark.parametrize("version", ["v4", "fla"])
@pytest.mark.parametrize("gates, batch, tokens", [("seed", 1, 96), ("kimi", 2, 70), ("slow", 1, 100)])
def test_every_gradient_matches_fp64_autograd_in_fp32(version, gates, batch, tokens):
    x = make_inputs(batch, tokens, 2, 16, 16, gates=gates, seed=3, initial_state=True)
    do, dht = grad_outputs(x)
    bx = execute_backward(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, do, dht, version=version,
                          chunk_size=32, transfer_dtype="fp32")
    ref = recurrent_kda_grads(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, do, dht)
    assert bx.nonfinite is None
    for n in GRADS:
        assert bx.grads[n].shape == ref[n].shape
        assert_close(n, ref[n], bx.grads[n], tolerance(n, "fp32"))       # rel RMS < 1e-5


@pytest.mark.parametrize("version", ["v4", "fla"])
def test_bf16_hand_offs_meet_flas_gradient_tolerances(version):
    r = evaluate_backward(version, Settings(chunks=4, chunk_size=32, d_k=32, d_v=32, dtype="bf16", gates="slow",
                                            initial_state=True), forward=False)
    assert r.tolerances == {"dq": 0.008, "dk": 0.008, "dv": 0.008, "dg": 0.02, "dbeta": 0.02, "dh0": 0.008}
    assert r.passed, {n: p.rel_rms_err for n, p in r.parity.items()}


@pytest.mark.parametrize("version", ["v4", "fla"])
def test_hand_derived_gradients_with_zero_keys_and_no_decay(version):
    # k = 0 and g = 0: the state stays h0, o_t = scale q_t^T h0. So dq_t = scale h0 do_t, dv = 0, dbeta = 0,
    # dh0 = scale sum_t q_t do_t^T + dht, and dg_t = sum over later tokens of the decay's effect on h0.
    x = make_inputs(1, 40, 1, 16, 16, seed=5, initial_state=True)
    k, g = torch.zeros_like(x.k), torch.zeros_like(x.g)
    do, dht = grad_outputs(x)
    scale = 16 ** -0.5
    bx = execute_backward(x.q, k, x.v, g, x.beta, scale, x.initial_state, do, dht, version=version, chunk_size=32,
                          transfer_dtype="fp32")
    h0 = x.initial_state[0, 0]
    q, dO = x.q[0, :, 0], do[0, :, 0]
    torch.testing.assert_close(bx.grads["dq"][0, :, 0], scale * dO @ h0.T, rtol=1e-5, atol=1e-6)
    assert float(bx.grads["dv"].abs().max()) == 0.0 and float(bx.grads["dbeta"].abs().max()) == 0.0
    torch.testing.assert_close(bx.grads["dh0"][0, 0], scale * q.T @ dO + dht[0, 0], rtol=1e-5, atol=1e-5)
    # d/dg_s of the decays prod_{s <= t} exp(g_s): every later output and the final state see it
    later = torch.flip(torch.cumsum(torch.flip(scale * q * (dO @ h0.T), [0]), 0), [0])
    dg = later + (h0 * dht[0, 0]).sum(-1)
    torch.testing.assert_close(bx.grads["dg"][0, :, 0], dg, rtol=1e-5, atol=1e-5)


class _ExpInputs(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.largest = -float("inf")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if base_name(func) == "exp":
            self.largest = max(self.largest, float(args[0].max()))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("version", ["v4", "fla"])
def test_no_exp_of_a_positive_argument_and_no_overflow_in_fp16(version):
    x = make_inputs(1, 64, 1, 16, 16, gates="kimi", seed=2)
    g = torch.full_like(x.g, -40.0)            # 2560 nats per chunk: exp(-gc) would overflow anything
    do, dht = grad_outputs(x)
    with _ExpInputs() as watch:
        bx = execute_backward(x.q, x.k, x.v, g, x.beta, None, None, do, dht, version=version, chunk_size=32,
                              transfer_dtype="fp16")
    assert watch.largest <= 0.0 and bx.nonfinite is None


def test_overflowing_hand_off_is_named_with_its_pass_and_chunk():
    x = make_inputs(1, 64, 1, 16, 16, seed=2)
    do, dht = grad_outputs(x)
    bx = execute_backward(x.q, x.k, x.v, x.g, x.beta, None, None, do * 1e5, dht, version="v4", chunk_size=32,
                          transfer_dtype="fp16")
    nf = bx.nonfinite
    assert nf is not None and nf.chunk == 1            # the reverse walk meets the last chunk first
    assert "v4.bwd" in nf.where or "v4.states" in nf.where


@pytest.mark.parametrize("version", ["v4", "fla"])
def test_gradcheck_in_fp64(version):
    x = make_inputs(1, 40, 1, 8, 8, gates="slow", seed=4, initial_state=True)
    args = [t.double().requires_grad_(True) for t in (x.q, x.k, x.v, x.g, x.beta, x.initial_state)]
    f = lambda q, k, v, g, b, h0: kda.chunk_kda(q, k, v, g, b, None, h0, True, version=version, chunk_size=32)
    assert torch.autograd.gradcheck(f, args, eps=1e-6, atol=1e-6, rtol=1e-4, fast_mode=True)


def test_chunk_kda_under_autograd_gives_the_backward_drivers_gradients():
    x = make_inputs(1, 48, 2, 16, 16, gates="slow", seed=1, initial_state=True)
    do, dht = grad_outputs(x)
    leaves = [t.clone().requires_grad_(True) for t in (x.q, x.k, x.v, x.g, x.beta, x.initial_state)]
    o, ht = kda.chunk_kda(*leaves[:5], None, leaves[5], True, version="fla", chunk_size=32, transfer_dtype="fp32")
    ((o * do).sum() + (ht * dht).sum()).backward()
    ref = recurrent_kda_grads(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, do, dht)
    for n, leaf in zip(GRADS[:5] + ("dh0",), leaves):
        assert_close(n, ref[n], leaf.grad, 1e-5)
    with torch.no_grad():                      # no gradients asked: the plain forward, any design
        assert kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, version="v3")[0].shape == x.v.shape


def test_recompute_and_store_cost_what_they_should():
    s = Settings(chunks=4, chunk_size=32, d_k=16, d_v=16, dtype="bf16", numerics=False, heads=2)
    re, st = (evaluate_backward("v4", s, states) for states in ("recompute", "store"))
    assert [p.name for p in re.report.passes] == ["v4.states", "v4.bwd"]
    assert [p.name for p in st.report.passes] == ["v4.bwd"]
    assert st.report.latency_us < re.report.latency_us
    # store keeps each chunk's starting state H (16 x 16 fp32, the state type under bf16): 4 chunks x 2 heads
    assert re.kept_bytes == 0 and st.kept_bytes == 16 * 16 * 4 * 4 * 2
    p = Precision("bf16", state="fp32")
    assert kept_bytes("fla", "store", 1, 1, 16, 16, p, 32) == (
        16 * 16 * 4 + 32 * 16 * 2 * 3 + 32 * 32 * 2 * 2)     # H fp32; gc, W, V_new; A_inv, A_qk (bf16)


def test_reverse_passes_in_the_schedule():
    from kda.programs.fla_bwd import bwd_dhu, bwd_dv_local
    from kda.programs.fla import fwd_h
    with pytest.raises(ValueError, match="no order to reverse"):
        Pass("x", bwd_dv_local, CHUNKS, reverse=True)
    with pytest.raises(ValueError, match="more than one pass carries the state backwards"):
        Design("d", (Pass("a", bwd_dhu, SEQUENTIAL, reverse=True), Pass("b", bwd_dhu, SEQUENTIAL, reverse=True)))
    d = Design("d", (Pass("a", fwd_h, SEQUENTIAL), Pass("b", bwd_dhu, SEQUENTIAL, reverse=True)))
    assert d.state_pass.name == "a" and d.reverse_state_pass.name == "b"


def test_bad_backward_requests_are_one_line_errors():
    x = make_inputs(1, 32, 1, 16, 16)
    do, _ = grad_outputs(x)
    with pytest.raises(KdaInputError, match="'v3' has no backward program"):
        execute_backward(x.q, x.k, x.v, x.g, x.beta, None, None, do, version="v3", chunk_size=32)
    with pytest.raises(KdaInputError, match=r"do must have shape \[1, 32, 1, 16\]"):
        execute_backward(x.q, x.k, x.v, x.g, x.beta, None, None, do[:, :10], version="v4", chunk_size=32)
    bad = do.clone()
    bad[0, 3, 0, 1] = float("nan")
    with pytest.raises(KdaInputError, match="do contains NaN or inf"):
        execute_backward(x.q, x.k, x.v, x.g, x.beta, None, None, bad, version="v4", chunk_size=32)
    with pytest.raises(KdaInputError, match="chunk_size must be a multiple of 16 and at least 32"):
        execute_backward(x.q, x.k, x.v, x.g, x.beta, None, None, do, version="v4", chunk_size=16)
    leaves = [t.clone().requires_grad_(True) for t in (x.q, x.k, x.v, x.g, x.beta)]
    with pytest.raises(KdaInputError, match="version='v3' under autograd: design 'v3' has no backward program"):
        kda.chunk_kda(*leaves, version="v3")


def test_cli_backward_reports_gradients_and_timing(capsys):
    assert main(["--backward", "--version", "v4", "--chunks", "2", "--chunk-size", "32", "--dk", "16", "--dv", "16",
                 "--dtype", "fp32", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["pass"] is True and set(d["parity"]) == set(GRADS) and d["nonfinite"] is None
    b = d["backward"]
    assert [p["name"] for p in b["passes"]] == ["v4.states", "v4.bwd"] and b["syncs_per_chunk"] == 6 + 6
    assert b["bound_us"] <= b["latency_us"] <= b["serial_us"]
    assert d["training_us"] == pytest.approx(d["forward_latency_us"] + b["latency_us"])


@pytest.mark.parametrize("args, message", [
    (["--version", "v3"], "--version: design 'v3' has no backward program"),
    (["--version", "mform"], "--version: design 'mform' has no backward program"),
    (["--version", "v4", "--uncertainty", "3"], "--backward does not take --uncertainty yet"),
])
def test_cli_backward_errors_exit_2_with_one_line(capsys, args, message):
    size = [] if "--seqlens" in args else ["--chunks", "2"]          # --seqlens replaces --chunks
    assert main(["--backward", *args, *size, "--dk", "16", "--dv", "16"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_cli_backward_defaults_to_v6_and_takes_seqlens(capsys):
    assert main(["--backward", "--seqlens", "40,75", "--heads", "2", "--chunk-size", "32", "--dk", "16", "--dv", "16",
                 "--dtype", "fp32", "--initial-state", "randn", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["version"] == "v6" and d["pass"] is True and set(d["parity"]) == set(GRADS)
    assert max(p["rel_rms_err"] for p in d["parity"].values()) < 1e-5     # each sequence alone, fp64
    # two sequences of 2 and 3 chunks of 32 and 2 heads: 10 (sequence, chunk) items through both passes
    assert [(p["name"], p["items"]) for p in d["backward"]["passes"]] == [("v6.states", 10), ("v6.bwd", 10)]


@pytest.mark.parametrize("make_do, message", [
    (lambda do: do[:, :5], "do must have shape"),
    (lambda do: do.masked_fill(torch.zeros_like(do, dtype=torch.bool).index_fill_(1, torch.tensor([3]), True),
                               float("inf")), "do contains NaN or inf"),
])
def test_cli_backward_rejects_bad_do_from_inputs(tmp_path, capsys, make_do, message):
    x = make_inputs(1, 32, 1, 16, 16)
    do, _ = grad_outputs(x)
    path = tmp_path / "in.pt"
    torch.save({"q": x.q, "k": x.k, "v": x.v, "g": x.g, "beta": x.beta, "do": make_do(do)}, path)
    assert main(["--backward", "--version", "v4", "--inputs", str(path), "--chunk-size", "32"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_cli_backward_writes_a_trace_and_checks_policy_names(tmp_path, capsys):
    trace = tmp_path / "bwd.json"
    assert main(["--backward", "--version", "fla", "--chunks", "2", "--chunk-size", "32", "--dk", "16", "--dv", "16",
                 "--trace", str(trace), "--precision", "gc=fp32"]) == 0
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e.get("name") for e in events}
    assert {"bwd_dhu (sequential)", "bwd_intra (chunks)", "fwd_h (sequential)"} <= names   # the schedule track
    assert "S dS_prev→dS · 1 KiB (rides on ①) →" in names       # dS (16 x 16 fp32) on the reverse pass
    capsys.readouterr()
    assert main(["--backward", "--version", "v4", "--chunks", "2", "--chunk-size", "32", "--dk", "16", "--dv", "16",
                 "--precision", "gc=bf16"]) == 2                 # gc is fla's, not v4's
    err = capsys.readouterr().err.strip()
    assert "the v4 backward hands over no tensor named 'gc'" in err and "\n" not in err


def test_fla_cumulative_gates_must_stay_fp32():
    # FLA keeps gc in fp32 in GM; rounded to bf16 alone, it alone breaks FLA's tolerance on some gradient
    from kda.studies.backward_attribution import BackwardItem, attribute_backward, must_stay_fp32
    x = make_inputs(1, 64, 1, 16, 16, seed=0, initial_state=True)
    do, dht = grad_outputs(x)
    items = attribute_backward("fla", x, do, dht, chunk_size=32)
    assert items[0].name == "gc" and items[0].worst > 1.0 and "gc" in must_stay_fp32(items)
    assert all(isinstance(it, BackwardItem) and it.worst < 1.0 for it in items[1:])


@pytest.mark.parametrize("version", ["v4", "fla"])
def test_variable_lengths_under_autograd_match_each_sequence_alone(version):
    # FLA's cu_seqlens: two sequences of 40 and 75 tokens in one [1, 115, H, K] batch; the reference runs
    # each sequence through the fp64 recurrence on its own
    lengths, H, d = (40, 75), 2, 16
    x = make_inputs(1, sum(lengths), H, d, d, gates="slow", seed=6)
    gen = torch.Generator().manual_seed(8)
    h0, dht = torch.randn(2, H, d, d, generator=gen), torch.randn(2, H, d, d, generator=gen)
    do = torch.randn(1, sum(lengths), H, d, generator=gen)
    leaves = [t.clone().requires_grad_(True) for t in (x.q, x.k, x.v, x.g, x.beta, h0)]
    o, ht = kda.chunk_kda(*leaves[:5], None, leaves[5], True, version=version, chunk_size=32, transfer_dtype="fp32",
                          cu_seqlens=torch.tensor([0, 40, 115]))
    ((o * do).sum() + (ht * dht).sum()).backward()
    for i, (a, n) in enumerate(((0, 40), (40, 75))):
        cut = lambda t: t[:, a:a + n]
        ref = recurrent_kda_grads(*(cut(t) for t in (x.q, x.k, x.v, x.g, x.beta)), None, h0[i:i + 1], cut(do),
                                  dht[i:i + 1])
        for n_, leaf in zip(("dq", "dk", "dv", "dg", "dbeta"), leaves):
            assert_close(n_, ref[n_], cut(leaf.grad), 1e-5)
        assert_close("dh0", ref["dh0"], leaves[5].grad[i:i + 1], 1e-5)
