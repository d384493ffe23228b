"""v5: two passes, every exp <= 1. The intra-chunk matrices over all (sequence, chunk) items on all AI
cores; then one fused pass over the chunks in order with four hand-offs per chunk.

Why two passes (the figures: `python -m kda.run --version all --no-numerics --heads 32 --tokens 131072`,
and README "Which design wins"):
  - v3/v4 run each head on one core: 32 heads on 24 cores leave 8 cores with two heads, and v4's safe
    Phase A is a long Vector phase per chunk. Everything that does not need the state (the gates'
    reference points, A_kk and A_qk, the inverse) moves to a CHUNKS pass, spread evenly over all cores:
    one head of 131072 tokens uses all 24 cores there.
  - FLA's six kernels move several times the HBM floor and pay six launches. v5's first pass
    hands the second only M [C, C] and A_qk [C, C]; the second re-reads q, k, v and g, which is cheaper
    than storing W, U, Q_scaled and K_decay (72 KiB per chunk) and reading them back.
  - The inverse: FLA's solve_tril. The four 16-wide diagonal blocks by forward substitution side by side
    (15 dependent steps instead of v3's 63) and the rest as Cube matmuls (fla.merge_inverse); Diag(beta)
    is one more Cube matmul.
  - Safety: v4's reference points, twice. Blocks between 16-wide sub-chunks and, inside each, between
    4-wide micro-chunks are Cube matmuls of factors exp(gc_i - r) and exp(r - gc_j), both <= 1; only
    the 4 x 4 micro-diagonal blocks are formed pair by pair on the Vector (20 K products instead of v4's
    70 K). No exp has a positive argument.
  - The sequential pass: O = [Q_scaled | A_qk] [S ; V_pseudo] is one Cube accumulation, so O leaves the
    Cube without a hand-off; four syncs per chunk (v3: six). Only what needs the state waits for it: the
    state travels on a hand-off of its own, W = M K_scaled and U = M V (D1) run ahead of it, and O (F2)
    runs on the Cube beside G's state update: a shorter state pass than with the state riding on
    hand-off ① after D-F in one Cube phase. `--interleave 2` lets a core alternate two heads' chunks in
    this pass.
  - Where it stands: with two heads per core, each with its own ping/pong slots, the same math in one loop
    per chunk (v6) is faster for the Kimi layer; with fewer heads than cores v5 is, since its intra pass
    spreads even one head over all cores.
Shapes per chunk: Q, K, g [.., C, d_k]; V [.., C, d_v]; beta [.., C]; S [.., d_k, d_v].
"""
from __future__ import annotations

import torch

from npusim import phase_program
from npusim.model.schedule import BARRIER, CHUNKS, SEQUENTIAL, Design, Pass

from kda.programs.fla import blocks, merge_inverse
from kda.programs.v4 import assemble, block_pairs, diagonal_blocks, sub_chunks

MICRO = 4         # micro-chunk width inside a 16-wide sub-chunk


def cross_factors(x_sub, q_sub, g_sub, pairs):
    """Left and right operands of the blocks (I, J), I > J, between sub-chunks along dim -3, with r_I the
    gate at sub-chunk I's first row: K_I exp(gc_I - r_I), Q_I exp(gc_I - r_I) (for I >= 1) and
    K_J exp(r_I - gc_J) (per pair). Every exponent is <= 0 since gc decreases."""
    pi, pj = [i for i, _ in pairs], [j for _, j in pairs]
    ref = g_sub[..., :1, :]
    to_ref = (g_sub - ref).exp()
    k_left = (x_sub * to_ref)[..., 1:, :, :]
    q_left = (q_sub * to_ref)[..., 1:, :, :]
    k_right = x_sub[..., pj, :, :] * (ref[..., pi, :, :] - g_sub[..., pj, :, :]).exp()
    return k_left, q_left, k_right


