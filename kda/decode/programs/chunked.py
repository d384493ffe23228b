"""A decode step of T tokens (MTP / speculative decoding) as one small chunk: the matmuls on the Cube, the
gates, the triangular solve and the state's decay on the Vector. It is the design document's chunk form
(kda/programs/v3.py) with C = T and the state read from GM each step.

The Cube needs the state in L1 and the Vector needs it in UB (on A2 the two units share only GM), so the
state is read twice and written once: one more pass over the state than the Vector-only step. What it buys:
the T read-outs and the rank-T update are matmuls, whose Cube time grows with ceil(T / 16) fractal rows
while the Vector-only step pays T passes over the state.

    gates  (Vec)   gc = cumsum(g); K e^gc, K e^-gc, scale Q e^gc, K e^(gc_T - gc), e^gc_T
    dots   (Cube)  A = (K e^gc)(K e^-gc)^T; A_qk = (Q e^gc)(K e^-gc)^T; KS = (K e^gc) S; O_inter = (Q e^gc) S
    solve  (Vec)   M = (I + StrictTril(A beta))^-1 Diag(beta); R = V - KS; tril(A_qk)
    update (Cube)  V_new = M R; O_intra = tril(A_qk) V_new; S_delta = (K e^(gc_T - gc))^T V_new
    merge  (Vec)   o = O_inter + O_intra; S_out = Diag(e^gc_T) S + S_delta
"""
from npusim import phase_program

from kda.decode.programs.steps import BETA_SIGMOID, in_kernel, rows


@phase_program("chunked", returns=("o", "S_out"))
def decode_chunked(npu, q, k, v, g, beta, S_in, scale, A_log=None, dt_bias=None, options=(), lower_bound=None):
    """T tokens of one head: q, k, g [T, K]; v [T, V]; beta [T]; S_in [K, V] -> o [T, V], S_out [K, V]."""
    with npu.vec("gates"):
        q, k, g, beta = in_kernel(q, k, g, beta, A_log, dt_bias, options, lower_bound)
        gc = g.cumsum(-2)                               # cumulative log decay [T, K]
        K_scaled = k * gc.exp()
        K_div = k * (-gc).exp()
        Q_scaled = q * scale * gc.exp()
        gc_T = gc[..., -1:, :]
        K_decay = k * (gc_T - gc).exp()
        gamma = gc_T.exp()                              # [1, K]: the step's decay of the state
    npu.sync(K_scaled, K_div, Q_scaled, K_decay)
    npu.keep(gamma, *((beta,) if BETA_SIGMOID in options else ()))

    with npu.cube("dots"):
        A_kk = K_scaled @ K_div.mT                      # [T, T]
        A_qk = Q_scaled @ K_div.mT
        KS = K_scaled @ S_in                            # [T, V]: the state loaded into L1
        O_inter = Q_scaled @ S_in
    npu.sync(A_kk, A_qk, KS, O_inter)

    with npu.vec("solve"):
        M = npu.forward_substitution(A_kk * beta[..., :, None]) * beta[..., None, :]
        R = v - KS
        A_causal = A_qk.tril()
    npu.sync(M, R, A_causal)

    with npu.cube("update"):
        V_new = M @ R                                   # the pseudo-values [T, V]
        O_intra = A_causal @ V_new
        S_delta = K_decay.mT @ V_new                    # [K, V]
    npu.sync(O_intra, S_delta)

    with npu.vec("merge"):
        o = O_inter + O_intra
        S_out = S_in * rows(gamma[..., 0, :], S_in) + S_delta   # the state loaded into UB, decayed
    return o, S_out
