"""Decode designs compute the recurrence: a step worked by hand, every design and state type against the fp64
recurrence within FLA's tolerance, grouped value heads, packed (cu_seqlens) batches, FLA's in-kernel options,
Kimi's gate, and a prefill followed by the step against the prefill of the longer sequence."""
import pytest
import torch
import torch.nn.functional as F

from kda.decode.numerics import DecodeInputs, check, run_step
from kda.decode.programs import DESIGNS
from kda.decode.timing import Types, options_for, types_for
from kda.kernels.decode import DECODE_KERNELS
from kda.decode.study import DecodeSettings, evaluate

FP32 = Types("fp32", "fp32", "fp32")


def inputs(B=2, T=1, H=2, HV=2, K=32, V=32, seed=0, raw_gate=False, gdn=False, cu=None):
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen)
    width = 1 if gdn else K
    N = B if cu is None else len(cu) - 1
    g = r(B, T, HV, width) if raw_gate else F.logsigmoid(r(B, T, HV, width) + 2)
    return DecodeInputs(F.normalize(r(B, T, H, K), dim=-1), F.normalize(r(B, T, H, K), dim=-1), r(B, T, HV, V), g,
                        r(B, T, HV) if raw_gate else torch.sigmoid(r(B, T, HV)), r(N, HV, K, V) * 0.1,
                        torch.rand(HV, generator=gen) + 0.5 if raw_gate else None,
                        r(HV * width) * 0.5 if raw_gate else None, cu)


@pytest.mark.parametrize("design", list(DESIGNS))
def test_one_step_by_hand(design):
    """K = V = 2, no decay, S = I, k = q = e1, v = (2, 3), beta = 1, scale 1: k^T S = (1, 0), the delta
    (1, 3), S' = [[2, 3], [0, 1]], o = q^T S' = (2, 3)."""
    one = lambda *s: torch.ones(*s)
    e1 = torch.tensor([1.0, 0.0]).reshape(1, 1, 1, 2)
    x = DecodeInputs(e1, e1, torch.tensor([2.0, 3.0]).reshape(1, 1, 1, 2), torch.zeros(1, 1, 1, 2), one(1, 1, 1),
                     torch.eye(2).reshape(1, 1, 2, 2), scale=1.0)
    o, S = run_step(DESIGNS[design], x, FP32)
    assert o.reshape(2).tolist() == pytest.approx([2.0, 3.0], abs=1e-6)
    assert S.reshape(4).tolist() == pytest.approx([2.0, 3.0, 0.0, 1.0], abs=1e-6)


@pytest.mark.parametrize("design", list(DESIGNS))
@pytest.mark.parametrize("state", ["fp32", "bf16"])
@pytest.mark.parametrize("T", [1, 3])
def test_designs_match_the_recurrence(design, state, T):
    p = check(DESIGNS[design], inputs(T=T, H=2, HV=4), Types("bf16", "fp32", state))
    assert p.passed, (p.output, p.state)
    if state == "fp32":               # nothing narrower than fp32 between the stored inputs and the state
        assert p.state.rel_rms_err < 1e-5


@pytest.mark.parametrize("design", list(DECODE_KERNELS))
def test_measured_kernels_compute_the_recurrence(design):
    d = DECODE_KERNELS[design]
    opts = options_for(d)
    x = inputs(H=2, HV=4 if d.gate == "gdn" else 2, K=128, V=128, raw_gate=bool(opts), gdn=d.gate == "gdn")
    p = check(d, x, types_for(d), opts)
    assert p.passed, (p.output, p.state)


@pytest.mark.parametrize("design", ["step", "chunked"])
def test_packed_batch_and_in_kernel_options(design):
    """cu_seqlens of 1, 3 and 2 tokens (MTP accept lengths), l2norm, the gate and beta's sigmoid in the kernel."""
    x = inputs(B=1, T=6, H=2, HV=4, raw_gate=True, cu=(0, 1, 4, 6))
    p = check(DESIGNS[design], x, Types("bf16", "fp32", "fp32"), ("qk_l2norm", "gate", "beta_sigmoid"))
    assert p.passed, (p.output, p.state)


def test_bounded_gate_on_strong_gates_stays_finite():
    """Kimi's bounded gate (lower_bound -5) on raw gates far from 0: the chunked design's exponents stay <= 0."""
    x = inputs(T=4, raw_gate=True)
    x.g = x.g * 20
    for name in ("step", "chunked"):
        p = check(DESIGNS[name], x, FP32, ("gate",), lower_bound=-5.0)
        assert p.passed and p.output.finite, name


def test_prefill_then_decode_is_the_longer_prefill():
    s = DecodeSettings(designs=("step", "chunked"), batches=(2,), heads=2, value_heads=4, tokens=(2,), d_k=32, d_v=32,
                       prefill=16)
    for r in evaluate(s):
        assert r.parity.passed and r.prefill.passed and r.prefill_state.passed, r.design.name
