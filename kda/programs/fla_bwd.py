"""`fla`'s backward: FLA's chunk_kda_bwd decomposition as passes (fla/ops/kda, fla-core 0.6).

    recompute   chunk_local_cumsum -> scaled_dot_kkt -> solve_tril -> recompute_w_u -> fwd_h   (the forward's
                passes again: gc, A_kk, A_qk, A_inv, W, U, each chunk's starting state H and V_new in GM)
    bwd_dv_local   dV_local = A_qk^T dO                                  (all (sequence, chunk) items)
    bwd_dhu        from the last chunk to the first, carrying dS (the state's gradient at a chunk's end):
                   dVp = dV_local + K_decay dS; stores dS as dS_end (FLA's dh) and dVp (FLA's dv2);
                   dS_prev = gamma_C dS + Q_scaled^T dO - W^T dVp
    bwd_intra      every gradient of one chunk from GM: dQ, dK, dV, dg, dbeta (FLA's chunk_bwd_dqkwg,
                   prepare_wy_repr_bwd, the intra-chunk dA kernels and the reverse cumsum of dg, in one pass)

`store` keeps what the forward design wrote (gc, A_inv, A_qk, H, V_new) until the backward and runs only
the last three passes. The math is v4's backward (kda/programs/v4_bwd.py) with R = A_inv, S = H,
Vp = V_new and dVp read from GM; dbeta's term through A = Diag(beta) A_kk uses the left gradient of the
bilinear form taken with dL itself (dbeta_i = K_i . X_i), so A_kk is never needed again.
Safety as v4: every exp has an argument <= 0.
"""
from __future__ import annotations

import torch

from npusim import phase_program
from npusim.model.schedule import CHUNKS, SEQUENTIAL, Design, Pass

from kda.programs.fla import FLA
from kda.programs.v4 import block_pairs, sub_chunks
from kda.programs.v4_bwd import blocks, intra_matrix_gradients, off_diagonal_gradients, safe_factors, state_terms


@phase_program("fla.bwd_dv_local", returns=("dV_local",))
def bwd_dv_local(npu, A_qk, dO):
    """The intra-chunk part of the pseudo-values' gradient: A_qk^T dO."""
    with npu.cube("dv"):
        dV_local = A_qk.mT @ dO
    return dV_local


@phase_program("fla.bwd_dhu", returns=("dS_end", "dVp", "dS_prev"), state=("dS", "dS_prev"),
               state_for_bf16="fp32")
def bwd_dhu(npu, Q, K, gc, W, dO, dV_local, dS, scale):
    """The reverse state pass: stores dS (the chunk's end) and dVp = dV_local + K_decay dS."""
    with npu.vec("decay"):
        gc_C = gc[..., -1:, :]
        K_decay = K * (gc_C - gc).exp()
        gamma_C = gc_C.exp()
        Q_scaled = Q * scale * gc.exp()
        W_neg = -W
        dS_end = dS.clone()                        # dh[t] to GM, as FLA's bwd_dhu stores it
    npu.sync(K_decay, Q_scaled, W_neg)             # (+ the state's gradient)
    npu.keep(gamma_C)
    with npu.cube("kds"):
        KdS = K_decay @ dS
    npu.sync(KdS)
    with npu.vec("dv"):
        dVp = dV_local + KdS
    npu.sync(dVp)
    with npu.cube("dh"):
        dS_part = torch.cat([Q_scaled, W_neg], -2).mT @ torch.cat([dO, dVp], -2)
    npu.sync(dS_part)
    with npu.vec("update"):
        dS_prev = gamma_C.mT * dS + dS_part
    return dS_end, dVp, dS_prev


