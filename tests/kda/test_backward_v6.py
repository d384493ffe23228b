"""v6's backward (kda/programs/v6_bwd.py; v5 shares it): every gradient against the fp64 autograd reference of
the token-by-token recurrence over the four gate families, fp32, bf16 and fp16 hand-offs, odd T, B > 1 and
cu_seqlens; the safe math (no exp of a positive argument); gradcheck; the design's passes and hand-offs."""
import pytest
import torch

import kda
from kda.driver.backward import execute_backward
from kda.driver.inputs import make_inputs
from kda.programs import get_backward_design
from kda.reference.parity import assert_close, tolerance
from kda.reference.recurrence_bwd import recurrent_kda_grads
from kda.studies.backward_eval import evaluate_backward
from kda.settings import Settings

from tests.kda.test_backward import GRADS, _ExpInputs, grad_outputs


@pytest.mark.parametrize("gates, batch, tokens", [("seed", 1, 96), ("kimi", 2, 70), ("slow", 1, 100),
                                                  ("strong", 2, 45)])
def test_every_gradient_matches_fp64_autograd_in_fp32(gates, batch, tokens):
    x = make_inputs(batch, tokens, 2, 16, 16, gates=gates, seed=3, initial_state=True)
    do, dht = grad_outputs(x)
    bx = execute_backward(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, do, dht, version="v6",
                          chunk_size=32, transfer_dtype="fp32")
    ref = recurrent_kda_grads(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, do, dht)
    assert bx.nonfinite is None
    for n in GRADS:
        assert bx.grads[n].shape == ref[n].shape
        # strong gates (alpha = 0.01 a token): dg is a reverse cumulative sum of terms that cancel to a few
        # 1e-5 of their size in fp32 arithmetic, for v4's backward as for v6's (2.5e-5 and 2.3e-5 rel RMS)
        tol = 1e-4 if (gates, n) == ("strong", "dg") else tolerance(n, "fp32")
        assert_close(n, ref[n], bx.grads[n], tol)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("gates", ["seed", "kimi", "slow", "strong"])
def test_narrow_hand_offs_meet_flas_gradient_tolerances(dtype, gates):
    r = evaluate_backward("v6", Settings(chunks=4, chunk_size=32, d_k=32, d_v=32, dtype=dtype, gates=gates,
                                         initial_state=True), forward=False)
    assert r.tolerances == {"dq": 0.008, "dk": 0.008, "dv": 0.008, "dg": 0.02, "dbeta": 0.02, "dh0": 0.008}
    assert r.passed, {n: p.rel_rms_err for n, p in r.parity.items()}


def test_chunks_of_64_with_two_levels_of_blocks():
    # C = 64: four 16-wide sub-chunks (6 pairs) of four 4-wide micro-chunks (6 pairs each)
    x = make_inputs(1, 130, 1, 16, 16, gates="kimi", seed=9, initial_state=True)
    do, dht = grad_outputs(x)
    bx = execute_backward(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, do, dht, version="v6",
                          chunk_size=64, transfer_dtype="fp32")
    ref = recurrent_kda_grads(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, do, dht)
    for n in GRADS:
        assert_close(n, ref[n], bx.grads[n], tolerance(n, "fp32"))


def test_hand_derived_gradients_with_zero_keys_and_no_decay():
    # k = 0, g = 0: the state stays h0 and o_t = scale q_t^T h0, so dq_t = scale h0 do_t, dv = dbeta = 0
    x = make_inputs(1, 40, 1, 16, 16, seed=5, initial_state=True)
    do, dht = grad_outputs(x)
    bx = execute_backward(x.q, torch.zeros_like(x.k), x.v, torch.zeros_like(x.g), x.beta, 0.25, x.initial_state,
                          do, dht, version="v6", chunk_size=32, transfer_dtype="fp32")
    h0 = x.initial_state[0, 0]
    torch.testing.assert_close(bx.grads["dq"][0, :, 0], 0.25 * do[0, :, 0] @ h0.T, rtol=1e-5, atol=1e-6)
    assert float(bx.grads["dv"].abs().max()) == 0.0 and float(bx.grads["dbeta"].abs().max()) == 0.0
    torch.testing.assert_close(bx.grads["dh0"][0, 0], 0.25 * x.q[0, :, 0].T @ do[0, :, 0] + dht[0, 0],
                               rtol=1e-5, atol=1e-5)


def test_no_exp_of_a_positive_argument_and_no_overflow_in_fp16():
    x = make_inputs(1, 64, 1, 16, 16, gates="kimi", seed=2)
    g = torch.full_like(x.g, -40.0)            # 2560 nats per chunk: exp(-gc) would overflow anything
    do, dht = grad_outputs(x)
    with _ExpInputs() as watch:
        bx = execute_backward(x.q, x.k, x.v, g, x.beta, None, None, do, dht, version="v6", chunk_size=32,
                              transfer_dtype="fp16")
    assert watch.largest <= 0.0 and bx.nonfinite is None


def test_gradcheck_in_fp64():
    x = make_inputs(1, 40, 1, 8, 8, gates="slow", seed=4, initial_state=True)
    args = [t.double().requires_grad_(True) for t in (x.q, x.k, x.v, x.g, x.beta, x.initial_state)]
    f = lambda q, k, v, g, b, h0: kda.chunk_kda(q, k, v, g, b, None, h0, True, version="v6", chunk_size=32)
    assert torch.autograd.gradcheck(f, args, eps=1e-6, atol=1e-6, rtol=1e-4, fast_mode=True)


@pytest.mark.parametrize("version", ["v6", "v5"])
def test_variable_lengths_under_autograd_match_each_sequence_alone(version):
    lengths, H, d = (40, 75), 2, 16
    x = make_inputs(1, sum(lengths), H, d, d, gates="kimi", seed=6)
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


def test_the_design_its_passes_and_hand_offs():
    re, st = get_backward_design("v6", "recompute"), get_backward_design("v6", "store")
    assert [p.name for p in re.passes] == ["v6.states", "v6.bwd"] and [p.name for p in st.passes] == ["v6.bwd"]
    assert get_backward_design("v5") is re                  # v5 computes v6's forward math
    s = Settings(chunks=4, chunk_size=64, d_k=128, d_v=128, dtype="bf16", numerics=False, heads=2)
    r = evaluate_backward("v6", s, "recompute")
    assert r.report.syncs_per_chunk == 6 + 6                 # v6.states' six, the backward's six
    assert r.report.latency_us > evaluate_backward("v6", s, "store").report.latency_us