def intra_factors(Q, K, gc, scale):
    """Phase A's math: Q scaled, the cross-block factors at both levels and the 4 x 4 micro-diagonal blocks
    formed pair by pair. Returns (Qs, factors for the Cube, kk_blocks, qk_blocks)."""
    S, n = sub_chunks(K.shape[-2])
    s, m = sub_chunks_of(S)
    pairs, pairs4 = block_pairs(n), block_pairs(m)
    Qs = Q * scale
    g16, K16, Q16 = (x.unflatten(-2, (n, S)) for x in (gc, K, Qs))
    K_left, Q_left, K_right = cross_factors(K16, Q16, g16, pairs)            # between 16-wide sub-chunks
    g4, K4, Q4 = (x.unflatten(-2, (m, s)) for x in (g16, K16, Q16))
    K_left4, Q_left4, K_right4 = cross_factors(K4, Q4, g4, pairs4)          # between 4-wide micro-chunks
    kk_blocks, qk_blocks = diagonal_blocks(K4, Q4, g4)                     # micro-diagonal, pair by pair
    return Qs, (K_left, Q_left, K_right, K_left4, Q_left4, K_right4), kk_blocks, qk_blocks


def off_diagonal_blocks(C: int, K_left, Q_left, K_right, K_left4, Q_left4, K_right4):
    """Phase B's math: the blocks between sub-chunks and between micro-chunks, as Cube matmuls."""
    S, n = sub_chunks(C)
    _, m = sub_chunks_of(S)
    left, left4 = [i - 1 for i, _ in block_pairs(n)], [i - 1 for i, _ in block_pairs(m)]
    return (K_left[..., left, :, :] @ K_right.mT, Q_left[..., left, :, :] @ K_right.mT,
            K_left4[..., left4, :, :] @ K_right4.mT, Q_left4[..., left4, :, :] @ K_right4.mT)


def off_diagonal_phase(npu, C: int, factors, *extra):
    """Hand-off ① (Phase A's cross-block factors, and `extra`), Phase B on the Cube, hand-off ②.
    Returns the four off-diagonal block sets (A_kk_off, A_qk_off, A_kk_off4, A_qk_off4)."""
    K_left, Q_left, K_right, K_left4, Q_left4, K_right4 = factors
    npu.sync(K_left, Q_left, K_right, K_left4, Q_left4, K_right4, *extra)          # ①
    with npu.cube("B"):
        A_kk_off, A_qk_off, A_kk_off4, A_qk_off4 = off_diagonal_blocks(C, *factors)
    npu.sync(A_kk_off, A_qk_off, A_kk_off4, A_qk_off4)                            # ②
    return A_kk_off, A_qk_off, A_kk_off4, A_qk_off4


def assemble_and_invert_diagonal(npu, kk_blocks, qk_blocks, off, beta):
    """Phase C's math: A_kk (times beta) and A_qk assembled from their blocks, the 16-wide diagonal blocks of
    A_kk inverted side by side. Returns (Ai_diag, A_neg, D_beta, A_qk)."""
    A_kk_off, A_qk_off, A_kk_off4, A_qk_off4 = off
    C = beta.shape[-1]
    S, n = sub_chunks(C)
    s, m = sub_chunks_of(S)
    pairs, pairs4 = block_pairs(n), block_pairs(m)
    A_kk_16 = assemble(kk_blocks.unflatten(-1, (s, s)), A_kk_off4, pairs4)   # [.., n, S, S]
    A_kk = assemble(A_kk_16, A_kk_off, pairs).tril(-1) * beta[..., :, None]
    A_qk = assemble(assemble(qk_blocks.unflatten(-1, (s, s)), A_qk_off4, pairs4), A_qk_off, pairs)
    A_diag = torch.stack([A_kk[..., i * S:(i + 1) * S, i * S:(i + 1) * S] for i in range(n)], -3)
    Ai_diag = npu.forward_substitution(A_diag)                                # 15 steps, n blocks at once
    A_neg = -A_kk
    D_beta = beta[..., None, :] * torch.eye(C, dtype=beta.dtype, device=beta.device)
    return Ai_diag, A_neg, D_beta, A_qk


