"""v6's backward (v5's too: the same forward math) as phase programs, with v6's safe math: every exp <= 1.

The gradients are v4's (kda/programs/v4_bwd.py, its docstring derives them); what changes is where the
decays exp(gc_i - gc_j), j <= i, come from. v4's backward forms the 16 x 16 diagonal blocks pair by pair on
the Vector ([C/16, 16, 16, d_k] products); v6's forward cuts each 16-wide sub-chunk again into 4-wide
micro-chunks, and so does its backward, at both levels with reference points r (gc at a block's first row):

  - blocks between 16-wide sub-chunks (I > J) and between 4-wide micro-chunks inside one (a > b), on the Cube:
    exp(gc_i - gc_j) = exp(gc_i - r_I) exp(r_I - gc_j), both factors <= 1. The left gradient of a bilinear
    form F[i,j] = sum_d X_i Y_j e_ij is exp(gc_i - r_I) * [dF_IJ @ (Y_J exp(r_I - gc_J))] (per row block,
    one accumulation over its pairs); the right one exp(r_I - gc_J) * [dF_IJ^T @ (X_I exp(gc_I - r_I))]
    (per pair, summed per column block on the Vector);
  - the 4 x 4 micro-diagonal blocks (j <= i inside a micro-chunk), on the Vector: exp(min(gc_i - gc_j, 0))
    masked to j <= i, 40 (i, j) products per 16 rows against v4's 136.

The inverse R = (I + StrictTril(A))^-1 is recomputed as the forward makes it (16-wide diagonal inverses,
merged on the Cube: FLA's solve_tril); its gradient -R^T dR R^T needs only R. dbeta's term through
A = Diag(beta) A_kk is taken as fla's backward does (dbeta_i = K_i . XL_i, XL the left gradient taken with
dL), so A_kk never returns to the Vector.

Phases per chunk, six hand-offs (v4's backward: six). What D3 needs of ① stays in the workspace until D3,
so at d_k = d_v = 128 in bf16 the slot is full (128 KiB at ④ and ⑤): dQ's state product waits for D2, R^T dM
(whose diagonal is dbeta's term through M) goes to the Vector instead of dM and R, and Q_scaled, K_decay,
Kb_left_neg and Kb_left4_neg are resident (with dS's 64 KiB in fp32: 120 of 128 KiB).
  A (Vec)   gates' cumsum, the cross-block factors at both levels (the forward's and Kb_left_neg), the
            micro-diagonal blocks of A_kk and A_qk                                                      -> ①
  B (Cube)  the off-diagonal blocks of A_kk and A_qk at both levels                                     -> ②
  C (Vec)   A_kk and A_qk assembled, the 16-wide diagonal inverses; the state path's operands           -> ③
  D1 (Cube) R merged, M = R Diag(beta); Vp, dVp, dV and the products on the state's path               -> ④
  E1 (Vec)  dS_prev first (the next chunk back waits for it); the state terms of dK, dg
  D2 (Cube) dM, R^T dM, dL_neg = R^T dM M^T, dA_qk = dO Vp^T, dK_decay = Vp dS^T, dO S^T              -> ⑤
  E2 (Vec)  the micro-diagonal blocks' gradients, the chunk-end terms, dbeta's term through M (the
            diagonal of R^T dM), dQ's state term (D3 meanwhile)
  D3 (Cube) the off-diagonal blocks' gradients at both levels                                           -> ⑥
  E3 (Vec)  the decays applied and summed: dQ, dK, dg, dbeta

`recompute` first runs `v6.states` (v6's forward without its output: each chunk's starting state H to GM,
as FLA's fwd_h stores it); `store` reads the H the forward kept.
"""
from __future__ import annotations

import torch

from npusim import phase_program

from kda.programs.fla import blocks as block_grid
from kda.programs.fla import merge_inverse
from kda.programs.v4 import assemble, block_pairs, sub_chunks
from kda.programs.v4_bwd import blocks, walks_back
from kda.programs.v5 import assemble_and_invert_diagonal, inverse_times_beta, off_diagonal_phase, sub_chunks_of


