"""v4's backward: one chunk's gradients in five phases and four Cube<->Vector hand-offs, walked from the
last chunk to the first carrying dS, the gradient of the state at the chunk's end (kda/driver/backward.py).

The forward of a chunk (v4, in its notation; Qs = scale Q, e_ij = exp(gc_i - gc_j) for j <= i):
    A_kk[i,j] = sum_d K_i K_j e_ij (j < i)    R = (I + StrictTril(A_kk * beta_i))^-1    M = R Diag(beta)
    Vp = M (V - K_scaled S)                  A_qk[i,j] = sum_d Qs_i K_j e_ij (j <= i)
    O = Q_scaled S + A_qk Vp                 S_new = Diag(gamma_C) S + K_decay^T Vp
Its gradients, given dO and dS = dL/dS_new (S: the forward state at the chunk's start, from GM):
    dVp = A_qk^T dO + K_decay dS     dV = M^T dVp     dM = dVp (V - K_scaled S)^T
    dA (of A_kk * beta) = -StrictTril(R^T dM M^T)     dA_qk = Tril(dO Vp^T)     dK_decay = Vp dS^T
    dK_scaled = -dV S^T     dQ_scaled = dO S^T     dS_prev = Q_scaled^T dO - K_scaled^T dV + Diag(gamma_C) dS
    dbeta_j = sum_i dM_ij R_ij + sum_k dA_jk A_kk[j,k]  (the second through A = A_kk * beta)
A bilinear form F[i,j] = sum_d X_i Y_j e_ij with gradient dF gives dX_i = sum_j dF_ij Y_j e_ij ("left") and
dY_j = sum_i dF_ij X_i e_ij ("right"), and d(gc) = X * dX - Y * dY; gc = cumsum(g), so dg is the reverse
cumulative sum of d(gc) (plus the gc_C terms on the last row).

Safety, as v4: no exp of a positive argument. The left gradients of the off-diagonal blocks (I > J) reuse
the forward's operands, exp(gc_i - r_I) * [dF_IJ @ (Y_J exp(r_I - gc_J))] (K_right); the right gradients
are per block pair, exp(r_I - gc_J) * [dF_IJ^T @ (X_I exp(gc_I - r_I))] (K_left, Q_left), summed on the
Vector. Diagonal blocks (j <= i inside a sub-chunk) use exp(min(gc_i - gc_j, 0)) masked to j <= i.

The Cube cannot negate or add: sums of products accumulate as one matmul over concatenated operands
(the Cube's L0C accumulation), and signs come from operands the Vector negates (K_scaled_neg, Kb_left_neg).
Hand-offs: ① operands (A -> B), ② A_kk's off-diagonal blocks (B -> C), ③ R, M and A_qk's diagonal blocks
(C -> D1), ④ the products on the state's path (D1 -> E1), ⑤ the intra-chunk matrices' gradients (D2 -> E2),
⑥ the off-diagonal blocks' gradients (D3 -> E3). The Cube's products are split three ways so that each
hand-off fits a 128 KiB slot at d_k = d_v = 128 (one sync of all of them needs 160 KiB in bf16). The state
gradient dS_prev is made first, in E1, and read by the next (earlier) chunk's D1 and E1; D2 and D3 run
on the Cube while E1 runs on the Vector, D3 while E2 does.

The designs (kda/driver/backward.py runs them): `recompute` first runs v4's forward again without its output as
`v4.states` (v4's six hand-offs, without Q's operands, O_inter and O_intra), which stores each chunk's
starting state H in GM (as FLA's fwd_h does), then walks back; `store` reads the H
the forward pass kept (its cost: d_k x d_v fp32 per chunk written by the forward and held until the
backward).
"""
from __future__ import annotations

import torch

from npusim import phase_program
from npusim.model.schedule import FUSED, Design, Pass

from kda.programs.v4 import assemble, block_pairs, diagonal_blocks, lower_pairs, sub_chunks


def blocks(X: torch.Tensor, n: int, S: int) -> torch.Tensor:
    """[.., C, C] -> [.., n, n, S, S] (row block, column block): pure data movement."""
    return X.unflatten(-2, (n, S)).unflatten(-1, (n, S)).transpose(-3, -2)


