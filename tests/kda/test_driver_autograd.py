"""KDA's differentiable call on the simulated NPU against autograd through the fp64 token-by-token recurrence."""
import pytest
import torch

from kda.driver.autograd import differentiable_kda, forward_kda
from kda.driver.checks import KdaInputError
from kda.driver.inputs import make_inputs
from kda.reference.recurrence import naive_recurrent_kda


def _inputs(T=80):
    x = make_inputs(tokens=T, d_k=32, d_v=16, gates="slow", seed=3)
    return [t.double().requires_grad_(True) for t in (x.q, x.k, x.v, x.g, x.beta)]


def test_gradients_match_autograd_through_the_fp64_recurrence():
    ours, ref = _inputs(), _inputs()
    o, _ = differentiable_kda(*ours, version="v6", transfer_dtype="fp32")
    o_ref, _ = naive_recurrent_kda(*ref, dtype=torch.float64)
    do = torch.randn_like(o_ref)
    o.backward(do.to(o.dtype))
    o_ref.backward(do)
    assert torch.allclose(o.double(), o_ref, atol=1e-4)
    for name, a, b in zip("q k v g beta".split(), ours, ref):
        assert torch.allclose(a.grad.double(), b.grad, atol=1e-3), name


def test_without_gradients_the_forward_runs_alone_and_a_design_with_no_backward_is_refused():
    x = [t.detach() for t in _inputs(T=64)]
    o, ht = forward_kda(*x, version="v6", output_final_state=True, transfer_dtype="fp32")
    o_ref, ht_ref = naive_recurrent_kda(*x, output_final_state=True, dtype=torch.float64)
    assert torch.allclose(o.double(), o_ref, atol=1e-4) and torch.allclose(ht.double(), ht_ref, atol=1e-4)
    with pytest.raises(KdaInputError, match="under autograd"):
        differentiable_kda(*_inputs(T=64), version="mform")