@phase_program("fla.bwd_intra", returns=("dQ", "dK", "dV", "dg", "dbeta"), resident=("Q_scaled", "K_decay"))
def bwd_intra(npu, Q, K, V, gc, beta, A_inv, H, V_new, dVp, dS_end, dO, scale):
    """Every gradient of one chunk from what GM holds: 7 phases, 4 hand-offs, every exp <= 1."""
    S_, n = sub_chunks(Q.shape[-2])
    pairs = block_pairs(n)
    pair_i, pair_j = [i for i, _ in pairs], [j for _, j in pairs]
    left_of_pair = [i - 1 for i in pair_i]
    rows_of = [[p for p, (i, _) in enumerate(pairs) if i == I] for I in range(1, n)]
    cols_of = [[p for p, (_, j) in enumerate(pairs) if j == J] for J in range(n - 1)]
    diag = list(range(n))
    S, R, Vp, dS = H, A_inv, V_new, dS_end

    with npu.vec("factors"):
        (Gamma, K_scaled, K_scaled_neg, Qs, Q_scaled, gc_C, decay_to_end, K_decay, gamma_C, g_sub, K_sub, Qs_sub,
         beta_sub, ref, to_ref, K_left, Q_left, Kb_left_neg, right_decay, K_right) = safe_factors(Q, K, gc, beta, scale)
        M = R * beta[..., None, :]
    npu.sync(K_scaled_neg, Q_scaled, K_decay, K_left, Q_left, Kb_left_neg, K_right, M)      # ①
    npu.keep(Gamma, K_scaled, Qs, Q_scaled, K_decay, decay_to_end, gamma_C, g_sub, K_sub, Qs_sub, beta_sub, to_ref,
             right_decay)

    with npu.cube("state_products"):
        KS_neg = K_scaled_neg @ S                                          # -K_scaled S
        dV = M.mT @ dVp
        dVS = dV @ S.mT                                                    # dK_scaled = -dVS
        dQ_scaled = dO @ S.mT
    npu.sync(dVS, dQ_scaled)                                                                # ②
    npu.keep(KS_neg)

    with npu.vec("state_terms"):
        dQs_S, dK_S, dgc_S, d_gc_C_S = state_terms(Gamma=Gamma, dQ_scaled=dQ_scaled, dVS=dVS, K_scaled=K_scaled,
                                                    Q_scaled=Q_scaled, gamma_C=gamma_C, S=S, dS=dS)
    npu.keep(dQs_S, dK_S, dgc_S, d_gc_C_S)

    with npu.cube("matrix_products"):
        dM, dL_neg, dA_qk, dK_decay = intra_matrix_gradients(dVp=dVp, V=V, KS_neg=KS_neg, R=R, M=M, dO=dO, Vp=Vp,
                                                             dS=dS)
    npu.sync(dM, dL_neg, dA_qk, dK_decay)                                                   # ③
    npu.keep(dL_neg, dA_qk)

    with npu.vec("diagonal"):                      # the Cube's off-diagonal products run meanwhile
        mask = torch.ones(S_, S_, dtype=Q.dtype, device=Q.device).tril()
        E_diag = ((g_sub[..., :, None, :] - g_sub[..., None, :, :]).clamp_max(0).exp()
                  * mask[..., None])                                       # [.., n, S, S, d_k]: e_ij, j <= i
        dL = -dL_neg.tril(-1)                                              # gradient of A = Diag(beta) A_kk
        dL_d = blocks(dL, n, S_)[..., diag, diag, :, :][..., None]
        dA_d = blocks(dL * beta[..., :, None], n, S_)[..., diag, diag, :, :][..., None]
        dAqk_d = blocks(dA_qk.tril(), n, S_)[..., diag, diag, :, :][..., None]
        XL_d = (dL_d * E_diag * K_sub[..., None, :, :]).sum(-2)
        Z_kk_d = (dA_d * E_diag * K_sub[..., :, None, :]).sum(-3)
        X_qk_d = (dAqk_d * E_diag * K_sub[..., None, :, :]).sum(-2)
        Z_qk_d = (dAqk_d * E_diag * Qs_sub[..., :, None, :]).sum(-3)
        end_terms = K_decay * dK_decay
        dK_end = decay_to_end * dK_decay
        dbeta_M = (dM * R).sum(-2)
    npu.keep(XL_d, Z_kk_d, X_qk_d, Z_qk_d, end_terms, dK_end, dbeta_M)

    with npu.cube("off_diagonal"):
        X_kk_off, X_qk_off, T_off = off_diagonal_gradients(
            dL_neg=dL_neg, dA_qk=dA_qk, n=n, S=S_, pair_i=pair_i, pair_j=pair_j, rows_of=rows_of, K_right=K_right,
            Kb_left_neg=Kb_left_neg, Q_left=Q_left, left_of_pair=left_of_pair)
    npu.sync(X_kk_off, X_qk_off, T_off)                                                     # ④

    with npu.vec("gradients"):
        zero = XL_d.new_zeros(XL_d[..., :1, :, :].shape)
        XL = XL_d + torch.cat([zero, -to_ref[..., 1:, :, :] * X_kk_off], -3)   # left gradient taken with dL
        X_kk = beta_sub * XL
        X_qk = X_qk_d + torch.cat([zero, to_ref[..., 1:, :, :] * X_qk_off], -3)
        T_dec = right_decay * T_off
        Z_off = torch.stack([torch.stack([T_dec[..., p, :, :] for p in ps], -3).sum(-3) for ps in cols_of], -3)
        Z = Z_kk_d + Z_qk_d + torch.cat([Z_off, zero], -3)
        XL, X_kk, X_qk, Z = (x.flatten(-3, -2) for x in (XL, X_kk, X_qk, Z))
        dQ = (dQs_S + X_qk) * scale
        dK = dK_S + X_kk + Z + dK_end
        dgc = dgc_S + K * (X_kk - Z) + Qs * X_qk - end_terms
        d_gc_C = end_terms.sum(-2, keepdim=True) + d_gc_C_S
        dgc_all = dgc + torch.cat([dgc.new_zeros(dgc[..., :-1, :].shape), d_gc_C], -2)
        dg = dgc_all.flip(-2).cumsum(-2).flip(-2)                           # gc = cumsum(g)
        dbeta = dbeta_M + (K * XL).sum(-1)
    return dQ, dK, dV, dg, dbeta


_RECOMPUTE = tuple(p for p in FLA.passes if p.name != "fwd_o")
_BACKWARD = (
    Pass("bwd_dv_local", bwd_dv_local, CHUNKS),
    Pass("bwd_dhu", bwd_dhu, SEQUENTIAL, reverse=True),
    Pass("bwd_intra", bwd_intra, CHUNKS),
)
FLA_BACKWARD = {
    "recompute": Design("fla.bwd", _RECOMPUTE + _BACKWARD,
                        description="FLA's chunk_kda_bwd: the forward's kernels again, then dv_local, dhu, intra",
                        notes={**FLA.notes}),
    "store": Design("fla.bwd", _BACKWARD, description="FLA's backward kernels over what the forward kept",
                    notes={**FLA.notes, "kept": "gc,A_inv,A_qk,W,H,V_new"}),
}
