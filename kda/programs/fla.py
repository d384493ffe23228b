"""`fla`: flash-linear-attention's KDA forward decomposition (fla/ops/kda, fla-core 0.6), as its Triton-Ascend
backend and xLLM run it on a 910B: six kernels, five of them over all (sequence, chunk) items and one
that walks the chunks in order.

    chunk_local_cumsum -> scaled_dot_kkt (+ Aqk) -> solve_tril -> recompute_w_u -> fwd_h -> fwd_o

Everything between kernels goes through GM (HBM): the cumulative gates gc [C, d_k] and A_kk [C, C] in
fp32 (FLA keeps both in fp32), A_inv, W, U, A_qk, the per-chunk state H [d_k, d_v] (FLA's h,
[B, H, NT, K, V]) and V_new in the transfer type. The intra-chunk matrices use v4's (and FLA's) 16-wide
sub-chunks with reference points, so no exp has a positive argument; solve_tril inverts the 16-wide
diagonal blocks by forward substitution on the Vector and merges them with Cube matmuls, as FLA's
merge_16x16_to_64x64_inverse does. On Ascend a Triton kernel's dots run on the Cube and its element-wise
work on the Vector, so every kernel that mixes both has hand-offs of its own.
Shapes per chunk: Q, K, g [.., C, d_k]; V [.., C, d_v]; beta [.., C]; state [.., d_k, d_v].
"""
from __future__ import annotations

import torch

from npusim import phase_program
from npusim.model.schedule import CHUNKS, SEQUENTIAL, Design, Pass

from kda.programs.v4 import assemble, block_pairs, diagonal_blocks, sub_chunks


@phase_program("fla.cumsum", returns=("gc",))
def chunk_local_cumsum(npu, g):
    """The gates' cumulative sum inside each chunk."""
    with npu.vec("cumsum"):
        gc = g.cumsum(-2)                          # [C, d_k], fp32 in GM
    return gc


@phase_program("fla.kkt", returns=("A_kk", "A_qk"))
def scaled_dot_kkt(npu, Q, K, gc, beta, scale):
    """beta * StrictTril(K Gamma (K / Gamma)^T) and tril(Q Gamma (K / Gamma)^T), never forming 1 / Gamma."""
    S, n = sub_chunks(K.shape[-2])
    pairs = block_pairs(n)
    pair_i, pair_j = [i for i, _ in pairs], [j for _, j in pairs]
    left_of_pair = [i - 1 for i in pair_i]
    with npu.vec("factors"):
        g_sub = gc.unflatten(-2, (n, S))
        K_sub = K.unflatten(-2, (n, S))
        Qs_sub = (Q * scale).unflatten(-2, (n, S))
        ref = g_sub[..., :1, :]
        to_ref = (g_sub - ref).exp()                            # exp(gc_i - r_I) <= 1
        K_left = (K_sub * to_ref)[..., 1:, :, :]
        Q_left = (Qs_sub * to_ref)[..., 1:, :, :]
        K_right = K_sub[..., pair_j, :, :] * (ref[..., pair_i, :, :] - g_sub[..., pair_j, :, :]).exp()
        kk_blocks, qk_blocks = diagonal_blocks(K_sub, Qs_sub, g_sub)  # diagonal blocks, pair by pair
        A_kk_diag = kk_blocks.unflatten(-1, (S, S))
        A_qk_diag = qk_blocks.unflatten(-1, (S, S))
    npu.sync(K_left, Q_left, K_right)
    npu.keep(A_kk_diag, A_qk_diag)
    with npu.cube("dots"):
        A_kk_off = K_left[..., left_of_pair, :, :] @ K_right.mT
        A_qk_off = Q_left[..., left_of_pair, :, :] @ K_right.mT
    npu.sync(A_kk_off, A_qk_off)
    with npu.vec("assemble"):
        A_kk = assemble(A_kk_diag, A_kk_off, pairs).tril(-1) * beta[..., :, None]
        A_qk = assemble(A_qk_diag, A_qk_off, pairs)
    return A_kk, A_qk


def blocks(X, n: int, S: int) -> list[list]:
    """X [.., n S, n S] as an n x n grid of [.., S, S] blocks (views: free on either unit)."""
    return [[X[..., i * S:(i + 1) * S, j * S:(j + 1) * S] for j in range(n)] for i in range(n)]


