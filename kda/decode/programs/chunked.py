"""A decode step of T tokens (MTP / speculative decoding) as one small chunk: the state's read-outs and its
rank-T update as matmuls on the Cube; the gates, the pairwise decays, the triangular solve and the state's
decay on the Vector. Every exponent is <= 0 (as in v6): the pairwise decay of tokens i > j is
exp(gc_i - gc_j), each channel on its own, never exp(-gc), so no gate overflows it.

The Cube needs the state in L1 and the Vector needs it in UB (on A2 the two units share only GM), so the
state is read twice and written once: one more pass over the state than the Vector-only step. What it buys:
the T read-outs and the rank-T update are matmuls, whose Cube time grows with ceil(T / 16) fractal rows
while the Vector-only step pays T passes over the state.

    gates  (Vec)   gc = cumsum(g); A = Σ_k k_i k_j e^(gc_i - gc_j), A_qk = Σ_k scale q_i k_j e^(gc_i - gc_j)
                   (pairs j < i, and j <= i), K e^gc, scale Q e^gc, K e^(gc_T - gc), e^gc_T
    dots   (Cube)  KS = (K e^gc) S; O_inter = (scale Q e^gc) S
    solve  (Vec)   M = (I + StrictTril(A beta))^-1 Diag(beta); R = V - KS
    update (Cube)  V_new = M R; O_intra = A_qk V_new; S_delta = (K e^(gc_T - gc))^T V_new
    merge  (Vec)   o = O_inter + O_intra; S_out = Diag(e^gc_T) S + S_delta
"""
from npusim import phase_program

from kda.decode.programs.steps import BETA_SIGMOID, in_kernel, rows


@phase_program("chunked", returns=("o", "S_out"))
def decode_chunked(npu, q, k, v, g, beta, S_in, scale, A_log=None, dt_bias=None, options=(), lower_bound=None):
    """T tokens of one head: q, k, g [T, K]; v [T, V]; beta [T]; S_in [K, V] -> o [T, V], S_out [K, V]."""
    with npu.vec("gates"):
        def per_token(x):     # [.., 1, K]: over the T rows
            return None if x is None else x[..., None, :]
        q, k, g, beta = in_kernel(q, k, g, beta, per_token(A_log), per_token(dt_bias), options, lower_bound)
        gc = g.cumsum(-2)                               # cumulative log decay [T, K]
        pair = (gc[..., :, None, :] - gc[..., None, :, :]).clamp_max(0.0).exp()   # [T, T, K], i >= j: <= 1
        A_kk = (k[..., :, None, :] * k[..., None, :, :] * pair).sum(-1).tril(-1)
        Q_s = q * scale
        A_qk = (Q_s[..., :, None, :] * k[..., None, :, :] * pair).sum(-1).tril()
        K_scaled = k * gc.exp()
        Q_scaled = Q_s * gc.exp()
        gc_T = gc[..., -1:, :]
        K_decay = k * (gc_T - gc).exp()
        gamma = gc_T.exp()                              # [1, K]: the step's decay of the state
    npu.sync(K_scaled, Q_scaled, K_decay, A_qk)
    npu.keep(A_kk, gamma, *((beta,) if BETA_SIGMOID in options else ()))

    with npu.cube("dots"):
        KS = K_scaled @ S_in                            # [T, V]: the state loaded into L1
        O_inter = Q_scaled @ S_in
    npu.sync(KS, O_inter)

    with npu.vec("solve"):
        M = npu.forward_substitution(A_kk * beta[..., :, None]) * beta[..., None, :]
        R = v - KS
    npu.sync(M, R)

    with npu.cube("update"):
        V_new = M @ R                                   # the pseudo-values [T, V]
        O_intra = A_qk @ V_new
        S_delta = K_decay.mT @ V_new                    # [K, V]
    npu.sync(O_intra, S_delta)

    with npu.vec("merge"):
        o = O_inter + O_intra
        S_out = S_in * rows(gamma[..., 0, :], S_in) + S_delta   # the state loaded into UB, decayed
    return o, S_out
