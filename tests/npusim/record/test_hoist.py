"""The fast step split into the calls that do not depend on the carried state and those that do
(npusim/record/hoist.py), on steps of its own: which calls land on which side, the hazards of in-place writes,
and what cannot be split. The designs split over the two threads (npusim/record/pipeline.py) are in
tests/kda/test_hoist_designs.py, and their same bits as the step run whole in tests/kda/test_fast_numerics.py."""
from __future__ import annotations

import pytest
import torch

from npusim.record.hoist import Tape, Untapeable


def same(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.int32), b.view(torch.int32))


def _step(inputs, state):
    """A chunk step with an in-place hazard: X is made without the state, then written in place from it;
    Y reads X after that write (so it must wait for the state), Z reads X before it (it need not)."""
    K, V = inputs["K"], inputs["V"]
    X = K * 2.0
    Z = X.exp()                       # before the write: ahead
    X[..., :1, :] += state[..., :1, :]
    Y = X * 3.0                       # after the write: after
    W = K.mT @ V                      # ahead
    new_state = state * 0.5 + W
    flag = (~torch.isfinite(torch.stack([Y.sum(), Z.sum()]))).any()
    return {"Y": Y, "Z": Z}, new_state, flag


def test_an_in_place_write_from_the_state_holds_back_what_reads_after_it():
    gen = torch.Generator().manual_seed(0)
    chunks = [{"K": torch.randn(3, 8, 8, generator=gen), "V": torch.randn(3, 8, 8, generator=gen)} for _ in range(3)]
    S0 = torch.randn(3, 8, 8, generator=gen)
    tape, first = Tape.capture(_step, dict(chunks[0]), S0)
    kinds = lambda calls: [c.name for c in calls]
    # `X[..., :1, :] += s` is X's view (made without the state: ahead), the state's slice, the add into
    # the view and the write back (after); Y = X * 3.0 reads X after the write: after; Z's sum: ahead
    assert kinds(tape.ahead) == ["mul", "exp", "__getitem__", "mT", "matmul", "sum"]
    assert kinds(tape.after)[:4] == ["__getitem__", "add_", "__setitem__", "mul"]
    # the split replay gives the step's bits, chunk after chunk
    want_state, got_state = S0, S0
    for i, c in enumerate(chunks):
        want, want_state, _ = _step(dict(c), want_state)
        got, got_state, flag = tape.finish(tape.start(dict(c)), got_state) if i else first
        assert same(want["Y"], got["Y"]) and same(want["Z"], got["Z"]) and same(want_state, got_state)
        assert not bool(flag)


def test_a_step_that_reads_a_value_cannot_be_split():
    def step(inputs, state):
        K = inputs["K"]
        scale = 2.0 if float(K.abs().max()) > 1 else 1.0      # a branch on data: no tape can replay it
        return {"O": K * scale}, state + 1, None
    with pytest.raises(Untapeable, match="reads a value from a tensor"):
        Tape.capture(step, {"K": torch.ones(2, 4, 4)}, torch.zeros(2, 4, 4))


def test_a_step_that_writes_into_a_shared_tensor_cannot_be_split():
    shared = torch.zeros(2, 4, 4)

    def step(inputs, state):
        shared.add_(inputs["K"])                                # lives beyond the chunk
        return {"O": shared * 1.0}, state + 1, None
    with pytest.raises(Untapeable, match="did not make"):
        Tape.capture(step, {"K": torch.ones(2, 4, 4)}, torch.zeros(2, 4, 4))
