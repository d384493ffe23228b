"""Plain PyTorch references, in flash-linear-attention's layout and conventions.

Shapes: q, k [B, T, H, K]; v [B, T, H, V]; g [B, T, H, K] (log decay, alpha = exp(g) in (0, 1]);
beta [B, T, H]; state [B, H, K, V]. `scale` defaults to K ** -0.5 and multiplies q.

`naive_recurrent_kda` is the ground truth (Kimi Linear tech report, Eq. 1; FLA's naive_recurrent_kda):
    S <- Diag(alpha_t) S;   S <- S + beta_t k_t (v_t - S^T k_t)^T;   o_t = S^T (scale q_t)
`doc_chunk_v2` / `doc_chunk_v3` are the design document's chunk references (section 8), per chunk of
one head, with g given in log space (the document's log(alpha + eps) becomes g exactly).
"""
from __future__ import annotations

import torch


def naive_recurrent_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                        *, dtype: torch.dtype = torch.float32):
    """Token-by-token recurrence, computed in `dtype` (float64 for a ground truth).

    Returns (o [B, T, H, V], final state [B, H, K, V] or None), both in `dtype`."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    if scale is None:
        scale = K ** -0.5
    q, k, v, g, beta = (x.to(dtype) for x in (q, k, v, g, beta))
    q = q * scale
    S = torch.zeros(B, H, K, V, dtype=dtype, device=q.device)
    if initial_state is not None:
        S = S + initial_state.to(dtype)
    o = torch.empty(B, T, H, V, dtype=dtype, device=q.device)
    for t in range(T):
        q_t, k_t, v_t, g_t, b_t = q[:, t], k[:, t], v[:, t], g[:, t], beta[:, t]
        S = S * g_t.exp()[..., None]                                        # decay along the key axis
        residual = v_t - torch.einsum("bhk,bhkv->bhv", k_t, S)
        S = S + torch.einsum("bhk,bhv->bhkv", b_t[..., None] * k_t, residual)
        o[:, t] = torch.einsum("bhk,bhkv->bhv", q_t, S)
    return o, (S if output_final_state else None)


def unit_lower_inverse(A: torch.Tensor) -> torch.Tensor:
    """R = (I + StrictTril(A))^-1, row by row as the document's forward substitution:
    R[i, j] = -sum_{k=j}^{i-1} L[i, k] R[k, j] (here a row at a time, the same sums)."""
    C = A.shape[-1]
    L = torch.tril(A, -1)
    R = torch.eye(C, dtype=A.dtype, device=A.device).expand(A.shape).clone()
    for i in range(1, C):
        R[..., i, :i] = -(L[..., i, None, :i] @ R[..., :i, :i]).squeeze(-2)
    return R


def doc_chunk_v3(Q, K, V, g, beta, S_prev):
    """The document's kda_chunk_v3_reference (section 8) on one chunk: Q, K, g [..., C, d_k], V [..., C, d_v],
    beta [..., C], S_prev [..., d_k, d_v]. Q is already scaled. Returns (O, S_new)."""
    gc = torch.cumsum(g, dim=-2)
    Gamma, Gamma_inv = torch.exp(gc), torch.exp(-gc)
    K_scaled, K_div, Q_scaled = K * Gamma, K * Gamma_inv, Q * Gamma
    gc_C = gc[..., -1:, :]
    K_decay = K * torch.exp(gc_C - gc)
    gamma_C = torch.exp(gc_C)
    A_raw = K_scaled @ K_div.mT
    A = A_raw * beta[..., :, None]
    M = unit_lower_inverse(A) * beta[..., None, :]
    W = M @ K_scaled
    U = M @ V
    WS = W @ S_prev
    O_inter = Q_scaled @ S_prev
    A_qk_raw = Q_scaled @ K_div.mT
    V_pseudo = U - WS
    A_qk = torch.tril(A_qk_raw)
    O = O_inter + A_qk @ V_pseudo
    S_new = gamma_C.mT * S_prev + K_decay.mT @ V_pseudo
    return O, S_new


def doc_chunk_v2(Q, K, V, g, beta, S_prev):
    """The document's kda_chunk_v2_reference (section 8): the same math in v2's order."""
    gc = torch.cumsum(g, dim=-2)
    Gamma, Gamma_inv = torch.exp(gc), torch.exp(-gc)
    K_scaled, K_div, Q_scaled = K * Gamma, K * Gamma_inv, Q * Gamma
    A = (K_scaled @ K_div.mT) * beta[..., :, None]
    M = unit_lower_inverse(A) * beta[..., None, :]
    W = M @ K_scaled
    U = M @ V
    V_pseudo = U - W @ S_prev
    O_inter = Q_scaled @ S_prev
    A_qk = torch.tril(Q_scaled @ K_div.mT)
    O = O_inter + A_qk @ V_pseudo
    gc_C = gc[..., -1:, :]
    S_delta = (K * torch.exp(gc_C - gc)).mT @ V_pseudo
    S_new = torch.exp(gc_C).mT * S_prev + S_delta
    return O, S_new


def doc_chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False, *,
                  version: str = "v3", chunk_size: int = 64, dtype: torch.dtype = torch.float32):
    """Run a document chunk reference over a whole sequence in FLA's layout (T % chunk_size == 0)."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    if T % chunk_size:
        raise ValueError(f"doc_chunk_kda needs T divisible by chunk_size, got T={T}, chunk_size={chunk_size}")
    if scale is None:
        scale = K ** -0.5
    step = {"v2": doc_chunk_v2, "v3": doc_chunk_v3}[version]
    def to_heads(x):
        return x.to(dtype).transpose(1, 2)                 # [B, H, T, ...]
    q, k, v, g = (to_heads(x) for x in (q, k, v, g))
    beta = beta.to(dtype).transpose(1, 2)
    q = q * scale
    S = torch.zeros(B, H, K, V, dtype=dtype, device=q.device) if initial_state is None else initial_state.to(dtype)
    outs = []
    for t in range(0, T, chunk_size):
        c = slice(t, t + chunk_size)
        O, S = step(q[:, :, c], k[:, :, c], v[:, :, c], g[:, :, c], beta[:, :, c], S)
        outs.append(O)
    return torch.cat(outs, dim=2).transpose(1, 2), (S if output_final_state else None)
