"""kda.chunk_kda's fla-core parameters against the fp64 recurrence (kda/reference/recurrence.py), each
derived independently of kda/driver/fla_options.py: grouped heads as q/k repeated by hand, the in-kernel l2norm,
gate and beta sigmoid as their formulas applied outside, the per-chunk states as the recurrence's final state
over each prefix. The comparison with fla-core itself is tests/kda/test_fla_oracle.py."""
from __future__ import annotations

import math

import pytest
import torch

import kda
from kda.driver.checks import KdaInputError
from kda.reference.recurrence import naive_recurrent_kda
from npusim import Precision

B, T, H, G, K, V, C = 2, 48, 2, 2, 16, 8, 32          # T not a multiple of C: a padded last chunk
HV = H * G
FP64 = Precision(transfer="fp64", compute=torch.float64)


def inputs(seed=0, *, raw=False, h0=True, dtype=torch.float64):
    """q, k, v [.., HV, V], g, beta, h0 in fp64; `raw`: g and beta before the in-kernel gate and sigmoid."""
    gen = torch.Generator().manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)
    unit = lambda x: x / x.norm(dim=-1, keepdim=True)
    q, k = unit(rnd(B, T, H, K)), unit(rnd(B, T, H, K))
    v = rnd(B, T, HV, V)
    g = rnd(B, T, HV, K) if raw else -0.3 * torch.rand(B, T, HV, K, generator=gen, dtype=torch.float64)
    beta = rnd(B, T, HV) if raw else torch.rand(B, T, HV, generator=gen, dtype=torch.float64)
    s = 0.5 * rnd(B, HV, K, V) if h0 else None
    return [x if x is None else x.to(dtype) for x in (q, k, v, g, beta, s)]


def by_hand(q, k, v, g, beta, h0):
    """The fp64 recurrence with each value head given its group's q and k, repeated by hand."""
    rep = lambda x: torch.stack([x[:, :, j // G] for j in range(HV)], dim=2)
    return naive_recurrent_kda(rep(q), rep(k), v, g, beta, None, h0, True, dtype=torch.float64)


def grads(fn, leaves, seed=1):
    """Gradients of <o, do> + <S, dS> with respect to `leaves` (fp64, the same do and dS for every fn)."""
    leaves = [x.detach().clone().requires_grad_(True) for x in leaves]
    o, S = fn(*leaves)
    gen = torch.Generator().manual_seed(seed)
    do, dS = torch.randn(o.shape, generator=gen, dtype=o.dtype), torch.randn(S.shape, generator=gen, dtype=S.dtype)
    return (o.detach(), S.detach()), torch.autograd.grad((o * do).sum() + (S * dS).sum(), leaves, allow_unused=True)


def close(a, b, tol=1e-9):
    """Equal to fp64 round-off (fp32's where a is fp32: the final state without autograd is, as in FLA)."""
    assert a.shape == b.shape
    tol = max(tol, 1e-6) if a.dtype == torch.float32 else tol
    assert float((a - b).abs().max()) <= tol * max(1.0, float(b.abs().max()))


def test_grouped_value_heads_use_their_groups_q_and_k():
    q, k, v, g, beta, h0 = inputs()
    o, S = kda.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True, version="v3",
                         chunk_size=C, precision=FP64)
    o_ref, S_ref = by_hand(q, k, v, g, beta, h0)
    assert o.shape == (B, T, HV, V) and S.shape == (B, HV, K, V)
    close(o, o_ref), close(S, S_ref)


@pytest.mark.parametrize("version", ["v4", "fla"])
def test_grouped_heads_gradients_sum_over_the_group(version):
    leaves = inputs()
    run = lambda *x: kda.chunk_kda(*x[:5], initial_state=x[5], output_final_state=True, version=version,
                                   chunk_size=C)
    (o, S), got = grads(run, leaves)
    (o_ref, S_ref), want = grads(by_hand, leaves)
    close(o, o_ref), close(S, S_ref)
    for name, a, b in zip(("dq", "dk", "dv", "dg", "dbeta", "dh0"), got, want):
        assert a.shape == b.shape, name
        close(a, b, 1e-8)


def test_in_kernel_l2norm_is_normalising_outside():
    q, k, v, g, beta, h0 = inputs()
    q, k = 3.0 * q + 0.1, 0.5 * k - 0.2                          # not unit length
    unit = lambda x: x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)
    run = lambda q, k: kda.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True, version="v4",
                                     chunk_size=C, use_qk_l2norm_in_kernel=True)
    (o, S), got = grads(run, [q, k])
    (o_ref, S_ref), want = grads(lambda q, k: by_hand(unit(q), unit(k), v, g, beta, h0), [q, k])
    close(o, o_ref), close(S, S_ref)
    close(got[0], want[0], 1e-8), close(got[1], want[1], 1e-8)


