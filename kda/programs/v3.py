"""v3 of the design document (sections 2-3): seven phases A-G, six Cube<->Vector hand-offs.

Follows the document's `kda_chunk_v3` line by line, in FLA's conventions: g is the log decay
(the document's log(alpha + eps)), and Q is scaled by `scale` in Phase A. gamma_C stays in Vector
registers for Phase G; Q_scaled and K_decay sit in the workspace's resident region (section 4.2).
Shapes per chunk: Q, K, g [..., C, d_k]; V [..., C, d_v]; beta [..., C]; S_prev [..., d_k, d_v].
"""
from npusim import phase_program


@phase_program("v3", returns=("O", "S_new"), state=("S_prev", "S_new"), resident=("Q_scaled", "K_decay"))
def kda_chunk_v3(npu, Q, K, V, g, beta, S_prev, scale):
    """KDA chunk v3: 7 phases, 6 hand-offs (the design document)."""
    # Phase A: Vec pre-processing, everything later phases need from the decays
    with npu.vec("A"):
        gc = g.cumsum(-2)                       # cumulative log decay [C, d_k]
        Gamma = gc.exp()
        Gamma_inv = (-gc).exp()
        K_scaled = K * Gamma
        K_div = K * Gamma_inv
        Q_scaled = Q * scale * Gamma
        gc_C = gc[..., -1:, :]                  # [1, d_k]
        decay_to_end = (gc_C - gc).exp()
        K_decay = K * decay_to_end              # pre-computed for Phase F
        gamma_C = gc_C.exp()                    # pre-computed for Phase G
    npu.sync(K_scaled, K_div, Q_scaled, K_decay, V)                     # ①
    npu.keep(gamma_C)                           # stays in Vector registers until Phase G

    # Phase B: Cube attention matrix
    with npu.cube("B"):
        A_raw = K_scaled @ K_div.mT             # [C, C]
    npu.sync(A_raw)                                                     # ②

    # Phase C: Vec UT transform, A * beta and forward substitution fused
    with npu.vec("C"):
        A = A_raw * beta[..., :, None]
        M = npu.forward_substitution(A) * beta[..., None, :]   # (I + StrictTril(A))^-1 Diag(beta)
    npu.sync(M)                                 # ③ K_scaled, K_div, Q_scaled, V, S_prev are in the workspace

    # Phase D: Cube, five matmuls; W is an intermediate that never leaves the Cube
    with npu.cube("D"):
        W = M @ K_scaled
        U = M @ V
        WS = W @ S_prev
        O_inter = Q_scaled @ S_prev
        A_qk_raw = Q_scaled @ K_div.mT
    npu.sync(U, WS, O_inter, A_qk_raw)                                  # ④

    # Phase E: Vec, pseudo-values and the causal mask
    with npu.vec("E"):
        V_pseudo = U - WS
        A_qk = A_qk_raw.tril()
    npu.sync(A_qk, V_pseudo)                    # ⑤ K_decay is in the workspace since ①

    # Phase F: Cube, intra-chunk output and state increment
    with npu.cube("F"):
        O_intra = A_qk @ V_pseudo
        S_delta = K_decay.mT @ V_pseudo         # [d_k, d_v]
    npu.sync(O_intra, S_delta)                  # ⑥ O_inter is in the workspace since ④

    # Phase G: Vec, output and state update
    with npu.vec("G"):
        O = O_inter + O_intra
        S_new = gamma_C.mT * S_prev + S_delta   # Diag(gamma_C) S_prev: decay along the key axis
    return O, S_new