def merge_inverse(Ai: list[list], B: list[list], n: int) -> None:
    """Off-diagonal blocks of (I + A)^-1 from its diagonal blocks' inverses, nearest the diagonal first,
    with B = -A: Ai[i][j] = Ai[i][i] sum_m B[i][m] Ai[m][j] (FLA's merge_16x16_to_64x64_inverse). Each
    sum over m is one Cube matmul of the concatenated blocks, accumulated in L0C."""
    for d in range(1, n):
        for i in range(d, n):
            j = i - d
            acc = torch.cat([B[i][m] for m in range(j, i)], -1) @ torch.cat([Ai[m][j] for m in range(j, i)], -2)
            Ai[i][j] = Ai[i][i] @ acc


@phase_program("fla.solve_tril", returns=("A_inv",))
def solve_tril(npu, A_kk):
    """(I + A_kk)^-1: 16-wide diagonal blocks by forward substitution (Vector), merged on the Cube."""
    S, n = sub_chunks(A_kk.shape[-1])
    with npu.vec("diag"):
        A_diag = torch.stack([A_kk[..., i * S:(i + 1) * S, i * S:(i + 1) * S] for i in range(n)], -3)
        Ai_diag = npu.forward_substitution(A_diag)               # [.., n, S, S], the n blocks at once
        A_neg = -A_kk
    npu.sync(Ai_diag, A_neg)
    with npu.cube("merge"):
        zero = torch.zeros_like(A_neg[..., :S, :S])
        Ai = [[Ai_diag[..., i, :, :] if i == j else zero for j in range(n)] for i in range(n)]
        merge_inverse(Ai, blocks(A_neg, n, S), n)
        A_inv = torch.cat([torch.cat(Ai[i], -1) for i in range(n)], -2)
    return A_inv


@phase_program("fla.wu", returns=("W", "U"))
def recompute_w_u(npu, K, V, gc, beta, A_inv):
    """W = A_inv Diag(beta) K Gamma, U = A_inv Diag(beta) V."""
    with npu.vec("scale"):
        K_beta = K * gc.exp() * beta[..., :, None]
        V_beta = V * beta[..., :, None]
    npu.sync(K_beta, V_beta)
    with npu.cube("dots"):
        W = A_inv @ K_beta
        U = A_inv @ V_beta
    return W, U


@phase_program("fla.fwd_h", returns=("H", "V_new", "S_new"), state=("S_prev", "S_new"), state_for_bf16="fp32")
def fwd_h(npu, K, gc, W, U, S_prev):
    """The state pass: stores each chunk's starting state H and the pseudo-values V_new = U - W S."""
    with npu.vec("decay"):
        gc_C = gc[..., -1:, :]
        K_decay = K * (gc_C - gc).exp()
        gamma_C = gc_C.exp()
        H = S_prev.clone()                         # h[t] to GM, as FLA's fwd_h stores it
    npu.sync(K_decay)                              # (+ the state)
    npu.keep(gamma_C)
    with npu.cube("ws"):
        WS = W @ S_prev
    npu.sync(WS)
    with npu.vec("v_new"):
        V_new = U - WS
    npu.sync(V_new)
    with npu.cube("delta"):
        S_delta = K_decay.mT @ V_new
    npu.sync(S_delta)
    with npu.vec("update"):
        S_new = gamma_C.mT * S_prev + S_delta
    return H, V_new, S_new


@phase_program("fla.fwd_o", returns=("O",))
def fwd_o(npu, Q, gc, H, A_qk, V_new, scale):
    """O = (scale Q Gamma) H + A_qk V_new: one Cube accumulation over [Q_scaled | A_qk] [H ; V_new]."""
    with npu.vec("q"):
        Q_scaled = Q * scale * gc.exp()
    npu.sync(Q_scaled)
    with npu.cube("o"):
        O = torch.cat([Q_scaled, A_qk], -1) @ torch.cat([H, V_new], -2)
    return O


FLA = Design("fla", (
    Pass("chunk_local_cumsum", chunk_local_cumsum, CHUNKS),
    Pass("scaled_dot_kkt", scaled_dot_kkt, CHUNKS),
    Pass("solve_tril", solve_tril, CHUNKS),
    Pass("recompute_w_u", recompute_w_u, CHUNKS),
    Pass("fwd_h", fwd_h, SEQUENTIAL),
    Pass("fwd_o", fwd_o, CHUNKS),
), description="FLA's decomposition: six kernels, five over all (sequence, chunk) items",
    notes={"stored": "gc=fp32,A_kk=fp32", "state_for_bf16": "fp32"})