def level_factors(K_sub, Qs_sub, g_sub, beta_sub, pairs):
    """The cross-block factors of one level (blocks along dim -3, pairs I > J), every exponent <= 0:
    to_ref = exp(gc_I - r_I), right_decay = exp(r_I - gc_J) (per pair), K_left, Q_left (I >= 1), K_right
    (per pair) and Kb_left_neg = -(K_left beta) (the right gradient through A = Diag(beta) A_kk)."""
    pi, pj = [i for i, _ in pairs], [j for _, j in pairs]
    ref = g_sub[..., :1, :]
    to_ref = (g_sub - ref).exp()
    K_left = (K_sub * to_ref)[..., 1:, :, :]
    Q_left = (Qs_sub * to_ref)[..., 1:, :, :]
    Kb_left_neg = -(K_left * beta_sub[..., 1:, :, :])
    right_decay = (ref[..., pi, :, :] - g_sub[..., pj, :, :]).exp()
    K_right = K_sub[..., pj, :, :] * right_decay
    return to_ref, right_decay, K_left, Q_left, Kb_left_neg, K_right


def micro_diagonal_blocks(K4, g4, Q4=None):
    """The 4 x 4 micro-diagonal blocks of K K^T (and Q K^T) decayed, entry by entry, as flat [.., s * s]
    (upper triangle zero): exp(gc_i - gc_j), j <= i, every exponent <= 0 (kda.programs.v4.diagonal_blocks)."""
    s = K4.shape[-2]
    rows, cols = zip(*[(i, j) for i in range(s) for j in range(i + 1)])
    rows, cols = list(rows), list(cols)
    flat = [i * s + j for i, j in zip(rows, cols)]
    K_j = K4[..., cols, :] * (g4[..., rows, :] - g4[..., cols, :]).exp()
    out = []
    for X in (K4,) if Q4 is None else (K4, Q4):
        v = (X[..., rows, :] * K_j).sum(-1)
        full = v.new_zeros(v.shape[:-1] + (s * s,))
        full[..., flat] = v
        out.append(full)
    return out


def micro_diagonal(X, n: int, S: int, m: int, s: int):
    """[.., C, C] -> its micro-diagonal blocks [.., n, m, s, s, 1]: pure data movement. (Indices as lists:
    the CUDA graph's capture makes list indices device tensors once, npusim/record/replay.py.)"""
    d16 = blocks(X, n, S)[..., list(range(n)), list(range(n)), :, :]
    return blocks(d16, m, s)[..., list(range(m)), list(range(m)), :, :][..., None]


def cross_gradients(dLn_off, dAqk_off, K_right, Kb_left_neg, Q_left, pairs, n: int):
    """The Cube's part of the off-diagonal blocks' gradients at one level, from the blocks (I, J) of
    dL_neg (= -dL) and dA_qk: per row block the left products (one accumulation over its pairs) and per pair
    the right products. Returns (X_kk_off = -[dL @ K_right], X_qk_off, T_off)."""
    left = [i - 1 for i, _ in pairs]
    rows_of = [[p for p, (i, _) in enumerate(pairs) if i == row] for row in range(1, n)]
    def per_row(dF):
        return torch.stack([torch.cat([dF[..., p, :, :] for p in ps], -1) @
                            torch.cat([K_right[..., p, :, :] for p in ps], -2) for ps in rows_of], -3)
    T_off = (torch.cat([dLn_off.mT, dAqk_off.mT], -1) @
             torch.cat([Kb_left_neg[..., left, :, :], Q_left[..., left, :, :]], -2))
    return per_row(dLn_off), per_row(dAqk_off), T_off


def apply_decays(X_kk_off, X_qk_off, T_off, to_ref, right_decay, pairs, n: int):
    """The Vector's part at one level: the left decays and the right decays summed per column block.
    Returns XL (left gradient taken with dL), X_qk, Z (right gradients), each [.., n, S, d_k]."""
    cols_of = [[p for p, (_, j) in enumerate(pairs) if j == col] for col in range(n - 1)]
    zero = X_qk_off.new_zeros(X_qk_off[..., :1, :, :].shape)
    XL = torch.cat([zero, -to_ref[..., 1:, :, :] * X_kk_off], -3)
    X_qk = torch.cat([zero, to_ref[..., 1:, :, :] * X_qk_off], -3)
    T_dec = right_decay * T_off
    Z = torch.cat([torch.stack([T_dec[..., ps, :, :].sum(-3) for ps in cols_of], -3), zero], -3)
    return XL, X_qk, Z