def softplus(x):
    return torch.where(x > 20, x, torch.log1p(torch.exp(x)))


def logistic(x):
    return 1.0 / (1.0 + torch.exp(-x))


GATES = {   # (lower_bound, uses A_log, the gate by its formula)
    "softplus": (None, True, lambda g, a, b: -torch.exp(a)[:, None] * softplus(g + b.view(HV, K))),
    "lower_bound": (-5.0, True, lambda g, a, b: -5.0 * logistic(torch.exp(a)[:, None] * (g + b.view(HV, K)))),
    "lower_bound_no_A_log": (-3.0, False, lambda g, a, b: -3.0 * logistic(g + b.view(HV, K))),
}


@pytest.mark.parametrize("gate", sorted(GATES))
def test_in_kernel_gate_is_the_gate_computed_outside(gate):
    lower_bound, with_a, formula = GATES[gate]
    q, k, v, g_raw, beta, h0 = inputs(raw=True)
    beta = torch.sigmoid(beta)
    gen = torch.Generator().manual_seed(5)
    A_log = torch.log(torch.linspace(0.2, 1.5, HV, dtype=torch.float64))
    dt_bias = 0.5 * torch.randn(HV * K, generator=gen, dtype=torch.float64)

    def run(g, a, b):
        extra = {"A_log": a} if with_a else {}
        return kda.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True, version="v4",
                             chunk_size=C, use_gate_in_kernel=True, lower_bound=lower_bound,
                             safe_gate=lower_bound is not None, dt_bias=b, **extra)
    (o, S), got = grads(run, [g_raw, A_log, dt_bias])
    (o_ref, S_ref), want = grads(lambda g, a, b: by_hand(q, k, v, formula(g, a, b), beta, h0), [g_raw, A_log, dt_bias])
    close(o, o_ref), close(S, S_ref)
    for name, a, b in zip(("dg", "dA_log", "ddt_bias"), got, want):
        if name == "dA_log" and not with_a:
            assert a is None and b is None
            continue
        close(a, b, 1e-8)


def test_dt_bias_may_be_given_per_head_and_channel():
    q, k, v, g_raw, beta, _ = inputs(raw=True, h0=False)
    beta, A_log, dt_bias = torch.sigmoid(beta), torch.zeros(HV, dtype=torch.float64), torch.randn(HV, K, dtype=torch.float64)
    run = lambda b: kda.chunk_kda(q, k, v, g_raw, beta, version="v3", chunk_size=C, precision=FP64,
                                  use_gate_in_kernel=True, A_log=A_log, dt_bias=b)[0]
    assert torch.equal(run(dt_bias), run(dt_bias.flatten()))


