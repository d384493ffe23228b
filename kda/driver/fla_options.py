"""FLA's in-kernel options and the checks of chunk_kda's parameters (chunk_kda.py): each option as the exact
formula, in plain differentiable torch ops (so gradients flow through them by autograd, to A_log and dt_bias
too), and each check naming its parameter (KdaInputError, one line).

    use_qk_l2norm_in_kernel   q, k <- x / sqrt(sum x^2 + 1e-6) (FLA's l2norm_fwd), in fp32, back to x's type
    use_gate_in_kernel    g <- -exp(A_log) * softplus(g + dt_bias)                (lower_bound None)
                          g <- lower_bound * sigmoid(exp(A_log) * (g + dt_bias))  (lower_bound set; without
                                                                                   A_log: sigmoid(g + dt_bias))
    use_beta_sigmoid_in_kernel  beta <- sigmoid(beta) in fp32 (2 sigmoid(beta) with allow_neg_eigval)
    grouped value heads   q/k repeated over the group of value heads that share them (expand_groups)
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from kda.driver.checks import KdaInputError, check_tensor, offsets_of

L2NORM_EPS = 1e-6          # FLA's l2norm_fwd default
SAFE_GATE_RANGE = (-5.0, 0.0)

# fla-core 0.6.0's chunk_kda: its named parameters, and the keywords it reads from **kwargs
FLA_PARAMETERS = ("q", "k", "v", "g", "beta", "scale", "initial_state", "output_final_state",
                  "use_qk_l2norm_in_kernel", "use_gate_in_kernel", "use_beta_sigmoid_in_kernel",
                  "allow_neg_eigval", "safe_gate", "lower_bound", "disable_recompute",
                  "return_intermediate_states", "state_v_first", "cu_seqlens", "cu_seqlens_cpu", "cp_context",
                  "use_graph", "max_num_seqs")
FLA_KWARGS = ("A_log", "dt_bias", "chunk_size", "transpose_state_layout")
SIMULATOR_KEYWORDS = ("version", "transfer_dtype", "precision")


# -- the in-kernel preprocessing, as differentiable torch ops ------------------------------------------------

def _wide(x: torch.Tensor) -> torch.dtype:
    """fp32, or fp64 for fp64 inputs (so that gradcheck stays exact)."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def l2norm(x: torch.Tensor, eps: float = L2NORM_EPS) -> torch.Tensor:
    """FLA's l2norm_fwd: x / sqrt(sum x^2 + eps) over the last axis, computed in fp32, in x's dtype."""
    w = x.to(_wide(x))
    return (w * torch.rsqrt((w * w).sum(-1, keepdim=True) + eps)).to(x.dtype)


def kda_gate(g: torch.Tensor, A_log: torch.Tensor | None, dt_bias: torch.Tensor | None,
             lower_bound: float | None) -> torch.Tensor:
    """FLA's in-kernel gate on raw g [B, T, HV, K] (the log decay, fp32): -exp(A_log) softplus(g + dt_bias),
    or with lower_bound: lower_bound sigmoid(exp(A_log) (g + dt_bias)) (no A_log: sigmoid(g + dt_bias))."""
    HV, K = g.shape[-2:]
    x = g.to(_wide(g))
    if dt_bias is not None:
        x = x + dt_bias.to(x.dtype).reshape(HV, K)
    rate = None if A_log is None else A_log.to(x.dtype).reshape(HV, 1).exp()
    if lower_bound is None:
        if rate is None:
            raise KdaInputError("the gate in kernel without lower_bound needs A_log (FLA's naive_kda_gate)")
        return -rate * F.softplus(x)
    return lower_bound * torch.sigmoid(x if rate is None else rate * x)


def beta_sigmoid(beta: torch.Tensor, allow_neg_eigval: bool = False) -> torch.Tensor:
    """FLA's fused_beta_sigmoid: sigmoid(beta) in fp32, times 2 with allow_neg_eigval (beta in [0, 2))."""
    y = torch.sigmoid(beta.to(_wide(beta)))
    return 2.0 * y if allow_neg_eigval else y


def expand_groups(x: torch.Tensor, group: int) -> torch.Tensor:
    """q or k [B, T, H, K] -> [B, T, H * group, K], head h repeated for value heads h*group .. h*group+group-1."""
    return x if group == 1 else x.repeat_interleave(group, dim=2)


# -- the checks, each naming its parameter ----------------------------------------------------------------

def _shape(x) -> list | str:
    return list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__


