"""v6: v5's safe math in one fused per-chunk loop (v3's layout): no second pass, no second read of q, k, g.

Why (the figures: `python -m kda.run --version all --no-numerics --heads 32 --tokens 131072 --interleave 2`,
and README "Which design wins"): with two heads per core, each with its own
ping/pong slots, interleaving fills a one-pass design's hand-off gaps and evens out the 32-on-24 imbalance
that v5's chunk-parallel intra pass was built to spread. v5 then pays for its two passes: the intra pass
(slot-bound) and the state pass run one after the other, and q, k, v, g cross HBM twice.
v6 keeps v5's every-exp-<=-1 intra form (16-wide sub-chunks, 4-wide micro-chunks, the blocked inverse) and its
state phases (the state on its own hand-off; W and U ahead of it; O on the Cube beside G), in one chunk loop.

Phases per chunk, six hand-offs (v3: six, v5: three + four):
  A (Vec)  gates' cumsum, the cross-block factors at both levels, the micro-diagonal blocks    -> ①
  B (Cube) the off-diagonal blocks of A_kk and A_qk                                            -> ②
  C (Vec)  A_kk and A_qk assembled, the 16-wide diagonal inverses; the state pass's operands   -> ③
  D1 (Cube) M = (I + StrictTril(A_kk))^-1 Diag(beta) by FLA's merge, W = M K_scaled, U = M V
  D2 (Cube) W S (the state arrives on its own hand-off)                                        -> ④
  E (Vec)  V_pseudo = U - W S                                                                  -> ⑤
  F1 (Cube) S_delta = K_decay^T V_pseudo                                                       -> ⑥
  G (Vec)  S_new = Diag(gamma_C) S + S_delta;   F2 (Cube) O = [Q_scaled | A_qk] [S ; V_pseudo]
Phase C, not A, makes K_scaled, Q_scaled and K_decay, so that ① (98 KiB) and ③ fit a 128 KiB slot each.
Shapes per chunk: Q, K, g [.., C, d_k]; V [.., C, d_v]; beta [.., C]; S [.., d_k, d_v].
"""
from __future__ import annotations

from npusim import phase_program

from kda.programs.v5 import (
    assemble_and_invert_diagonal,
    intra_factors,
    inverse_times_beta,
    off_diagonal_phase,
    state_phases,
)


@phase_program("v6", returns=("O", "S_new"), state=("S_prev", "S_new"), state_for_bf16="fp32",
               state_handoff="own")
def kda_chunk_v6(npu, Q, K, V, g, beta, S_prev, scale):
    """KDA chunk v6: v5's intra-chunk and state phases fused per chunk, six hand-offs, every exp <= 1."""
    with npu.vec("A"):
        gc = g.cumsum(-2)
        Qs, factors, kk_blocks, qk_blocks = intra_factors(Q, K, gc, scale)
        K_left, Q_left, K_right, K_left4, Q_left4, K_right4 = factors      # named: the payloads of ①
    npu.keep(gc, Qs, kk_blocks, qk_blocks)
    off = off_diagonal_phase(npu, K.shape[-2], factors)                # ① B ②
    with npu.vec("C"):
        Ai_diag, A_neg, D_beta, A_qk = assemble_and_invert_diagonal(npu, kk_blocks, qk_blocks, off, beta)
        Gamma = gc.exp()
        K_scaled = K * Gamma
        Q_scaled = Qs * Gamma
        gc_C = gc[..., -1:, :]
        K_decay = K * (gc_C - gc).exp()
        gamma_C = gc_C.exp()
    npu.sync(Ai_diag, A_neg, D_beta, A_qk, K_scaled, Q_scaled, K_decay)  # ③
    npu.keep(gamma_C)
    with npu.cube("D1"):                                                # no state: runs ahead of it
        M = inverse_times_beta(Ai_diag, A_neg, D_beta)
        W = M @ K_scaled
        U = M @ V
    npu.keep(W, U)
    return state_phases(npu, W, U, S_prev, K_decay, Q_scaled, A_qk, gamma_C)   # D2 ④ E ⑤ F1 ⑥ G, F2
