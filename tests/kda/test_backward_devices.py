"""The backward on any torch device: every tensor the backward driver, the backward programs, the
autograd function and the fp64 reference make follows the inputs' device.

Without a GPU: every factory call that names no device lands on `meta` (`with torch.device("meta")`), so a
tensor made without `device=` meets the CPU inputs and fails, as it would meet CUDA inputs (before the fix:
"Tensor on device meta is not on the expected device cpu", the masks of v4's and fla's backward).
With a GPU (marked `cuda`): the gradients of kda.chunk_kda under autograd against FLA's Triton chunk_kda
backward (8 heads x 8192 tokens, bf16, FLA's tolerances) and against fp64 autograd of the recurrence."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import kda
from kda.driver.backward import execute_backward
from kda.driver.inputs import make_inputs
from kda.programs import BACKWARD
from kda.reference.parity import assert_close, tolerance
from kda.reference.recurrence_bwd import GRADS, recurrent_kda_grads

VERSIONS = list(BACKWARD)


def _case(batch=2, tokens=70, heads=2, d=16, gates="slow", seed=1):
    x = make_inputs(batch, tokens, heads, d, d, gates=gates, seed=seed, initial_state=True)
    gen = torch.Generator().manual_seed(seed + 1)
    do = torch.randn(batch, tokens, heads, d, generator=gen)
    dht = torch.randn(batch, heads, d, d, generator=gen)
    return x, do, dht


@pytest.mark.parametrize("version", VERSIONS)
def test_the_backward_makes_nothing_on_the_default_device(version):
    x, do, dht = _case()
    args = (x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, do, dht)
    want = execute_backward(*args, version=version, chunk_size=32, transfer_dtype="bf16")
    with torch.device("meta"):
        got = execute_backward(*args, version=version, chunk_size=32, transfer_dtype="bf16")
    for n in GRADS:
        assert got.grads[n].device.type == "cpu" and torch.equal(got.grads[n], want.grads[n]), n


def test_variable_lengths_autograd_and_the_reference_make_nothing_on_the_default_device():
    x, do, dht = _case(batch=1, tokens=90)
    cu = torch.tensor([0, 33, 90])
    h0 = torch.randn(2, 2, 16, 16, generator=torch.Generator().manual_seed(3))
    with torch.device("meta"):
        bx = execute_backward(x.q, x.k, x.v, x.g, x.beta, None, h0, do, dht.expand(2, -1, -1, -1), version="v6",
                              chunk_size=32, cu_seqlens=cu)
        leaves = [t.clone().requires_grad_(True) for t in (x.q, x.k, x.v, x.g, x.beta)]
        o, _ = kda.chunk_kda(*leaves, version="v4", chunk_size=32)
        (o * do).sum().backward()
        ref = recurrent_kda_grads(x.q, x.k, x.v, x.g, x.beta, None, None, do, None)       # h0 = zeros
    assert {t.device.type for t in (*bx.grads.values(), *(t.grad for t in leaves), *ref.values())} == {"cpu"}


pytestmark_cuda = pytest.mark.cuda
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytestmark_cuda
@needs_cuda
@pytest.mark.parametrize("version", VERSIONS)
def test_cuda_gradients_match_fp64_autograd_at_a_small_shape(version):
    x, do, dht = _case(batch=2, tokens=100, heads=2, d=32, gates="kimi")
    dev = lambda t: t.to("cuda")
    leaves = [dev(t).requires_grad_(True) for t in (x.q, x.k, x.v, x.g, x.beta, x.initial_state)]
    o, ht = kda.chunk_kda(*leaves[:5], None, leaves[5], True, version=version, chunk_size=32, transfer_dtype="fp32")
    ((o * dev(do)).sum() + (ht * dev(dht)).sum()).backward()
    ref = recurrent_kda_grads(*(dev(t) for t in (x.q, x.k, x.v, x.g, x.beta)), None, dev(x.initial_state),
                              dev(do), dev(dht))
    for n, leaf in zip(GRADS, leaves):
        assert leaf.grad.device.type == "cuda"
        assert_close(n, ref[n], leaf.grad, tolerance(n, "fp32"))


def _layer(gates: str, heads: int = 8, tokens: int = 8192, d: int = 128, seed: int = 0):
    """bf16 q, k (L2-normalised), v, beta; fp32 log decay and h0; bf16 do, fp32 dht: FLA's test inputs."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=gen, device="cuda")
    q, k = (F.normalize(rnd(1, tokens, heads, d), dim=-1).bfloat16() for _ in range(2))
    v = rnd(1, tokens, heads, d).bfloat16()
    g = F.logsigmoid(rnd(1, tokens, heads, d)) if gates == "seed" else -5.0 * torch.sigmoid(rnd(1, tokens, heads, d))
    beta = torch.sigmoid(rnd(1, tokens, heads)).bfloat16()
    h0 = rnd(1, heads, d, d)
    return (q, k, v, g, beta, h0), rnd(1, tokens, heads, d).bfloat16(), rnd(1, heads, d, d)


def _grads(fn, inputs, do, dht):
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    o, ht = fn(*leaves)
    ((o.float() * do.float()).sum() + (ht.float() * dht).sum()).backward()
    return dict(zip(GRADS, (t.grad for t in leaves)))


@pytestmark_cuda
@needs_cuda
@pytest.mark.parametrize("gates", ["seed", "kimi"])
def test_cuda_gradients_match_flas_triton_backward(gates):
    try:
        from fla.ops.kda import chunk_kda as fla_chunk_kda
    except ImportError as err:
        pytest.skip(f"fla-core is not importable ({err})")
    inputs, do, dht = _layer(gates)
    fla = _grads(lambda q, k, v, g, b, h0: fla_chunk_kda(q=q, k=k, v=v, g=g, beta=b, initial_state=h0,
                                                          output_final_state=True), inputs, do, dht)
    failures = []
    for version in VERSIONS:
        ours = _grads(lambda q, k, v, g, b, h0: kda.chunk_kda(q, k, v, g, b, None, h0, True, version=version),
                      inputs, do, dht)
        for n in GRADS:
            try:
                assert ours[n].device.type == "cuda" and ours[n].dtype == inputs[GRADS.index(n)].dtype
                assert_close(f"{version} {n}", fla[n].float(), ours[n].float(), tolerance(n, "bf16"))
            except AssertionError as err:
                failures.append(str(err))
    assert not failures, "; ".join(failures)
