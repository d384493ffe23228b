"""The first MegaGDN-PTO KDA decode kernel (huawei-csl/megagdn-pto pull request 34, kernels/pto/kdn_decode.cpp
and megagdn_pto/kdn_decode.py at commit ac07e1c, the version pull request 35 timed against it), read from the
source:

    launch     a mix kernel (dav-c220); run_kdn_decode launches min(24, ceil(items / 2)) blocks and each AIV
               is a worker of its own (worker = block * 2 + AIV)
    items      a tile of 32 value rows of one (sequence, head)'s state, [slot, head, V, K] fp32 (V-major), so
               four items per head; by a grid stride over the workers
    inputs     q, k, v, g, beta in fp16 (the launcher casts the model's bf16 once), widened by TCVT; the
               state fp32, updated in place
    loop       serial: the o store waits MTE3 -> V, the state store MTE3 -> S before the next item's load

Per item (one token), each instruction followed by pipe_barrier(PIPE_V):
    TLOAD S [32, K]; TLOAD q, k, g, v; TCVT q, k, g; TMULS q *= scale; TEXP g; TCVT v
    TCOLEXPANDMUL S *= e^g (a row read by every row); TCOLEXPANDMUL work = S * k; TROWSUM kS
    TSUB d = v - kS; TMULS d *= beta (beta read from GM by the scalar unit)
    TCOLEXPAND work = k (every row); TROWEXPANDMUL work *= d; TADD S += work
    TCOLEXPANDMUL work = S * q; TROWSUM o; TCVT o to fp16; TSTORE o; TSTORE S
Not modelled: the scalar unit's GM read of beta (one per item).
"""
from npusim import phase_program

from kda.decode.design import AIV_PAIRS, SERIAL, DecodeDesign
from kda.decode.programs.steps import cols, row_sum, rows

SOURCE = "huawei-csl/megagdn-pto pull request 34 @ ac07e1c, kernels/pto/kdn_decode.cpp"


@phase_program("kdn_decode_pr34", returns=("o", "S_out"))
def kdn_decode_pr34(npu, q, k, v, g, beta, S_in, scale, A_log=None, dt_bias=None, options=(), lower_bound=None):
    """One token of a 32-row tile: q, k, g [1, K]; v [1, Vt]; beta [1]; S_in [Vt, K] -> o [1, Vt], S_out."""
    with npu.vec("step"):
        q_t = q[..., 0, :] * scale                      # TMULS
        decay = g[..., 0, :].exp()                      # TEXP
        k_t = k[..., 0, :]
        S = S_in * cols(decay, S_in)                    # TCOLEXPANDMUL, in place
        kS = row_sum(S * cols(k_t, S))                  # TCOLEXPANDMUL into work; TROWSUM
        d = (v[..., 0, :] - kS) * beta[..., 0, None]    # TSUB, TMULS
        work = cols(k_t, S) * 1.0                       # TCOLEXPAND: k in every row
        work.mul_(rows(d, S))                           # TROWEXPANDMUL, in place
        S_out = S.add_(work)                            # TADD, in place
        o_t = row_sum(S_out * cols(q_t, S_out))         # TCOLEXPANDMUL; TROWSUM
        o = o_t[..., None, :]
    return o, S_out


def blocks(items: int, cores: int, aivs: int) -> int:
    """run_kdn_decode: block_dim = min(BLOCK_DIM (the cube cores), (tasks + 1) // 2)."""
    return max(1, min(cores, (items + 1) // 2))


KDN_DECODE_PR34 = DecodeDesign(
    "kdn_decode_pr34", kdn_decode_pr34, "MegaGDN-PTO PR 34 (ac07e1c): each AIV a worker, items of 32 value "
    "rows, fp16 inputs, serial items", workers=AIV_PAIRS, loop=SERIAL, blocks=blocks, v_tile=32,
    state_layout="vk", io_dtype="fp16", gate_dtype="fp16", state_dtypes=("fp32",), options=(), tokens=(1, 64),
    head_dim=128, source=SOURCE)
