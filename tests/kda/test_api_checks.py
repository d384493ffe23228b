"""Issue 24, item 8: kda.chunk_kda refuses bad input in one KdaInputError line, before any work, and never
returns inf/NaN without a word."""
import math

import pytest
import torch

import kda
from kda.driver.checks import KdaInputError, KdaOverflowWarning
from kda.driver.inputs import make_inputs


@pytest.fixture
def x():
    return make_inputs(1, 150, 1, 16, 16, "seed", 0, False)


def test_non_integer_cu_seqlens_are_refused_not_truncated(x):
    for cu in ([0., 40.5, 150.], torch.tensor([0., 40.5, 150.])):
        with pytest.raises(KdaInputError, match="whole token offsets"):
            kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, cu_seqlens=cu)
    o, _ = kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, cu_seqlens=[0., 40., 150.])   # whole floats are fine
    assert o.shape == x.q.shape[:3] + (16,)


def test_two_dimensional_cu_seqlens_are_refused(x):
    with pytest.raises(KdaInputError, match="one row"):
        kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, cu_seqlens=torch.tensor([[0, 40], [40, 150]]))


@pytest.mark.parametrize("cu", [None, [0, 40, 150]])
def test_an_initial_state_that_is_not_a_tensor_is_refused(x, cu):
    with pytest.raises(KdaInputError, match="initial_state must be a torch.Tensor"):
        kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, initial_state=[[0.0]], cu_seqlens=cu)


def test_meta_tensors_are_refused(x):
    with pytest.raises(KdaInputError, match="q must be a dense tensor with data"):
        kda.chunk_kda(x.q.to("meta"), x.k, x.v, x.g, x.beta)


@pytest.mark.parametrize("scale", [math.nan, math.inf, "0.25"])
def test_a_scale_that_is_not_a_finite_number_is_refused(x, scale):
    with pytest.raises(KdaInputError, match="scale must be a finite number"):
        kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, scale=scale)


def test_an_output_that_overflows_warns_with_where(x):
    big = x.k * 1e30                                  # finite inputs whose products overflow fp32
    with pytest.warns(KdaOverflowWarning, match="inf/NaN first appears in"):
        o, _ = kda.chunk_kda(x.q, big, x.v, x.g, x.beta)
    assert not torch.isfinite(o).all()


def test_a_backward_chunk_size_is_refused_at_the_forward(x):
    q = x.q.clone().requires_grad_()
    with pytest.raises(KdaInputError, match="backward: chunk_size"):
        kda.chunk_kda(q, x.k, x.v, x.g, x.beta, chunk_size=16, version="v4")