@pytest.mark.parametrize("allow_neg_eigval", [False, True])
def test_in_kernel_beta_sigmoid(allow_neg_eigval):
    q, k, v, g, beta_raw, h0 = inputs(raw=False)
    beta_raw = 2.0 * torch.randn(B, T, HV, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    scale = 2.0 if allow_neg_eigval else 1.0
    run = lambda b: kda.chunk_kda(q, k, v, g, b, initial_state=h0, output_final_state=True, version="fla",
                                  chunk_size=C, use_beta_sigmoid_in_kernel=True, allow_neg_eigval=allow_neg_eigval)
    (o, S), got = grads(run, [beta_raw])
    (o_ref, S_ref), want = grads(lambda b: by_hand(q, k, v, g, scale * logistic(b), h0), [beta_raw])
    close(o, o_ref), close(S, S_ref), close(got[0], want[0], 1e-8)


def test_state_v_first_transposes_the_states_at_the_boundary():
    q, k, v, g, beta, h0 = inputs()
    o, S = kda.chunk_kda(q, k, v, g, beta, initial_state=h0.transpose(-1, -2).contiguous(), output_final_state=True,
                         state_v_first=True, version="v3", chunk_size=C, precision=FP64)
    o_ref, S_ref = by_hand(q, k, v, g, beta, h0)
    assert S.shape == (B, HV, V, K)
    close(o, o_ref), close(S, S_ref.transpose(-1, -2))
    o2, S2 = kda.chunk_kda(q, k, v, g, beta, initial_state=h0.transpose(-1, -2), output_final_state=True,
                           transpose_state_layout=True, version="v3", chunk_size=C, precision=FP64)
    close(o2, o), close(S2, S)


@pytest.mark.parametrize("state_v_first", [False, True])
def test_intermediate_states_are_the_state_before_each_chunk(state_v_first):
    q, k, v, g, beta, h0 = inputs()
    h0_in = h0.transpose(-1, -2) if state_v_first else h0
    with torch.inference_mode():
        o, S, h = kda.chunk_kda(q, k, v, g, beta, initial_state=h0_in, output_final_state=True, version="v3",
                                chunk_size=C, precision=FP64, return_intermediate_states=True,
                                state_v_first=state_v_first)
    NT = math.ceil(T / C)
    assert h.shape == ((B, NT, HV, V, K) if state_v_first else (B, NT, HV, K, V))
    o_ref, S_ref = by_hand(q, k, v, g, beta, h0)
    close(o, o_ref), close(S.transpose(-1, -2) if state_v_first else S, S_ref)
    for t in range(NT):
        prefix = [x[:, :t * C] for x in (q, k, v, g, beta)]
        want = h0 if t == 0 else by_hand(*prefix, h0)[1]
        close(h[:, t].transpose(-1, -2) if state_v_first else h[:, t], want)
    no_state = kda.chunk_kda(q, k, v, g, beta, version="v3", chunk_size=C, precision=FP64,
                             return_intermediate_states=True)
    assert no_state[1] is None and float(no_state[2][:, 0].abs().max()) == 0.0


def test_intermediate_states_of_a_variable_length_batch_go_sequence_by_sequence():
    q, k, v, g, beta, h0 = inputs()
    lengths = [48, 17, 31]                                     # 2 + 1 + 1 chunks of 32
    flat = lambda x: x.reshape(1, B * T, *x.shape[2:])[:, :sum(lengths)]
    q, k, v, g, beta = (flat(x) for x in (q, k, v, g, beta))
    h0 = torch.cat([h0, h0[:1].flip(-1)])
    cu = torch.tensor([0, 48, 65, 96])
    o, S, h = kda.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu,
                            cu_seqlens_cpu=cu.clone(), version="v3", chunk_size=C, precision=FP64,
                            return_intermediate_states=True)
    assert h.shape == (1, 4, HV, K, V)
    row = 0
    for i, (a, n) in enumerate(zip(cu.tolist(), lengths)):
        part = [x[:, a:a + n] for x in (q, k, v, g, beta)]
        o_ref, S_ref = by_hand(*part, h0[i:i + 1])
        close(o[:, a:a + n], o_ref), close(S[i:i + 1], S_ref)
        for t in range(math.ceil(n / C)):
            want = h0[i:i + 1] if t == 0 else by_hand(*[x[:, :t * C] for x in part], h0[i:i + 1])[1]
            close(h[:, row], want)
            row += 1


def test_fla_switches_by_changing_the_import():
    """fla-core's documented example call, every parameter named as FLA names it."""
    q, k, v, g_raw, beta, h0 = (x.float() for x in inputs(raw=True))
    A_log, dt_bias = torch.zeros(HV), torch.zeros(HV * K)
    o, ht = kda.chunk_kda(q=q, k=k, v=v, g=g_raw, beta=beta, scale=None, initial_state=h0, output_final_state=True,
                          use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                          allow_neg_eigval=False, safe_gate=True, lower_bound=-5.0, disable_recompute=True,
                          state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None, cp_context=None,
                          use_graph=False, max_num_seqs=None, A_log=A_log, dt_bias=dt_bias, chunk_size=C,
                          version="fla")        # FLA's gates (down to -5 a token) overflow v3's exp(-cumsum g)
    assert o.shape == (B, T, HV, V) and ht.shape == (B, HV, K, V) and bool(torch.isfinite(o).all())