def merged_inverse(Ai_diag, A_neg):
    """(I + StrictTril(A))^-1 from its 16-wide diagonal inverses (FLA's merge, Cube matmuls)."""
    S, n = sub_chunks(A_neg.shape[-1])
    zero = torch.zeros_like(A_neg[..., :S, :S])
    Ai = [[Ai_diag[..., i, :, :] if i == j else zero for j in range(n)] for i in range(n)]
    merge_inverse(Ai, block_grid(A_neg, n, S), n)
    return torch.cat([torch.cat(Ai[i], -1) for i in range(n)], -2)


@phase_program("v6.bwd", returns=("dQ", "dK", "dV", "dg", "dbeta", "dS_prev"), state=("dS", "dS_prev"),
               resident=("Q_scaled", "K_decay", "Kb_left_neg", "Kb_left4_neg"), state_for_bf16="fp32", forward="v6")
def kda_chunk_v6_bwd(npu, Q, K, V, g, beta, H, dO, dS, scale):
    """KDA chunk v6 backward: 9 phases, 6 hand-offs, every exp <= 1 (micro-chunks of 4); reverse walk."""
    S = H                                              # the forward state at the chunk's start, from GM
    C = Q.shape[-2]
    S_, n = sub_chunks(C)
    s, m = sub_chunks_of(S_)
    pairs, pairs4 = block_pairs(n), block_pairs(m)
    pi, pj, pi4, pj4 = ([p[k] for p in ps] for ps in (pairs, pairs4) for k in (0, 1))
    diag = list(range(n))

    # Phase A: Vec, the cross-block factors at both levels and the micro-diagonal blocks
    with npu.vec("A"):
        gc = g.cumsum(-2)
        Qs = Q * scale
        g16, K16, Q16 = (x.unflatten(-2, (n, S_)) for x in (gc, K, Qs))
        b16 = beta.unflatten(-1, (n, S_))[..., None]
        to_ref, right_decay, K_left, Q_left, Kb_left_neg, K_right = level_factors(K16, Q16, g16, b16, pairs)
        g4, K4, Q4, b4 = (x.unflatten(-2, (m, s)) for x in (g16, K16, Q16, b16))
        to_ref4, right_decay4, K_left4, Q_left4, Kb_left4_neg, K_right4 = level_factors(K4, Q4, g4, b4, pairs4)
        kk_blocks, qk_blocks = micro_diagonal_blocks(K4, g4, Q4)
    npu.keep(gc, Qs, g4, K4, Q4, kk_blocks, qk_blocks, to_ref, right_decay, to_ref4, right_decay4, Kb_left_neg,
             Kb_left4_neg)
    off = off_diagonal_phase(npu, C, (K_left, Q_left, K_right, K_left4, Q_left4, K_right4))      # ① B ②

    # Phase C: Vec, A_kk and A_qk assembled, the diagonal inverses; the state path's operands
    with npu.vec("C"):
        Ai_diag, A_neg, D_beta, A_qk = assemble_and_invert_diagonal(npu, kk_blocks, qk_blocks, off, beta)
        Gamma = gc.exp()
        K_scaled = K * Gamma
        K_scaled_neg = -K_scaled
        Q_scaled = Qs * Gamma
        gc_C = gc[..., -1:, :]
        decay_to_end = (gc_C - gc).exp()
        K_decay = K * decay_to_end
        gamma_C = gc_C.exp()
    npu.sync(Ai_diag, A_neg, D_beta, A_qk, K_scaled_neg, Q_scaled, K_decay, Kb_left_neg, Kb_left4_neg)   # ③
    npu.keep(Gamma, K_scaled, decay_to_end, gamma_C)

    # Phase D1: Cube, R and M again, the pseudo-values and the products on the state's path
    with npu.cube("D1"):
        R = merged_inverse(Ai_diag, A_neg)
        M = R @ D_beta
        KS_neg = K_scaled_neg @ S                                          # -K_scaled S
        Vp = torch.cat([M, M], -1) @ torch.cat([V, KS_neg], -2)            # M (V - K_scaled S)
        dVp = torch.cat([A_qk.mT, K_decay], -1) @ torch.cat([dO, dS], -2)  # A_qk^T dO + K_decay dS
        dV = M.mT @ dVp
        dVS = dV @ S.mT                                                    # dK_scaled = -dVS
        dS_part = torch.cat([Q_scaled, K_scaled_neg], -2).mT @ torch.cat([dO, dV], -2)
    npu.sync(dVS, dS_part)                                                                  # ④
    npu.keep(R, M, KS_neg, Vp, dVp)

    # Phase E1: Vec, the state's gradient first (the next chunk back waits for it)
    with npu.vec("E1"):
        dS_prev = dS_part + gamma_C.mT * dS
        dK_S = -Gamma * dVS
        dgc_VS = -K_scaled * dVS
        d_gc_C_S = gamma_C * (S * dS).sum(-1)[..., None, :]
    npu.keep(dK_S, dgc_VS, d_gc_C_S)

    # Phase D2: Cube, the gradients of the intra-chunk matrices (and dQ's state term, off the state's path)
    with npu.cube("D2"):
        dM = torch.cat([dVp, dVp], -1) @ torch.cat([V, KS_neg], -1).mT     # dVp (V - K_scaled S)^T
        RdM = R.mT @ dM                                                    # its diagonal: dbeta's term via M
        dL_neg = RdM @ M.mT                                                # -(gradient of StrictTril(A))
        dA_qk = dO @ Vp.mT
        dK_decay = Vp @ dS.mT
        dQ_scaled = dO @ S.mT
    npu.sync(RdM, dL_neg, dA_qk, dK_decay, dQ_scaled)                                      # ⑤
    npu.keep(dL_neg, dA_qk)

    # Phase E2: Vec, the micro-diagonal blocks (D3 runs on the Cube meanwhile)
    with npu.vec("E2"):
        mask = torch.ones(s, s, dtype=Q.dtype, device=Q.device).tril()
        E4 = (g4[..., :, None, :] - g4[..., None, :, :]).clamp_max(0).exp() * mask[..., None]   # e_ij, j <= i
        dL = -dL_neg.tril(-1)                                              # gradient of A = Diag(beta) A_kk
        dL_d = micro_diagonal(dL, n, S_, m, s)
        dA_d = micro_diagonal(dL * beta[..., :, None], n, S_, m, s)
        dAqk_d = micro_diagonal(dA_qk.tril(), n, S_, m, s)
        XL_d = (dL_d * E4 * K4[..., None, :, :]).sum(-2)
        Z_kk_d = (dA_d * E4 * K4[..., :, None, :]).sum(-3)
        X_qk_d = (dAqk_d * E4 * K4[..., None, :, :]).sum(-2)
        Z_qk_d = (dAqk_d * E4 * Q4[..., :, None, :]).sum(-3)
        end_terms = K_decay * dK_decay
        dK_end = decay_to_end * dK_decay
        dbeta_M = RdM.diagonal(dim1=-2, dim2=-1)                           # sum_i dM_ij R_ij
        dQs_S = Gamma * dQ_scaled
        dgc_S = dgc_VS + Q_scaled * dQ_scaled
    npu.keep(XL_d, Z_kk_d, X_qk_d, Z_qk_d, end_terms, dK_end, dbeta_M, dQs_S, dgc_S)

    # Phase D3: Cube, the off-diagonal blocks' gradients at both levels
    with npu.cube("D3"):
        dLn16, dAqk16 = blocks(dL_neg, n, S_), blocks(dA_qk, n, S_)
        X_kk_off, X_qk_off, T_off = cross_gradients(dLn16[..., pi, pj, :, :], dAqk16[..., pi, pj, :, :],
                                                    K_right, Kb_left_neg, Q_left, pairs, n)
        dLn4 = blocks(dLn16[..., diag, diag, :, :], m, s)
        dAqk4 = blocks(dAqk16[..., diag, diag, :, :], m, s)
        X_kk_off4, X_qk_off4, T_off4 = cross_gradients(dLn4[..., pi4, pj4, :, :], dAqk4[..., pi4, pj4, :, :],
                                                       K_right4, Kb_left4_neg, Q_left4, pairs4, m)
    npu.sync(X_kk_off, X_qk_off, T_off, X_kk_off4, X_qk_off4, T_off4)                       # ⑥

    # Phase E3: Vec, the decays applied and the sums: dQ, dK, dg, dbeta
    with npu.vec("E3"):
        XL16, X_qk16, Z16 = apply_decays(X_kk_off, X_qk_off, T_off, to_ref, right_decay, pairs, n)
        XL4, X_qk4, Z4 = apply_decays(X_kk_off4, X_qk_off4, T_off4, to_ref4, right_decay4, pairs4, m)
        XL = XL16.flatten(-3, -2) + (XL4 + XL_d).flatten(-4, -2)
        X_qk = X_qk16.flatten(-3, -2) + (X_qk4 + X_qk_d).flatten(-4, -2)
        Z = Z16.flatten(-3, -2) + (Z4 + Z_kk_d + Z_qk_d).flatten(-4, -2)
        X_kk = beta[..., :, None] * XL
        dQ = (dQs_S + X_qk) * scale
        dK = dK_S + X_kk + Z + dK_end
        dgc = dgc_S + K * (X_kk - Z) + Qs * X_qk - end_terms
        d_gc_C = end_terms.sum(-2, keepdim=True) + d_gc_C_S
        dgc_all = dgc + torch.cat([dgc.new_zeros(dgc[..., :-1, :].shape), d_gc_C], -2)
        dg = dgc_all.flip(-2).cumsum(-2).flip(-2)                           # gc = cumsum(g)
        dbeta = dbeta_M + (K * XL).sum(-1)
    return dQ, dK, dV, dg, dbeta, dS_prev


