"""v2 of the design document, reconstructed from its 11-phase chain (section 1.1)

    Vec1 -> Cube2 -> Vec3 -> Cube4 -> Vec5 -> Cube6a -> Vec6b -> Cube6c -> Vec7 -> Cube8 -> Vec9

and its v2 reference code (section 8): the same math as v3, one step per phase. The syncs are what the
data flow between these phases needs. The per-sync bytes of the document's table 4.3 (v2 column) guide
the payloads: ① carries K_scaled, K_div and Q_scaled (48 KB); ④ carries W, U, WS and O_inter (64 KB),
although no Vector phase reads W, which the report shows as unused bytes.

The document gives a workspace plan for v3 only. Here K_div and Q_scaled, which live from ① until
Cube6a, are resident (as v3 keeps Q_scaled and K_decay): then v2 fits the same 64 + 64 + 64 KiB plan.
Kept in a ping/pong slot instead, they make sync ④ need 96 KiB.
"""
from functools import partial

from npusim import phase_program


def kda_chunk_v2_body(npu, Q, K, V, g, beta, S_prev, scale, *, state_decay_axis="key"):
    """KDA chunk v2: 11 phases in a Vec/Cube chain (the design document)."""
    with npu.vec("Vec1"):
        gc = g.cumsum(-2)
        Gamma = gc.exp()
        Gamma_inv = (-gc).exp()
        K_scaled = K * Gamma
        K_div = K * Gamma_inv
        Q_scaled = Q * scale * Gamma
    npu.keep(gc)                                # Vec7 and Vec9 need the cumulative decay again
    npu.sync(K_scaled, K_div, Q_scaled)

    with npu.cube("Cube2"):
        A_raw = K_scaled @ K_div.mT
    npu.sync(A_raw)

    with npu.vec("Vec3"):
        A = A_raw * beta[..., :, None]
        M = npu.forward_substitution(A) * beta[..., None, :]
    npu.sync(M)

    with npu.cube("Cube4"):
        W = M @ K_scaled
        U = M @ V
        WS = W @ S_prev
        O_inter = Q_scaled @ S_prev
    npu.sync(W, U, WS, O_inter)

    with npu.vec("Vec5"):
        V_pseudo = U - WS
    npu.sync(V_pseudo)

    with npu.cube("Cube6a"):
        A_qk_raw = Q_scaled @ K_div.mT
    npu.sync(A_qk_raw)

    with npu.vec("Vec6b"):
        A_qk = A_qk_raw.tril()
    npu.sync(A_qk)

    with npu.cube("Cube6c"):
        O_intra = A_qk @ V_pseudo
    npu.sync(O_intra)

    with npu.vec("Vec7"):
        O = O_inter + O_intra
        gc_C = gc[..., -1:, :]
        K_decay = K * (gc_C - gc).exp()
    npu.sync(K_decay)

    with npu.cube("Cube8"):
        S_delta = K_decay.mT @ V_pseudo
    npu.sync(S_delta)

    with npu.vec("Vec9"):
        gamma_C = gc[..., -1:, :].exp()
        if state_decay_axis == "key":
            S_new = gamma_C.mT * S_prev + S_delta   # Diag(gamma_C) S_prev: rows, the key axis
        else:
            if S_prev.shape[-1] != gamma_C.shape[-1]:
                raise ValueError("v1's defect decays the value axis with the key-axis factors: it needs d_k == d_v")
            S_new = S_prev * gamma_C + S_delta      # v1's defect: columns, the value axis
    return O, S_new


kda_chunk_v2 = phase_program(
    "v2", returns=("O", "S_new"), state=("S_prev", "S_new"), resident=("K_div", "Q_scaled"),
)(partial(kda_chunk_v2_body, state_decay_axis="key"))
