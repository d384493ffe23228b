"""kda.api.simulate: the simulated report of one chunk_kda call, from the call's own tensors."""
import pytest
import torch
import torch.nn.functional as F

from kda.api.simulate import Simulated, simulate
from kda.driver.checks import KdaInputError


def _inputs(B=1, T=128, H=2, K=64, V=64):
    gen = torch.Generator().manual_seed(0)
    q, k = (F.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1) for _ in range(2))
    v = torch.randn(B, T, H, V, generator=gen)
    g = F.logsigmoid(torch.randn(B, T, H, K, generator=gen)) / 16
    beta = torch.sigmoid(torch.randn(B, T, H, generator=gen))
    return q, k, v, g, beta


def test_the_report_is_the_call_s_shape_on_the_chip():
    sim = simulate(*_inputs(), version="v6")
    assert isinstance(sim, Simulated)
    assert sim.bound_us <= sim.latency_us <= sim.serial_us + 1e-9      # a bound below, the serial replay above
    assert sim.syncs_per_chunk >= 1 and len(sim.passes) >= 1
    assert (sim.json["heads"], sim.json["chunks"], sim.json["d_k"]) == (2, 2, 64)     # T = 128 at chunk 64
    assert sim.to_json() == sim.json and sim.to_json() is not sim.json                 # a copy


def test_inputs_it_cannot_take_are_refused_in_one_line():
    q, k, v, g, beta = _inputs()
    for args, says in (((q, k[:, :64], v, g, beta), "k must have shape"), ((q, k, v, g[..., :3], beta), "g must have"),
                       ((q, k, v, g, beta[:, :, :1]), "beta must have shape")):
        with pytest.raises(KdaInputError, match=says) as err:
            simulate(*args)
        assert "\n" not in str(err.value)
