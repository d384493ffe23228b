"""The fast replay with the chunk-parallel work batched over blocks of chunks (npusim/record/batched.py):
the same bits as the chunk-by-chunk replay for the backward designs and a one-pass forward, blocks that do
not divide the chunks, the inf/NaN watch naming the same place, the state's chain, and nothing made on the
default device. The batched replay is what a GPU runs (kda/driver/backward.py); here it is forced on the CPU."""
from __future__ import annotations

import pytest
import torch

import kda
import kda.driver.backward as kda_backward
import npusim.record.batched as batched
from kda.driver.execute import ChunkLoop, Types, execute
from kda.driver.backward import execute_backward
from kda.driver.inputs import make_inputs
from kda.programs import BACKWARD
from kda.reference.recurrence_bwd import GRADS
from npusim.record.batched import ChainTape


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


def _step(inputs, state):
    """A chunk step: U and W need no state; V = U - W S and S_new = 0.5 S + K^T V are the state's chain;
    O = Q S + V (an output only) and the watch are the rest."""
    Q, K, U = inputs["Q"], inputs["K"], inputs["U"]
    W = K * K.exp()
    V = U - W @ state
    O = Q @ state + V
    new_state = 0.5 * state + K.mT @ V
    flag = (~torch.isfinite(torch.stack([O.sum(), new_state.sum()]))).any()
    return {"O": O}, new_state, flag


def test_the_chain_is_what_the_next_state_is_made_from():
    gen = torch.Generator().manual_seed(0)
    inputs = {n: torch.randn(3, 8, 8, generator=gen) for n in ("Q", "K", "U")}
    tape, _ = ChainTape.capture(_step, inputs, torch.randn(3, 8, 8, generator=gen))
    names = lambda calls: [c.name for c in calls]
    assert names(tape.ahead) == ["exp", "mul", "mT"]                  # W = K exp(K), and K^T
    # W S, U - W S, 0.5 S, K^T V, their sum: the chain; Q S, O's sum and the watch are the rest
    assert names(tape.chain) == ["matmul", "sub", "mul", "matmul", "add"]
    assert names(tape.after) == ["matmul", "sub", "matmul", "add", "mul", "matmul", "add",
                                 "sum", "sum", "stack", "isfinite", "__invert__", "any"]
    # what the chain reads of the rest: U (an input), W and K^T (ahead); not K itself, nor Q
    assert len(tape.boundary) == 3 and tape.inputs["U"] in tape.boundary
    assert tape.inputs["K"] not in tape.boundary and tape.inputs["Q"] not in tape.boundary


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


def _clobbering_step(inputs, state):
    """A chunk step whose chain writes in place into a value made ahead of it: U = 2 K (no state), then its
    first row less that of K S (the chain: U[..., :1, :] -= (K S)[..., :1, :]), S_new = 0.5 S + K^T U; O = U + 1
    reads U after the write."""
    K = inputs["K"]
    U = K * 2.0
    U[..., :1, :] = U[..., :1, :] - (K @ state)[..., :1, :]
    new_state = 0.5 * state + K.mT @ U
    O = U + 1.0
    flag = (~torch.isfinite(torch.stack([O.sum(), new_state.sum()]))).any()
    return {"O": O}, new_state, flag


class _StepReplay:
    """The little a BatchedReplay asks of a replay: the fast step, its identities, how often to read flags."""
    check_every = 1

    def __init__(self):
        self.eyes = {}

    def eager_step(self, inputs, state, _watch):
        return _clobbering_step(inputs, state)


def test_a_value_the_chain_writes_in_place_is_copied_for_the_walk():
    # the walk runs the write on chunk j's row of the block's U; stage B then runs it again on the whole block
    # with each chunk's incoming state. Were the walk's row not a copy, stage B would subtract twice.
    gen = torch.Generator().manual_seed(0)
    chunks = [{"K": torch.randn(2, 8, 8, generator=gen) * 0.3} for _ in range(5)]
    S0 = torch.randn(2, 8, 8, generator=gen)
    want, state = [], S0
    for c in chunks:
        out, state, _ = _clobbering_step(dict(c), state)
        want.append(out["O"])
    replay = batched.BatchedReplay(_StepReplay(), lambda t: dict(chunks[t]), S0, 5, block_items=6)  # blocks 3, 2
    assert replay.walk.clobbered                   # U: read by the chain, written by it
    got = {}
    final = replay.run(S0, lambda t, out: got.__setitem__(t, out["O"]))
    assert torch.equal(final, state)
    for t in range(5):
        assert torch.equal(got[t], want[t]), t
