"""KDA's differentiable call on the simulated NPU against autograd through the fp64 token-by-token recurrence."""
import pytest
import torch
import torch.nn.functional as F

from kda.driver.autograd import differentiable_kda, forward_kda
from kda.driver.checks import KdaInputError
from kda.reference.recurrence import naive_recurrent_kda


def _inputs(B=1, T=80, H=1, K=32, V=16):
    gen = torch.Generator().manual_seed(3)
    q, k = (F.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1) for _ in range(2))
    v = torch.randn(B, T, H, V, generator=gen)
    g = F.logsigmoid(torch.randn(B, T, H, K, generator=gen)) / 8
    beta = torch.sigmoid(torch.randn(B, T, H, generator=gen))
    return [x.double().requires_grad_(True) for x in (q, k, v, g, beta)]


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