@phase_program("v6.states", returns=("H", "S_new"), state=("S_prev", "S_new"), state_for_bf16="fp32",
               state_handoff="own")
def kda_chunk_v6_states(npu, K, V, g, beta, S_prev):
    """v6's forward without the output: each chunk's starting state H to GM, then v6's state update."""
    C = K.shape[-2]
    S_, n = sub_chunks(C)
    s, m = sub_chunks_of(S_)
    pairs, pairs4 = block_pairs(n), block_pairs(m)
    with npu.vec("A"):
        H = S_prev.clone()                             # h[t] to GM, as FLA's fwd_h stores it
        gc = g.cumsum(-2)
        g16, K16 = gc.unflatten(-2, (n, S_)), K.unflatten(-2, (n, S_))
        b16 = beta.unflatten(-1, (n, S_))[..., None]
        _, _, K_left, _, _, K_right = level_factors(K16, K16, g16, b16, pairs)
        g4, K4 = g16.unflatten(-2, (m, s)), K16.unflatten(-2, (m, s))
        _, _, K_left4, _, _, K_right4 = level_factors(K4, K4, g4, b16.unflatten(-2, (m, s)), pairs4)
        kk_blocks, = micro_diagonal_blocks(K4, g4)
    npu.sync(K_left, K_right, K_left4, K_right4)                                           # ①
    npu.keep(gc, kk_blocks)
    with npu.cube("B"):
        A_kk_off = K_left[..., [i - 1 for i, _ in pairs], :, :] @ K_right.mT
        A_kk_off4 = K_left4[..., [i - 1 for i, _ in pairs4], :, :] @ K_right4.mT
    npu.sync(A_kk_off, A_kk_off4)                                                          # ②
    with npu.vec("C"):
        A_kk = assemble(assemble(kk_blocks.unflatten(-1, (s, s)), A_kk_off4, pairs4), A_kk_off, pairs)
        A = A_kk.tril(-1) * beta[..., :, None]
        Ai_diag = npu.forward_substitution(torch.stack([A[..., i * S_:(i + 1) * S_, i * S_:(i + 1) * S_]
                                                        for i in range(n)], -3))
        A_neg = -A
        D_beta = beta[..., None, :] * torch.eye(C, dtype=beta.dtype, device=beta.device)
        K_scaled = K * gc.exp()
        gc_C = gc[..., -1:, :]
        K_decay = K * (gc_C - gc).exp()
        gamma_C = gc_C.exp()
    npu.sync(Ai_diag, A_neg, D_beta, K_scaled, K_decay)                                    # ③
    npu.keep(gamma_C)
    with npu.cube("D1"):
        M = inverse_times_beta(Ai_diag, A_neg, D_beta)
        W = M @ K_scaled
        U = M @ V
    npu.keep(W, U)
    with npu.cube("D2"):                               # the state arrives by its own hand-off
        WS = W @ S_prev
    npu.sync(U, WS)                                                                        # ④
    with npu.vec("E"):
        V_pseudo = U - WS
    npu.sync(V_pseudo)                                                                     # ⑤
    with npu.cube("F1"):
        S_delta = K_decay.mT @ V_pseudo
    npu.sync(S_delta)                                                                      # ⑥
    with npu.vec("G"):
        S_new = gamma_C.mT * S_prev + S_delta
    return H, S_new


V6_BACKWARD = walks_back("v6", kda_chunk_v6_states, kda_chunk_v6_bwd, math="every exp <= 1")
