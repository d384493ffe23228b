"""return_intermediate_states (kda.chunk_kda): the states come from the one chunk loop (Execution.states,
kept by Executor.run's on_state), bit for bit those of the chunk-at-a-time reference path
(kda.driver.chunk_kda._intermediate_states), and within tolerance of the fp64 recurrence."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import kda
from kda.driver import chunk_kda as ck, fla_options as fo
from kda.reference.recurrence import naive_recurrent_kda

B, T, H, HV, K, V, C = 2, 150, 2, 4, 32, 32, 32      # 5 chunks, the last one partial; 2 value heads per q/k head


def _inputs(seed: int = 0, dtype=torch.bfloat16):
    gen = torch.Generator().manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=gen)  
    q, k = (F.normalize(rnd(B, T, H, K), dim=-1).to(dtype) for _ in range(2))
    v = rnd(B, T, HV, V).to(dtype)
    g = F.logsigmoid(rnd(B, T, HV, K)) * 0.2
    beta = torch.sigmoid(rnd(B, T, HV))
    return q, k, v, g, beta, rnd(B, HV, K, V)


def _slow(q, k, v, g, beta, h0, version, cu=None):
    """The reference path: one run per chunk, each from the state the one before left."""
    seg = ck._segment_runner(None, version, C, None, None)
    qe, ke = fo.expand_groups(q, HV // H), fo.expand_groups(k, HV // H)
    with torch.no_grad():
        o, ht, h = ck._intermediate_states(seg, qe, ke, v, g, beta, h0, cu, C)
    return o, ht, h.to(k.dtype)


@pytest.mark.parametrize("version", ["v4", "v6", "fla"])
def test_the_states_are_the_chunk_at_a_time_paths_bit_for_bit(version):
    q, k, v, g, beta, h0 = _inputs()
    with torch.inference_mode():
        o, ht, h = kda.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True, version=version,
                                 chunk_size=C, return_intermediate_states=True)
    o2, ht2, h2 = _slow(q, k, v, g, beta, h0, version)
    assert h.shape == (B, 5, HV, K, V) and h.dtype == k.dtype
    assert torch.equal(h, h2) and torch.equal(o, o2) and torch.equal(ht, ht2.float())


def test_a_variable_length_batch_bit_for_bit():
    q, k, v, g, beta, h0 = _inputs(1, torch.float32)
    lengths = [100, 33, 70]                      # 4 + 2 + 3 chunks of 32
    flat = lambda x: x.reshape(1, B * T, *x.shape[2:])[:, :sum(lengths)]
    q, k, v, g, beta = (flat(x) for x in (q, k, v, g, beta))
    h0 = torch.cat([h0, h0[:1].flip(-1)])
    cu = torch.tensor([0, 100, 133, 203])
    with torch.inference_mode():
        o, ht, h = kda.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True, version="v4",
                                 chunk_size=C, cu_seqlens=cu, return_intermediate_states=True)
    o2, ht2, h2 = _slow(q, k, v, g, beta, h0, "v4", cu)
    assert h.shape == (1, 9, HV, K, V)
    assert torch.equal(h, h2) and torch.equal(o, o2) and torch.equal(ht, ht2.float())


def test_the_states_match_the_fp64_recurrence():
    q, k, v, g, beta, h0 = _inputs(2, torch.float32)
    with torch.inference_mode():
        _, _, h = kda.chunk_kda(q, k, v, g, beta, initial_state=h0, version="v6", chunk_size=C,
                                return_intermediate_states=True, transfer_dtype=torch.float32)
    qe, ke = fo.expand_groups(q, HV // H), fo.expand_groups(k, HV // H)
    for t in range(5):
        want = h0 if t == 0 else naive_recurrent_kda(*(x[:, :t * C].double() for x in (qe, ke, v, g, beta)), None,
                                                    h0.double(), True, dtype=torch.float64)[1]
        err = (h[:, t].double() - want).norm() / want.norm()
        assert err < 1e-4, (t, float(err))
