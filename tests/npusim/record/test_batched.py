"""The batched replay's chain (npusim/record/batched.py) on a step of its own: which calls the state's chain
is made of, what it reads of the rest, and a value the chain writes in place copied for the walk. The
designs' same bits batched are in tests/kda/test_batched_designs.py."""
from __future__ import annotations

import torch

import npusim.record.batched as batched
from npusim.record.batched import ChainTape


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
