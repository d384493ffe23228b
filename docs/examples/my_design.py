"""A design of your own, outside the package: v3 with K_decay made late.

v3 (kda/programs/v3.py) makes K_decay in Phase A and keeps it in the workspace's resident region until
Phase F. This variant keeps only the decay to the chunk's end on the Vector unit and makes K_decay in
Phase E, handing it over with A_qk and V_pseudo (sync ⑤): less resident workspace, more bytes at ⑤.

    python -m kda.run --version docs/examples/my_design.py:kda_chunk_late --chunks 4
"""
from npusim import phase_program


@phase_program("late", returns=("O", "S_new"), state=("S_prev", "S_new"), resident=("Q_scaled",))
def kda_chunk_late(npu, Q, K, V, g, beta, S_prev, scale):
    """v3 with K_decay made in Phase E: 7 phases, 6 hand-offs."""
    with npu.vec("A"):                          # the decays, and the scaled keys and queries
        gc = g.cumsum(-2)
        K_scaled = K * gc.exp()
        K_div = K * (-gc).exp()
        Q_scaled = Q * scale * gc.exp()
        gc_C = gc[..., -1:, :]
        decay_to_end = (gc_C - gc).exp()
        gamma_C = gc_C.exp()
    npu.sync(K_scaled, K_div, Q_scaled, V)                              # ①
    npu.keep(decay_to_end, gamma_C)             # stay on the Vector unit until Phases E and G

    with npu.cube("B"):
        A_raw = K_scaled @ K_div.mT
    npu.sync(A_raw)                                                     # ②

    with npu.vec("C"):                          # the UT transform
        A = A_raw * beta[..., :, None]
        M = npu.forward_substitution(A) * beta[..., None, :]
    npu.sync(M)                                                         # ③

    with npu.cube("D"):
        W = M @ K_scaled
        U = M @ V
        WS = W @ S_prev
        O_inter = Q_scaled @ S_prev
        A_qk_raw = Q_scaled @ K_div.mT
    npu.sync(U, WS, O_inter, A_qk_raw)                                  # ④

    with npu.vec("E"):                          # pseudo-values, the causal mask, and K_decay
        V_pseudo = U - WS
        A_qk = A_qk_raw.tril()
        K_decay = K * decay_to_end
    npu.sync(A_qk, V_pseudo, K_decay)                                   # ⑤

    with npu.cube("F"):
        O_intra = A_qk @ V_pseudo
        S_delta = K_decay.mT @ V_pseudo
    npu.sync(O_intra, S_delta)                                          # ⑥

    with npu.vec("G"):
        O = O_inter + O_intra
        S_new = gamma_C.mT * S_prev + S_delta
    return O, S_new
