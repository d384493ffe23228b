"""The plain decode step, Vector only: FLA's fused_recurrent_kda for the T tokens of one (sequence, value head)
(T = 1 for plain decode, 2-4 for MTP / speculative decoding), with the state in the Unified Buffer from the
first token to the last.

Per token t, on the state S [K, V] (FLA's layout, key-major):
    S   <- Diag(exp(g_t)) S                    decay each key row (a per-row scalar)
    kS  <- sum_k k_t[k] S[k, :]                read the key out (a multiply, then TCOLSUM's tree)
    d   <- beta_t (v_t - kS)                   on one [V] row
    S   <- S + k_t d^T                         the rank-1 update as one fused multiply-add (MulAddDst)
    o_t <- sum_k (scale q_t)[k] S[k, :]        read the query out
The state is loaded once and stored once per step: its type (fp32 or bf16, the precision's state type) sets
most of the GM traffic. FLA's in-kernel options (l2norm, the gate, beta's sigmoid) run on each token's rows
before the update (steps.in_kernel).
"""
import torch

from npusim import phase_program

from kda.decode.programs.steps import cols, column_sum, in_kernel, rows


@phase_program("recurrent", returns=("o", "S_out"))
def decode_recurrent(npu, q, k, v, g, beta, S_in, scale, A_log=None, dt_bias=None, options=(), lower_bound=None):
    """T tokens of one head: q, k, g [T, K]; v [T, V]; beta [T]; S_in [K, V] -> o [T, V], S_out [K, V]."""
    with npu.vec("step"):
        S = S_in                                        # loaded once (a bf16 state is widened as it arrives)
        outs = []
        for t in range(q.shape[-2]):
            q_t, k_t, g_t, b_t = in_kernel(q[..., t, :], k[..., t, :], g[..., t, :], beta[..., t],
                                           A_log, dt_bias, options, lower_bound)
            S = S * rows(g_t.exp(), S)                  # decay along the key axis
            kS = column_sum(S * rows(k_t, S))
            d = (v[..., t, :] - kS) * b_t[..., None]
            S = S.addcmul(rows(k_t, S), cols(d, S))     # S + k_t d^T, one multiply-add
            outs.append(column_sum(S * rows(q_t * scale, S)))
        o = torch.stack(outs, -2)
        S_out = S
    return o, S_out