def state_terms(*, Gamma, dQ_scaled, dVS, K_scaled, Q_scaled, gamma_C, S, dS):
    """The state's terms of the chunk's gradients [.., C, K]: dQs_S, dK_S, dgc_S and d_gc_C_S (the last
    [.., 1, K]), from the state S [.., K, V] and its gradient dS."""
    dQs_S = Gamma * dQ_scaled
    dK_S = -Gamma * dVS
    dgc_S = -K_scaled * dVS + Q_scaled * dQ_scaled
    d_gc_C_S = gamma_C * (S * dS).sum(-1)[..., None, :]
    return dQs_S, dK_S, dgc_S, d_gc_C_S


def intra_matrix_gradients(*, dVp, V, KS_neg, R, M, dO, Vp, dS):
    """The gradients of the intra-chunk matrices [.., C, C] (and dK_decay [.., C, K]): dM = dVp (V - K_scaled
    S)^T, dL_neg = -(the gradient of StrictTril(A)), dA_qk = dO Vp^T, dK_decay = Vp dS^T."""
    dM = torch.cat([dVp, dVp], -1) @ torch.cat([V, KS_neg], -1).mT
    dL_neg = R.mT @ dM @ M.mT
    dA_qk = dO @ Vp.mT
    dK_decay = Vp @ dS.mT
    return dM, dL_neg, dA_qk, dK_decay


def off_diagonal_gradients(*, dL_neg, dA_qk, n, S, pair_i, pair_j, rows_of, K_right, Kb_left_neg, Q_left,
                           left_of_pair):
    """The 16-wide off-diagonal blocks' gradients: the left ones per row block, X_kk_off and X_qk_off
    [.., n - 1, S, K] (each row block's pairs (I, J) summed), and the right ones per pair, T_off [.., pairs, S, K]
    (for dL and dA_qk side by side)."""
    dL_off = blocks(dL_neg, n, S)[..., pair_i, pair_j, :, :]
    dAqk_off = blocks(dA_qk, n, S)[..., pair_i, pair_j, :, :]
    X_kk_off = torch.stack([torch.cat([dL_off[..., p, :, :] for p in ps], -1) @
                            torch.cat([K_right[..., p, :, :] for p in ps], -2) for ps in rows_of], -3)
    X_qk_off = torch.stack([torch.cat([dAqk_off[..., p, :, :] for p in ps], -1) @
                            torch.cat([K_right[..., p, :, :] for p in ps], -2) for ps in rows_of], -3)
    T_off = (torch.cat([dL_off.mT, dAqk_off.mT], -1) @
             torch.cat([Kb_left_neg[..., left_of_pair, :, :], Q_left[..., left_of_pair, :, :]], -2))
    return X_kk_off, X_qk_off, T_off


def safe_factors(Q, K, gc, beta, scale):
    """The forward operands a backward chunk recomputes, every exponent <= 0 (v4's 16-wide reference points):
    Gamma, K_scaled (and its negative), Qs, Q_scaled, gc_C, decay_to_end, K_decay, gamma_C, the sub-chunk
    views g_sub, K_sub, Qs_sub, beta_sub, ref, to_ref, the cross-block factors K_left, Q_left,
    Kb_left_neg (A = A_kk * beta_i, the sign of dA), right_decay and K_right."""
    S_, n = sub_chunks(Q.shape[-2])
    pairs = block_pairs(n)
    pair_i, pair_j = [i for i, _ in pairs], [j for _, j in pairs]
    Gamma = gc.exp()
    K_scaled = K * Gamma
    K_scaled_neg = -K_scaled
    Qs = Q * scale
    Q_scaled = Qs * Gamma
    gc_C = gc[..., -1:, :]
    decay_to_end = (gc_C - gc).exp()
    K_decay = K * decay_to_end
    gamma_C = gc_C.exp()
    g_sub = gc.unflatten(-2, (n, S_))
    K_sub = K.unflatten(-2, (n, S_))
    Qs_sub = Qs.unflatten(-2, (n, S_))
    beta_sub = beta.unflatten(-1, (n, S_))[..., :, :, None]
    ref = g_sub[..., :1, :]
    to_ref = (g_sub - ref).exp()                                   # exp(gc_i - r_I) <= 1
    K_left = (K_sub * to_ref)[..., 1:, :, :]
    Q_left = (Qs_sub * to_ref)[..., 1:, :, :]
    Kb_left_neg = -(K_left * beta_sub[..., 1:, :, :])              # A = A_kk * beta_i, sign of dA
    right_decay = (ref[..., pair_i, :, :] - g_sub[..., pair_j, :, :]).exp()   # exp(r_I - gc_J) <= 1
    K_right = K_sub[..., pair_j, :, :] * right_decay
    return (Gamma, K_scaled, K_scaled_neg, Qs, Q_scaled, gc_C, decay_to_end, K_decay, gamma_C, g_sub, K_sub, Qs_sub,
            beta_sub, ref, to_ref, K_left, Q_left, Kb_left_neg, right_decay, K_right)


