"""sglang's PTO KDA decode kernel (sgl-project/sgl-kernel-npu pull request 635, csrc/kda_decode/ at commit
139cef25: the body of MegaGDN-PTO PR 34 with the gating fused), read from the source:

    launch     Vector-only through ACLRT: a block is one AIV; block_dim = min(GetCoreNumAiv(), items)
               (op_host/kda_decode.cpp)
    items      one (sequence, head): v_tile = 128 (CMakeLists -DKDA_BV=128), the state [V, K] fp32 of
               sglang's pool (V-major), updated in place; a grid stride over the blocks
    inputs     q, k, v, a (the raw gate), b (beta's logit) in bf16; A_log [H] and dt_bias [H, K] in fp32
    in kernel  l2norm of q and k (q / (sqrt(sum q^2) + 1e-6)), g = -exp(A_log) softplus(a + dt_bias),
               beta = sigmoid(b): always on (Kimi-Linear's use)
    loop       serial: a fence MTE3 -> MTE2 before the next item's state load

Per item (one token), each instruction followed by pipe_barrier(PIPE_V):
    TLOAD S [V, K], dt_bias; TEXPANDS, TEXP, TMULS: coef = -exp(A_log)
    TLOAD q, k, a, v; TCVT q, k, v, a; TMUL, TROWSUM, TSQRT, TADDS, TROWEXPANDDIV: l2norm of [q; k]
    TMULS q *= scale; TADD a + dt_bias; TRELU, TABS, TMULS, TEXP, TADDS, TLOG, TADD: softplus; TMUL coef;
    TEXP decay; TEXPANDS, TEXP, TADDS: 1 + exp(-b)
    TCOLEXPANDMUL S *= decay; TCOLEXPANDMUL work = S * k; TROWSUM kS; TSUB; TDIV d /= 1 + exp(-b)
    TCOLEXPAND work = k; TROWEXPANDMUL work *= d; TADD S += work; TCOLEXPANDMUL work = S * q; TROWSUM o
    TCVT o to bf16; TSTORE o; TSTORE S
"""
import torch

from npusim import phase_program

from kda.decode.design import AIVS, SERIAL, DecodeDesign
from kda.decode.programs.steps import BETA_SIGMOID, GATE, QK_L2NORM, cols, row_sum, rows

SOURCE = "sgl-project/sgl-kernel-npu pull request 635 @ 139cef25, csrc/kda_decode/op_kernel/kda_decode.cpp"
EPS = 1e-6


@phase_program("sgl_kda_decode", returns=("o", "S_out"))
def sgl_kda_decode(npu, q, k, v, g, beta, S_in, scale, A_log=None, dt_bias=None, options=(), lower_bound=None):
    """One token of one head: q, k, g (the raw gate a) [1, K]; v [1, V]; beta (the logit b) [1];
    A_log [1]; dt_bias [K]; S_in [V, K] -> o [1, V], S_out [V, K]."""
    with npu.vec("step"):
        coef = A_log.expand(dt_bias.shape).exp() * -1.0            # TEXPANDS, TEXP, TMULS
        qk = torch.stack([q[..., 0, :], k[..., 0, :]], -2)         # q and k adjacent in UB
        norm = row_sum(qk * qk).sqrt() + EPS                       # TMUL, TROWSUM, TSQRT, TADDS
        qk = qk / norm[..., None]                                  # TROWEXPANDDIV
        q_t, k_t = qk[..., 0, :] * scale, qk[..., 1, :]            # TMULS
        x = g[..., 0, :] + dt_bias                                 # TADD
        softplus = x.relu() + ((x.abs() * -1.0).exp() + 1.0).log()  # TRELU, TABS, TMULS, TEXP, TADDS, TLOG, TADD
        decay = (softplus * coef).exp()                            # TMUL, TEXP
        sig = (beta[..., 0, None] * -1.0).exp() + 1.0              # TEXPANDS, TEXP, TADDS
        S = S_in * cols(decay, S_in)                               # TCOLEXPANDMUL, in place
        kS = row_sum(S * cols(k_t, S))                             # TCOLEXPANDMUL; TROWSUM
        d = (v[..., 0, :] - kS) / sig                              # TSUB, TDIV
        work = cols(k_t, S) * 1.0                                  # TCOLEXPAND
        work.mul_(rows(d, S))                                      # TROWEXPANDMUL, in place
        S_out = S.add_(work)                                       # TADD, in place
        o_t = row_sum(S_out * cols(q_t, S_out))                    # TCOLEXPANDMUL; TROWSUM
        o = o_t[..., None, :]
    return o, S_out


SGL_KDA_DECODE = DecodeDesign(
    "sgl_kda_decode", sgl_kda_decode, "sgl-kernel-npu PR 635: Vector-only, an AIV per (sequence, head), "
    "l2norm and gating in the kernel, bf16 inputs, serial items", workers=AIVS, loop=SERIAL, state_layout="vk",
    io_dtype="bf16", gate_dtype="bf16", state_dtypes=("fp32",), options=(QK_L2NORM, GATE, BETA_SIGMOID),
    tokens=(1, 64), head_dim=128, source=SOURCE)