def _call(**change):
    q, k, v, g, beta, h0 = (x.float() for x in inputs())
    args = dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=h0, chunk_size=C)
    args.update(change)
    return kda.chunk_kda(**args)


_, _, _v, _g, _beta, _h0 = inputs()
BAD = [
    ({"v": _v[:, :, :3].float()}, "v has HV=3 value heads, not a multiple of the H=2"),
    ({"g": _g[:, :, :2].float()}, "g must have shape [2, 48, 4, 16]"),
    ({"beta": _beta[:, :, :2].float()}, "beta must have shape [2, 48, 4]"),
    ({"use_gate_in_kernel": True}, "A_log: use_gate_in_kernel=True needs A_log"),
    ({"use_gate_in_kernel": True, "A_log": torch.zeros(4), "g": _g[..., :1].float()}, "g: use_gate_in_kernel needs"),
    ({"use_gate_in_kernel": True, "A_log": torch.zeros(3)}, "A_log must have shape [4]"),
    ({"use_gate_in_kernel": True, "A_log": torch.zeros(4), "dt_bias": torch.zeros(4 * 16 + 1)}, "dt_bias must have shape [64]"),
    ({"use_gate_in_kernel": True, "A_log": torch.zeros(4), "dt_bias": torch.full((64,), math.nan)}, "dt_bias contains NaN"),
    ({"A_log": torch.zeros(4)}, "A_log is used only inside the gate"),
    ({"lower_bound": -5.0}, "lower_bound is used only inside the gate"),
    ({"use_gate_in_kernel": True, "A_log": torch.zeros(4), "safe_gate": True}, "lower_bound must be set when safe_gate"),
    ({"use_gate_in_kernel": True, "safe_gate": True, "lower_bound": -7.0}, "lower_bound must be in the safe range [-5, 0)"),
    ({"use_gate_in_kernel": True, "lower_bound": 1.0}, "lower_bound must be a negative number"),
    ({"allow_neg_eigval": True}, "allow_neg_eigval=True scales the in-kernel sigmoid"),
    ({"cp_context": object()}, "cp_context: context parallelism"),
    ({"use_graph": True}, "use_graph: FLA's fixed-shape graph capture"),
    ({"max_num_seqs": 4}, "max_num_seqs is used only with use_graph"),
    ({"cu_seqlens_cpu": torch.tensor([0, 48])}, "cu_seqlens_cpu is a host copy of cu_seqlens"),
    ({"head_first": False}, "unknown keyword argument head_first"),
    ({"state_v_first": True, "transpose_state_layout": True}, "not both"),
    ({"initial_state": _h0[:, :, :, :4].float()}, "initial_state must be ['N', 4, 16, 8]"),
    ({"initial_state": _h0.float(), "state_v_first": True}, "state_v_first=True: [N, HV, V, K]"),
    ({"return_intermediate_states": True, "disable_recompute": True}, "needs disable_recompute=False"),
    ({"chunk_size": 0}, "chunk_size must be a positive integer"),
]


@pytest.mark.parametrize("change,message", BAD, ids=[m[:32] for _, m in BAD])
def test_bad_parameters_are_one_line_errors_naming_them(change, message):
    with pytest.raises(KdaInputError) as err:
        _call(**change)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_intermediate_states_refuse_autograd():
    q = inputs()[0].float().requires_grad_(True)
    with pytest.raises(KdaInputError, match="return_intermediate_states bypasses autograd"):
        _call(q=q, return_intermediate_states=True)


def test_mismatched_host_copy_of_cu_seqlens_is_refused():
    q, k, v, g, beta, _ = (x.float() for x in inputs())
    flat = lambda x: x.reshape(1, B * T, *x.shape[2:])
    with pytest.raises(KdaInputError, match="cu_seqlens_cpu must hold the same values"):
        kda.chunk_kda(*(flat(x) for x in (q, k, v, g, beta)), cu_seqlens=torch.tensor([0, 48, 96]),
                      cu_seqlens_cpu=torch.tensor([0, 47, 96]), chunk_size=C)