@phase_program("v4", returns=("dQ", "dK", "dV", "dg", "dbeta", "dS_prev"), state=("dS", "dS_prev"),
               resident=("Q_scaled", "K_decay"), state_for_bf16="fp32",
               forward="v4")
def kda_chunk_v4_bwd(npu, Q, K, V, g, beta, H, dO, dS, scale):
    """KDA chunk v4 backward: 9 phases, 6 hand-offs, every exp <= 1; reverse walk carrying dS."""
    S = H                                       # the forward state at the chunk's start, from GM
    S_, n = sub_chunks(Q.shape[-2])
    pairs = block_pairs(n)
    pair_i, pair_j = [i for i, _ in pairs], [j for _, j in pairs]
    left_of_pair = [i - 1 for i in pair_i]
    rows_of = [[p for p, (i, _) in enumerate(pairs) if i == I] for I in range(1, n)]   # pairs per row block
    cols_of = [[p for p, (_, j) in enumerate(pairs) if j == J] for J in range(n - 1)]  # pairs per column block
    diag = list(range(n))

    # Phase A: Vec, v4's forward operands (every exponent <= 0) and the factors the gradients need
    with npu.vec("A"):
        gc = g.cumsum(-2)
        (Gamma, K_scaled, K_scaled_neg, Qs, Q_scaled, gc_C, decay_to_end, K_decay, gamma_C, g_sub, K_sub, Qs_sub,
         beta_sub, ref, to_ref, K_left, Q_left, Kb_left_neg, right_decay, K_right) = safe_factors(Q, K, gc, beta, scale)
        kk_blocks, qk_blocks = diagonal_blocks(K_sub, Qs_sub, g_sub)
        A_kk_diag = kk_blocks.unflatten(-1, (S_, S_))
        A_qk_diag = qk_blocks.unflatten(-1, (S_, S_))
    npu.sync(K_scaled_neg, Q_scaled, K_decay, K_left, Q_left, Kb_left_neg, K_right)          # ①
    npu.keep(Gamma, K_scaled, Qs, Q_scaled, decay_to_end, K_decay, gamma_C, g_sub, K_sub, Qs_sub,
             beta_sub, to_ref, right_decay, A_kk_diag, A_qk_diag)

    # Phase B: Cube, A_kk's off-diagonal blocks (the forward's Phase B)
    with npu.cube("B"):
        A_kk_off = K_left[..., left_of_pair, :, :] @ K_right.mT
    npu.sync(A_kk_off)                                                                      # ②

    # Phase C: Vec, the UT transform (the forward's Phase C); R stays for dbeta and goes to the Cube for dA
    with npu.vec("C"):
        A_raw = assemble(A_kk_diag, A_kk_off, pairs)
        R = npu.forward_substitution(A_raw * beta[..., :, None])
        M = R * beta[..., None, :]
    npu.keep(A_raw)
    npu.sync(R, M, A_qk_diag)                                                               # ③

    # Phase D1: Cube, the forward's pseudo-values again and the products on the state's path
    with npu.cube("D1"):
        KS_neg = K_scaled_neg @ S                                          # -K_scaled S
        Vp = torch.cat([M, M], -1) @ torch.cat([V, KS_neg], -2)            # M (V - K_scaled S)
        A_qk = assemble(A_qk_diag, Q_left[..., left_of_pair, :, :] @ K_right.mT, pairs)
        dVp = torch.cat([A_qk.mT, K_decay], -1) @ torch.cat([dO, dS], -2)  # A_qk^T dO + K_decay dS
        dV = M.mT @ dVp
        dVS = dV @ S.mT                                                    # dK_scaled = -dVS
        dQ_scaled = dO @ S.mT
        dS_part = torch.cat([Q_scaled, K_scaled_neg], -2).mT @ torch.cat([dO, dV], -2)
    npu.sync(dVS, dQ_scaled, dS_part)                                                       # ④
    npu.keep(KS_neg, Vp, dVp)

    # Phase E1: Vec, the state's gradient first (the next chunk back waits for it)
    with npu.vec("E1"):
        dS_prev = dS_part + gamma_C.mT * dS
        dQs_S, dK_S, dgc_S, d_gc_C_S = state_terms(Gamma=Gamma, dQ_scaled=dQ_scaled, dVS=dVS, K_scaled=K_scaled,
                                                    Q_scaled=Q_scaled, gamma_C=gamma_C, S=S, dS=dS)
    npu.keep(dQs_S, dK_S, dgc_S, d_gc_C_S)

    # Phase D2: Cube, the gradients of the intra-chunk matrices
    with npu.cube("D2"):
        dM, dL_neg, dA_qk, dK_decay = intra_matrix_gradients(dVp=dVp, V=V, KS_neg=KS_neg, R=R, M=M, dO=dO, Vp=Vp,
                                                             dS=dS)
    npu.sync(dM, dL_neg, dA_qk, dK_decay)                                                  # ⑤
    npu.keep(dL_neg, dA_qk)

    # Phase E2: Vec, the diagonal blocks (D3 runs on the Cube meanwhile)
    with npu.vec("E2"):
        mask = torch.ones(S_, S_, dtype=Q.dtype, device=Q.device).tril()
        E_diag = ((g_sub[..., :, None, :] - g_sub[..., None, :, :]).clamp_max(0).exp()
                  * mask[..., None])                                       # [.., n, S, S, d_k]: e_ij, j <= i
        dL = -dL_neg.tril(-1)                                              # gradient of A = A_kk * beta_i
        dA = dL * beta[..., :, None]                                       # gradient of A_kk
        dA_d = blocks(dA, n, S_)[..., diag, diag, :, :][..., None]
        dAqk_d = blocks(dA_qk.tril(), n, S_)[..., diag, diag, :, :][..., None]
        X_kk_d = (dA_d * E_diag * K_sub[..., None, :, :]).sum(-2)
        Z_kk_d = (dA_d * E_diag * K_sub[..., :, None, :]).sum(-3)
        X_qk_d = (dAqk_d * E_diag * K_sub[..., None, :, :]).sum(-2)
        Z_qk_d = (dAqk_d * E_diag * Qs_sub[..., :, None, :]).sum(-3)
        end_terms = K_decay * dK_decay
        dK_end = decay_to_end * dK_decay
        dbeta = (dM * R).sum(-2) + (dL * A_raw).sum(-1)
    npu.keep(X_kk_d, Z_kk_d, X_qk_d, Z_qk_d, end_terms, dK_end)

    # Phase D3: Cube, the off-diagonal blocks' gradients: left per row block, right per pair
    with npu.cube("D3"):
        X_kk_off, X_qk_off, T_off = off_diagonal_gradients(
            dL_neg=dL_neg, dA_qk=dA_qk, n=n, S=S_, pair_i=pair_i, pair_j=pair_j, rows_of=rows_of, K_right=K_right,
            Kb_left_neg=Kb_left_neg, Q_left=Q_left, left_of_pair=left_of_pair)
    npu.sync(X_kk_off, X_qk_off, T_off)                                                     # ⑥

    # Phase E3: Vec, the off-diagonal blocks added, the decays and the sums: dQ, dK, dg
    with npu.vec("E3"):
        zero = X_kk_d.new_zeros(X_kk_d[..., :1, :, :].shape)
        X_kk = X_kk_d + torch.cat([zero, to_ref[..., 1:, :, :] * (-beta_sub[..., 1:, :, :]) * X_kk_off], -3)
        X_qk = X_qk_d + torch.cat([zero, to_ref[..., 1:, :, :] * X_qk_off], -3)
        T_dec = right_decay * T_off
        Z_off = torch.stack([torch.stack([T_dec[..., p, :, :] for p in ps], -3).sum(-3) for ps in cols_of], -3)
        Z = Z_kk_d + Z_qk_d + torch.cat([Z_off, zero], -3)
        X_kk, X_qk, Z = (x.flatten(-3, -2) for x in (X_kk, X_qk, Z))
        dQ = (dQs_S + X_qk) * scale
        dK = dK_S + X_kk + Z + dK_end
        dgc = dgc_S + K * (X_kk - Z) + Qs * X_qk - end_terms
        d_gc_C = end_terms.sum(-2, keepdim=True) + d_gc_C_S
        dgc_all = dgc + torch.cat([dgc.new_zeros(dgc[..., :-1, :].shape), d_gc_C], -2)
        dg = dgc_all.flip(-2).cumsum(-2).flip(-2)                           # gc = cumsum(g)
    return dQ, dK, dV, dg, dbeta, dS_prev