def check_heads(q, k, v, g, beta) -> tuple[int, int]:
    """(H, HV): q/k heads and value heads; KdaInputError where v's heads are not a multiple of q's."""
    for name, x in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
        check_tensor(name, x)                 # types and layouts before any shape is read
    if q.dim() != 4 or v.dim() != 4:
        raise KdaInputError(f"q must be [B, T, H, K] and v [B, T, HV, V], got q {_shape(q)}, v {_shape(v)}")
    if list(k.shape) != list(q.shape):
        raise KdaInputError(f"k must have shape {list(q.shape)} to match q {list(q.shape)}, got {list(k.shape)}")
    H, HV = q.shape[2], v.shape[2]
    if min(q.shape) < 1 or min(v.shape) < 1:
        raise KdaInputError(f"empty input: q {list(q.shape)}, v {list(v.shape)}")
    if HV % H:
        raise KdaInputError(f"v has HV={HV} value heads, not a multiple of the H={H} heads of q and k "
                            f"(grouped value heads need HV % H == 0)")
    B, T, K = q.shape[0], q.shape[1], q.shape[3]
    if list(v.shape[:2]) != [B, T]:
        raise KdaInputError(f"v must be [B, T, HV, V] with q's B={B}, T={T}, got {list(v.shape)}")
    if g.dim() != 4 or list(g.shape[:3]) != [B, T, HV] or g.shape[3] not in (K, 1):
        raise KdaInputError(f"g must have shape {[B, T, HV, K]} to match q {list(q.shape)} and v {list(v.shape)} "
                            f"(one gate per value head), got {_shape(g)}")
    if list(beta.shape) != [B, T, HV]:
        raise KdaInputError(f"beta must have shape {[B, T, HV]} to match q {list(q.shape)} and v {list(v.shape)} "
                            f"(one per value head), got {_shape(beta)}")
    return H, HV


def _param(name: str, x, allowed: list[list[int]], shapes: str) -> None:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.is_meta or x.layout != torch.strided:
        raise KdaInputError(f"{name} must be a floating-point torch.Tensor of shape {shapes}, got "
                            f"{getattr(x, 'dtype', type(x).__name__)}")
    if list(x.shape) not in allowed:              # the same count in another shape would mean other heads
        raise KdaInputError(f"{name} must have shape {shapes}, got {list(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise KdaInputError(f"{name} contains NaN or inf")


def check_gate(g, A_log, dt_bias, *, use_gate_in_kernel: bool, safe_gate: bool, lower_bound, d_k: int) -> None:
    """FLA's rules for the in-kernel gate, as KdaInputError naming the parameter."""
    if not use_gate_in_kernel:
        for name, x in (("A_log", A_log), ("dt_bias", dt_bias), ("lower_bound", lower_bound)):
            if x is not None:
                raise KdaInputError(f"{name} is used only inside the gate: pass use_gate_in_kernel=True, or leave "
                                    f"it out with a precomputed log decay g (fla-core would ignore it)")
        return
    HV, K = g.shape[2], d_k
    if g.shape[3] != K:
        raise KdaInputError(f"g: use_gate_in_kernel needs the raw gate per key channel, [B, T, HV, {K}], got "
                            f"{list(g.shape)}")
    if lower_bound is not None:
        if isinstance(lower_bound, bool) or not isinstance(lower_bound, (int, float)) or not lower_bound < 0:
            raise KdaInputError(f"lower_bound must be a negative number (the log decay's floor), got {lower_bound!r}")
    if A_log is None and lower_bound is None:
        raise KdaInputError(f"A_log: use_gate_in_kernel=True needs A_log (one decay rate per value head, shape "
                            f"[{HV}]) unless lower_bound is set")
    if A_log is not None:
        _param("A_log", A_log, [[HV]], f"[{HV}] (one per value head)")
    if dt_bias is not None:
        _param("dt_bias", dt_bias, [[HV * K], [HV, K]], f"[{HV * K}] or [{HV}, {K}] (one per value head and key "
               f"channel)")
    if safe_gate:
        lo, hi = SAFE_GATE_RANGE
        if lower_bound is None:
            raise KdaInputError("lower_bound must be set when safe_gate=True and use_gate_in_kernel=True")
        if not lo <= lower_bound < hi:
            raise KdaInputError(f"lower_bound must be in the safe range [{lo:g}, {hi:g}) with safe_gate=True, "
                                f"got {lower_bound}")


def check_refused(*, cp_context, use_graph, max_num_seqs, cu_seqlens, cu_seqlens_cpu, kwargs: dict) -> None:
    """The parameters the simulator cannot honour, each refused by name."""
    if cp_context is not None:
        raise KdaInputError("cp_context: context parallelism splits sequences over several devices; the "
                            "simulator runs the whole batch on one chip (pass cu_seqlens instead)")
    if use_graph:
        raise KdaInputError("use_graph: FLA's fixed-shape graph capture is not simulated (the simulator replays "
                            "its own chunk step; leave use_graph=False)")
    if max_num_seqs is not None:
        raise KdaInputError("max_num_seqs is used only with use_graph=True, which is not simulated")
    if cu_seqlens_cpu is not None:
        if cu_seqlens is None:
            raise KdaInputError("cu_seqlens_cpu is a host copy of cu_seqlens: pass cu_seqlens too")
        if offsets_of(cu_seqlens_cpu, "cu_seqlens_cpu") != offsets_of(cu_seqlens):
            raise KdaInputError("cu_seqlens_cpu must hold the same values as cu_seqlens")
    unknown = sorted(set(kwargs) - set(FLA_KWARGS))
    if unknown:
        raise KdaInputError(f"unknown keyword argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: "
                            f"chunk_kda takes fla-core's parameters and {', '.join(SIMULATOR_KEYWORDS)}")
