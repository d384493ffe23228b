"""FLA's fused_recurrent_kda on the simulated step, worked by hand on a 2 x 2 state, and its refusals."""
import pytest
import torch

from kda.decode.api import fused_recurrent_kda
from kda.driver.checks import KdaInputError


def _one_token(S0, g_value):
    q = torch.tensor([[[[1.0, 0.0]]]])                    # [B=1, T=1, H=1, K=2]
    k = torch.tensor([[[[1.0, 0.0]]]])
    v = torch.tensor([[[[2.0, 3.0]]]])                    # [B, T, HV=1, V=2]
    g = torch.full((1, 1, 1, 2), g_value)                 # log decay per key channel
    beta = torch.ones(1, 1, 1)
    return fused_recurrent_kda(q, k, v, g, beta, scale=1.0, initial_state=S0, output_final_state=True)


def test_from_a_zero_state_the_step_writes_k_v_and_reads_it_back():
    # S = e^g S0 + beta k (v - k^T e^g S0)^T = [1, 0]^T [2, 3] = [[2, 3], [0, 0]]; o = q^T S = [2, 3]
    o, S = _one_token(torch.zeros(1, 1, 2, 2), 0.0)
    assert torch.allclose(o, torch.tensor([[[[2.0, 3.0]]]]))
    assert torch.allclose(S, torch.tensor([[[[2.0, 3.0], [0.0, 0.0]]]]))


def test_the_decay_scales_each_key_channel_before_the_delta_rule():
    # S0 = [[4, 4], [1, 1]], g = ln 1/2 on both channels: e^g S0 = [[2, 2], [0.5, 0.5]]; k^T e^g S0 = [2, 2]
    # v - [2, 2] = [0, 1]: S = [[2, 3], [0.5, 0.5]], o = [2, 3]
    S0 = torch.tensor([[[[4.0, 4.0], [1.0, 1.0]]]])
    o, S = _one_token(S0, float(torch.log(torch.tensor(0.5))))
    assert torch.allclose(S, torch.tensor([[[[2.0, 3.0], [0.5, 0.5]]]]), atol=1e-6)
    assert torch.allclose(o, torch.tensor([[[[2.0, 3.0]]]]), atol=1e-6)


def test_what_it_cannot_model_is_refused_in_one_line():
    q = torch.randn(1, 1, 1, 4)
    with pytest.raises(KdaInputError, match="unknown decode design 'nope'"):
        fused_recurrent_kda(q, q, q, q, design="nope")
    with pytest.raises(KdaInputError, match="use_gate_in_kernel needs A_log"):
        fused_recurrent_kda(q, q, q, q, use_gate_in_kernel=True)