@phase_program("v4.states", returns=("H", "S_new"), state=("S_prev", "S_new"), resident=("K_decay",),
               state_for_bf16="fp32")
def kda_chunk_v4_states(npu, K, V, g, beta, S_prev):
    """v4's forward without the output: each chunk's starting state H to GM, then v4's state update."""
    S, n = sub_chunks(K.shape[-2])
    pairs = block_pairs(n)
    pair_i, pair_j = [i for i, _ in pairs], [j for _, j in pairs]
    left_of_pair = [i - 1 for i in pair_i]
    row, col = lower_pairs(S)
    flat = [i * S + j for i, j in zip(row, col)]
    with npu.vec("A"):
        H = S_prev.clone()                          # h[t] to GM, as FLA's fwd_h stores it
        gc = g.cumsum(-2)
        K_scaled = K * gc.exp()
        gc_C = gc[..., -1:, :]
        K_decay = K * (gc_C - gc).exp()
        gamma_C = gc_C.exp()
        g_sub = gc.unflatten(-2, (n, S))
        K_sub = K.unflatten(-2, (n, S))
        ref = g_sub[..., :1, :]
        K_left = (K_sub * (g_sub - ref).exp())[..., 1:, :, :]
        K_right = K_sub[..., pair_j, :, :] * (ref[..., pair_i, :, :] - g_sub[..., pair_j, :, :]).exp()
        kk = (K_sub[..., row, :] * K_sub[..., col, :] * (g_sub[..., row, :] - g_sub[..., col, :]).exp()).sum(-1)
        kk_blocks = kk.new_zeros(kk.shape[:-1] + (S * S,))
        kk_blocks[..., flat] = kk
        A_kk_diag = kk_blocks.unflatten(-1, (S, S))
    npu.sync(K_scaled, K_decay, K_left, K_right)                        # ①
    npu.keep(gamma_C, A_kk_diag)
    with npu.cube("B"):
        A_kk_off = K_left[..., left_of_pair, :, :] @ K_right.mT
    npu.sync(A_kk_off)                                                  # ②
    with npu.vec("C"):
        A = assemble(A_kk_diag, A_kk_off, pairs) * beta[..., :, None]
        M = npu.forward_substitution(A) * beta[..., None, :]
    npu.sync(M)                                                         # ③ (+ the state)
    with npu.cube("D"):
        U = M @ V
        WS = (M @ K_scaled) @ S_prev
    npu.sync(U, WS)                                                     # ④
    with npu.vec("E"):
        V_pseudo = U - WS
    npu.sync(V_pseudo)                                                  # ⑤
    with npu.cube("F"):
        S_delta = K_decay.mT @ V_pseudo
    npu.sync(S_delta)                                                   # ⑥
    with npu.vec("G"):
        S_new = gamma_C.mT * S_prev + S_delta
    return H, S_new


def walks_back(name: str, states, backward, *, math: str = "") -> dict[str, Design]:
    """A fused design's two backward designs: `recompute` runs its forward again for the states (NAME.states)
    before walking back; `store` walks back over the states H the forward kept. `math`: what its math keeps
    safe, said in the descriptions."""
    said = f" ({math})" if math else ""
    return {
        "recompute": Design(f"{name}.bwd", (
            Pass(f"{name}.states", states, FUSED),
            Pass(f"{name}.bwd", backward, FUSED, reverse=True),
        ), description=f"{name}'s forward again for the states, then {name}'s backward walking back{said}",
            notes={"state_for_bf16": "fp32"}),
        "store": Design(f"{name}.bwd", (
            Pass(f"{name}.bwd", backward, FUSED, reverse=True),
        ), description=f"{name}'s backward walking back over the states the forward kept{said}",
            notes={"state_for_bf16": "fp32", "kept": "H"}),
    }


V4_BACKWARD = walks_back("v4", kda_chunk_v4_states, kda_chunk_v4_bwd)
