"""The fast numerics path (npusim/record/replay.py) against the recording runtime, chunk by chunk: the same bits
for every design and precision policy, and the same inf/NaN report."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from kda.driver.execute import ChunkLoop, Types, execute
from kda.driver.inputs import make_inputs
from npusim import Precision


def _inputs(tokens=200, heads=3, batch=2, gates="slow", seed=3, d=32):
    return make_inputs(batch, tokens, heads, d, d, gates, seed, initial_state=True)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit, NaN included (torch.equal says NaN != NaN)."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.int32), b.view(torch.int32))


def _both(x, pipeline=None, block=16, **kw):
    slow = execute(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, loop=ChunkLoop(fast=False, block=block), **kw)
    fast = execute(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state,
                   loop=ChunkLoop(fast=True, pipeline=pipeline, block=block), **kw)
    return slow, fast


MODE = {False: "eager", True: "pipelined"}      # the step whole, or split over two threads (npusim/record/hoist.py)


@pytest.mark.parametrize("pipeline", [False, True])
@pytest.mark.parametrize("version", ["v3", "v4"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_fast_path_gives_the_same_bits(version, dtype, pipeline):
    # 200 tokens: 4 chunks, the last one padded; blocks of 3 chunks cross a block boundary
    x = _inputs()
    slow, fast = _both(x, pipeline, version=version, types=Types(transfer=dtype), block=3)
    assert slow.replay == "recording runtime" and fast.replay == MODE[pipeline]
    assert same(slow.o, fast.o) and same(slow.final_state, fast.final_state)
    assert slow.nonfinite == fast.nonfinite
    # v3's K_div overflows fp16 with these slow gates (README, the stability grid); nothing else does
    assert (fast.nonfinite is not None) == (version == "v3" and dtype == "fp16")


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_fast_path_gives_the_same_bits_v1_v2(version):
    x = _inputs(tokens=128, heads=2, batch=1)
    slow, fast = _both(x, True, version=version, types=Types(transfer="bf16"))
    assert fast.replay == "pipelined"
    assert same(slow.o, fast.o) and same(slow.final_state, fast.final_state)


def test_fast_path_with_a_policy_and_narrow_accumulation():
    x = _inputs(tokens=128)
    p = Precision("bf16", {"M": "fp16", "K_div": "fp32"}, state="fp32", accumulate="bf16")
    slow, fast = _both(x, version="v3", types=Types(policy=p))
    assert same(slow.o, fast.o) and same(slow.final_state, fast.final_state)


def test_bf16_inputs_are_not_rounded_twice():
    # q, k, v already bf16 with bf16 transfers: the fast path skips the identity rounding, same bits
    x = _inputs(tokens=130)
    q, k, v = (t.to(torch.bfloat16) for t in (x.q, x.k, x.v))
    slow = execute(q, k, v, x.g, x.beta, loop=ChunkLoop(fast=False))
    fast = execute(q, k, v, x.g, x.beta, loop=ChunkLoop(fast=True))
    assert slow.o.dtype == torch.float32 and same(slow.o, fast.o)


def _late_overflow(tokens=5 * 64, heads=2):
    """Gates that are mild (-0.01 per token) for chunks 0-1 and strong (-0.5 per token) from chunk 2 on:
    v3's K_div = K exp(-gc) stays below e^0.64 in chunks 0-1 and reaches e^32 in chunk 2, past fp16's
    largest value 65504 ~ e^11.1, so in fp16 it first turns to inf when sync ① rounds it, in chunk 2.
    Only head 1 gets the strong gates: the first sequence with inf is sequence 1."""
    gen = torch.Generator().manual_seed(5)
    q = F.normalize(torch.randn(1, tokens, heads, 32, generator=gen), dim=-1)
    k = F.normalize(torch.randn(1, tokens, heads, 32, generator=gen), dim=-1)
    v = torch.randn(1, tokens, heads, 32, generator=gen)
    beta = torch.sigmoid(torch.randn(1, tokens, heads, generator=gen))
    g = torch.full((1, tokens, heads, 32), -0.01)
    g[:, 128:, 1] = -0.5
    return q, k, v, g, beta


@pytest.mark.parametrize("pipeline", [False, True])
@pytest.mark.parametrize("check_every", [1, 4])
def test_the_watch_names_where_inf_first_appears(check_every, pipeline):
    q, k, v, g, beta = _late_overflow()
    assert 0.5 * 64 > math.log(65504)                  # the premise: e^32 is no fp16 number
    slow = execute(q, k, v, g, beta, version="v3", types=Types(transfer="fp16"), loop=ChunkLoop(fast=False))
    fast = execute(q, k, v, g, beta, version="v3", types=Types(transfer="fp16"), loop=ChunkLoop(fast=True, check_every=check_every, pipeline=pipeline))
    assert fast.replay == MODE[pipeline]
    nf = fast.nonfinite
    assert (nf.chunk, nf.where, nf.tensor, nf.sequence) == (2, "sync ① (fp16)", "K_div", 1)
    assert slow.nonfinite == nf
    assert same(slow.o, fast.o)


@pytest.mark.parametrize("pipeline", [False, True])
def test_the_watch_finds_an_overflow_inside_a_phase(pipeline):
    # FLA's -5*sigmoid gates: exp(-gc) overflows fp32 in Phase A of the first chunk (Gamma_inv)
    x = make_inputs(1, 128, 2, 32, 32, "kimi", 0)
    slow, fast = _both(x, pipeline, version="v3", types=Types(transfer="fp32"))
    assert fast.nonfinite == slow.nonfinite
    assert fast.nonfinite.where == "Phase A" and fast.nonfinite.chunk == 0


def test_the_api_follows_the_fast_path():
    # chunk_kda takes the fast path: the same bits as the recording runtime
    import kda
    x = _inputs(tokens=96)
    o, S = kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, initial_state=x.initial_state, output_final_state=True)
    slow = execute(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, loop=ChunkLoop(fast=False))
    assert same(o, slow.o) and same(S, slow.final_state)


def test_list_indices_become_device_tensors_without_changing_a_bit():
    # what CUDA graph capture runs under: v4's list indices (x[..., [0, 1, 2], :]) made once as index
    # tensors on the device (here the CPU) and reused; the results stay the same bits
    from npusim.record.replay import Replay, _DeviceIndices
    x = _inputs(tokens=64)
    ex = execute(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, version="v4", types=Types(transfer="bf16"), loop=ChunkLoop(fast=False))
    from npusim import Executor
    from kda.driver.chunks import chunk_of
    from kda.programs import get_program
    runner = Executor(get_program("v4"), ex.precision, input_types={"g": "fp32", "beta": "fp32"})
    B, T, H, K = x.q.shape
    cut = lambda t: chunk_of(t, 0, 64, 64, torch.float32)
    rnd = lambda t: ex.precision.round(cut(t), "bf16")
    inputs = {"Q": rnd(x.q), "K": rnd(x.k), "V": rnd(x.v), "g": cut(x.g), "beta": cut(x.beta), "scale": K ** -0.5}
    S0 = ex.precision.round(x.initial_state.reshape(B * H, K, -1), ex.precision.state_type)
    runner.record({k: (v[:1] if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}, S0[:1].clone())
    replay = Replay(runner)
    plain = replay.eager_step(dict(inputs), S0, True)
    cache = {}
    with _DeviceIndices(torch.device("cpu"), cache):
        indexed = replay.eager_step(dict(inputs), S0, True)
    # v4 with 4 sub-chunks of 16: 6 off-diagonal pairs, their rows/columns, 136 entries j <= i per block
    assert {len(k) for k in cache} >= {6, 136}
    assert same(plain[0]["O"], indexed[0]["O"]) and same(plain[1], indexed[1])
    assert same(plain[0]["O"], ex.o.reshape(B, 64, H, -1).transpose(1, 2).reshape(B * H, 64, -1))


def test_a_graph_that_cannot_be_captured_says_why_and_runs_eagerly():
    x = _inputs(tokens=64)
    ex = execute(x.q, x.k, x.v, x.g, x.beta, loop=ChunkLoop(graphs=True))
    want = execute(x.q, x.k, x.v, x.g, x.beta, loop=ChunkLoop(fast=False))
    assert ex.replay.startswith("eager; CUDA graph capture failed (RuntimeError: ")
    assert same(ex.o, want.o)


@pytest.mark.parametrize("pipeline", [False, True])
@pytest.mark.parametrize("version", ["fla", "v5"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_multi_pass_designs_replay_their_state_pass_fast(version, dtype, pipeline):
    # the sequential (state) pass of a design of several passes runs through the fast replay: same bits
    x = _inputs(tokens=200)
    slow, fast = _both(x, pipeline, version=version, types=Types(transfer=dtype))
    assert fast.replay == MODE[pipeline] and slow.replay == "recording runtime"
    assert same(slow.o, fast.o) and same(slow.final_state, fast.final_state)
    assert slow.nonfinite == fast.nonfinite is None


def test_both_paths_cut_the_same_chunks_in_the_same_layout():
    # the reference path cuts a chunk at a time, the fast path 16 at once: the same values, and the same
    # contiguous layout (on CUDA, cuBLAS picks its kernel, and with it the rounding, by the layout)
    from kda.driver.chunks import chunk_of, cut_block
    x = _inputs(tokens=150, batch=1)          # 3 chunks of 64, the last 22 tokens zero-padded; with one
    #                                           sequence, a chunk of [1, T, H, d] is a view (not a copy) of it
    for t in (x.q, x.g, x.beta):
        block = cut_block(t, 0, 3, 64, 150, torch.float32)
        for c in range(3):
            one = chunk_of(t, c * 64, min(150, (c + 1) * 64), 64, torch.float32)
            assert one.is_contiguous() and block[c].is_contiguous()
            assert one.stride() == block[c].stride() and same(one, block[c])
    tail = chunk_of(x.q, 128, 150, 64, torch.float32)
    assert tail.shape == (3, 64, 32) and not tail[:, 22:].any() and tail[:, :22].abs().min() > 0
