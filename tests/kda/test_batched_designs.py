"""The batched walk on the designs (npusim/record/batched.py): forward, backward, autograd and variable
lengths give the same bits as chunk by chunk, inf/NaN is named where the chunk-by-chunk replay names it, and
the batched backward makes nothing on the default device."""
from __future__ import annotations

import pytest
import torch

import npusim.record.batched as batched

import kda
import kda.driver.backward as kda_backward
from kda.driver.backward import execute_backward
from kda.driver.execute import ChunkLoop, Types, execute
from kda.driver.inputs import make_inputs
from kda.programs import BACKWARD
from kda.reference.recurrence_bwd import GRADS


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 3 chunks of 2 sequences x 2 heads: 7 chunks make blocks of 3, 3 and 1."""
    monkeypatch.setattr(batched, "BLOCK_ITEMS", 12)


def _case(tokens=200, heads=2, d=16, seed=1):
    x = make_inputs(2, tokens, heads, d, d, gates="slow", seed=seed, initial_state=True)
    gen = torch.Generator().manual_seed(seed + 1)
    return x, torch.randn(2, tokens, heads, d, generator=gen), torch.randn(2, heads, d, d, generator=gen)


def _backward(monkeypatch, on: bool, version: str, x, do, dht, **kw):
    monkeypatch.setattr(kda_backward, "BATCHED", on)
    return execute_backward(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, do, dht, version=version,
                            chunk_size=32, **kw)


@pytest.mark.parametrize("version", list(BACKWARD))
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_the_backward_gives_the_same_bits_batched(monkeypatch, small_blocks, version, dtype):
    x, do, dht = _case()                       # 200 tokens: 7 chunks of 32, the last one padded
    want = _backward(monkeypatch, False, version, x, do, dht, transfer_dtype=dtype)
    got = _backward(monkeypatch, True, version, x, do, dht, transfer_dtype=dtype)
    for n in (*GRADS,):
        assert torch.equal(got.grads[n], want.grads[n]), n
    assert got.nonfinite is None


def test_autograd_and_variable_lengths_batched(monkeypatch, small_blocks):
    x, do, _ = _case(tokens=150)
    runs = []
    for on in (False, True):
        monkeypatch.setattr(kda_backward, "BATCHED", on)
        leaves = [t.clone().requires_grad_(True) for t in (x.q, x.k, x.v, x.g, x.beta)]
        o, _ = kda.chunk_kda(*leaves, version="v6", chunk_size=32)
        (o * do).sum().backward()
        cu = torch.tensor([0, 70, 300])
        flat = lambda t: t.reshape(1, -1, *t.shape[2:])
        bx = execute_backward(*(flat(t) for t in (x.q, x.k, x.v, x.g, x.beta)), None, None, flat(do), None,
                              version="v6", chunk_size=32, cu_seqlens=cu)
        runs.append([o, *(t.grad for t in leaves), *bx.grads.values()])
    assert all(torch.equal(a, b) for a, b in zip(*runs))


@pytest.mark.parametrize("version", ["v3", "v6"])
def test_a_one_pass_forward_gives_the_same_bits_batched(small_blocks, version):
    x, _, _ = _case(tokens=230, seed=3)
    args = (x.q, x.k, x.v, x.g, x.beta, None, x.initial_state)
    want = execute(*args, version=version, types=Types(transfer="bf16"), loop=ChunkLoop(pipeline=False), intermediate_states=True)
    got = execute(*args, version=version, types=Types(transfer="bf16"), loop=ChunkLoop(batched=True), intermediate_states=True)
    assert got.replay == "batched"
    assert torch.equal(got.o, want.o) and torch.equal(got.final_state, want.final_state)
    assert torch.equal(got.states, want.states)            # the state each chunk starts from, from the walk


def test_inf_in_a_block_is_named_where_the_chunk_by_chunk_replay_names_it(monkeypatch, small_blocks):
    x, do, dht = _case(seed=4)
    x.k[1, 140, 0, 3] = 1e30                   # chunk 4 of sequence 1 (head 0): K K^T overflows there
    want = _backward(monkeypatch, False, "v6", x, do, dht)
    got = _backward(monkeypatch, True, "v6", x, do, dht)
    assert want.nonfinite is not None and got.nonfinite == want.nonfinite
    for n in GRADS:
        assert torch.equal(got.grads[n].nan_to_num(), want.grads[n].nan_to_num()), n


def test_the_batched_backward_makes_nothing_on_the_default_device(monkeypatch, small_blocks):
    x, do, dht = _case()
    want = _backward(monkeypatch, True, "v6", x, do, dht, transfer_dtype="bf16")
    with torch.device("meta"):
        got = _backward(monkeypatch, True, "v6", x, do, dht, transfer_dtype="bf16")
    for n in GRADS:
        assert got.grads[n].device.type == "cpu" and torch.equal(got.grads[n], want.grads[n]), n


@pytest.mark.parametrize("check_every", [1, 64])
def test_inf_in_the_forward_is_named_however_rarely_the_flags_are_read(small_blocks, check_every):
    x, _, _ = _case(seed=5)
    x.k[0, 100, 1, 2] = 1e30                   # chunk 3 of sequence 0 (head 1): the second block's first
    args = (x.q, x.k, x.v, x.g, x.beta, None, x.initial_state)
    want = execute(*args, version="v6", chunk_size=32, loop=ChunkLoop(pipeline=False))
    got = execute(*args, version="v6", chunk_size=32, loop=ChunkLoop(batched=True, check_every=check_every))
    assert want.nonfinite is not None and got.nonfinite == want.nonfinite
    assert "batched up to chunk 3" in got.replay
    assert torch.equal(got.o.nan_to_num(), want.o.nan_to_num())