def inverse_times_beta(Ai_diag, A_neg, D_beta):
    """Phase D's math: the 16-wide inverses merged into (I + StrictTril(A_kk))^-1 by Cube matmuls (FLA's
    solve_tril), times Diag(beta)."""
    S, n = sub_chunks(A_neg.shape[-1])
    zero = torch.zeros_like(A_neg[..., :S, :S])
    Ai = [[Ai_diag[..., i, :, :] if i == j else zero for j in range(n)] for i in range(n)]
    merge_inverse(Ai, blocks(A_neg, n, S), n)
    return torch.cat([torch.cat(Ai[i], -1) for i in range(n)], -2) @ D_beta


@phase_program("v5.intra", returns=("M", "A_qk"))
def v5_intra(npu, Q, K, g, beta, scale):
    """Per (sequence, chunk): M = (I + StrictTril(beta K K^T decayed))^-1 Diag(beta) and A_qk."""
    with npu.vec("A"):
        gc = g.cumsum(-2)
        Qs, factors, kk_blocks, qk_blocks = intra_factors(Q, K, gc, scale)
        K_left, Q_left, K_right, K_left4, Q_left4, K_right4 = factors      # named: the payloads of ①
    npu.keep(kk_blocks, qk_blocks)
    off = off_diagonal_phase(npu, K.shape[-2], factors)                          # ① B ②
    with npu.vec("C"):
        Ai_diag, A_neg, D_beta, A_qk = assemble_and_invert_diagonal(npu, kk_blocks, qk_blocks, off, beta)
    npu.sync(Ai_diag, A_neg, D_beta)                                              # ③
    with npu.cube("D"):
        M = inverse_times_beta(Ai_diag, A_neg, D_beta)
    return M, A_qk


def sub_chunks_of(S: int) -> tuple[int, int]:
    return (MICRO, S // MICRO) if S > MICRO and S % MICRO == 0 else (S, 1)


@phase_program("v5.state", returns=("O", "S_new"), state=("S_prev", "S_new"), state_for_bf16="fp32",
               state_handoff="own")
def v5_state(npu, Q, K, V, g, M, A_qk, S_prev, scale):
    """Per chunk, in order: v3's Phases D-G on the M and A_qk of the intra pass, ordered so that only what
    needs the state waits for it: the state's own hand-off -> D2 -> ② -> E -> ③ -> F1 -> ④ -> G."""
    with npu.vec("A"):
        gc = g.cumsum(-2)
        Gamma = gc.exp()
        K_scaled = K * Gamma
        Q_scaled = Q * scale * Gamma
        gc_C = gc[..., -1:, :]
        K_decay = K * (gc_C - gc).exp()
        gamma_C = gc_C.exp()
    npu.sync(K_scaled, Q_scaled, K_decay)                       # ①
    npu.keep(gamma_C)
    with npu.cube("D1"):                                         # no state: runs ahead of it
        W = M @ K_scaled
        U = M @ V
    npu.keep(W, U)                                               # in L1 / L0C for D2
    return state_phases(npu, W, U, S_prev, K_decay, Q_scaled, A_qk, gamma_C)   # D2 ② E ③ F1 ④ G, F2


def state_phases(npu, W, U, S_prev, K_decay, Q_scaled, A_qk, gamma_C):
    """What waits for the state, once W and U are on the Cube (v5's state pass, v6): D2 -> sync -> E -> sync ->
    F1 -> sync -> G, and the output F2 on the Cube beside G. Returns (O, S_new)."""
    with npu.cube("D2"):                                         # the state arrives by its own hand-off
        WS = W @ S_prev
    npu.sync(U, WS)
    with npu.vec("E"):
        V_pseudo = U - WS
    npu.sync(V_pseudo)
    with npu.cube("F1"):
        S_delta = K_decay.mT @ V_pseudo
    npu.sync(S_delta)
    with npu.vec("G"):
        S_new = gamma_C.mT * S_prev + S_delta
    with npu.cube("F2"):                                         # the output: needs nothing of G, runs beside it
        O = torch.cat([Q_scaled, A_qk], -1) @ torch.cat([S_prev, V_pseudo], -2)
    return O, S_new


V5 = Design("v5", (
    Pass("intra", v5_intra, CHUNKS),
    Pass("state", v5_state, SEQUENTIAL, boundary=BARRIER),
), description="v5: intra-chunk matrices over all cores, then a 4-sync state pass (every exp <= 1)",
    notes={"stored": "A_qk=fp32"})
