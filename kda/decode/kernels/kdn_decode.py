"""MegaGDN-PTO's `kdn_decode` (huawei-csl/megagdn-pto pull request 35, kernels/pto/kdn_decode.cpp at commit
6c32df5), the KDA decode step (T = 1) as its kernel runs it on a 910B2, read from the source:

    launch     a mix kernel (bisheng -xcce --cce-aicore-arch=dav-c220): a block is an AI core, and its
               second AIV returns at once (`if (vid != 0) return`); benchmarks/kernel/bench_kda_decode.py
               launches min(B x HV, 40) blocks (--block-cap 40), so beyond 24 the blocks wait for a free core
    items      one (sequence, value head) each, by a grid stride over the blocks
    buffers    UB: the state [K, V] fp32 (64 KiB), a scratch tile of the same size, a 32 KiB TCOLSUM tree
               and the rows; q, k, v, g, beta and the state all fp32 in GM, the state out to its own buffer
    loop       a PIPE_ALL at the top of every item: loads, Vector work and stores of one item never overlap
               the next item's; inside the item the S_out store overlaps the query read-out (no barrier
               between them), then a PIPE_ALL

Per item, the instructions (each followed by pipe_barrier(PIPE_V)):
    TLOAD S [K, V], g, k, q, v, the 8-lane beta window
    TEXP g; TROWEXPANDMUL S *= e^g; TROWEXPANDMUL scrat = S * k; TCOLSUM kS
    TMULS v *= 1; TSUB d = v - kS; TMULS d *= beta (a scalar read from UB)
    TCOLEXPAND scrat = d (every row); TROWEXPANDMUL scrat *= k; TADD S += scrat; TSTORE S_out
    TMULS q *= scale; TROWEXPANDMUL scrat = S * q; TCOLSUM o; TSTORE o
"""
from npusim import phase_program

from kda.decode.design import AIV0, SERIAL, DecodeDesign
from kda.decode.programs.steps import cols, column_sum, rows

SOURCE = "huawei-csl/megagdn-pto pull request 35 @ 6c32df5, kernels/pto/kdn_decode.cpp"


@phase_program("kdn_decode", returns=("o", "S_out"))
def kdn_decode(npu, q, k, v, g, beta, S_in, scale, A_log=None, dt_bias=None, options=(), lower_bound=None):
    """One token of one head: q, k, g [1, K]; v [1, V]; beta [1]; S_in [K, V] -> o [1, V], S_out [K, V]."""
    with npu.vec("update"):
        k_t, g_t, b_t, v_t = k[..., 0, :], g[..., 0, :], beta[..., 0], v[..., 0, :]
        S = S_in * rows(g_t.exp(), S_in)                # TEXP; TROWEXPANDMUL, in place
        kS = column_sum(S * rows(k_t, S))               # TROWEXPANDMUL into scrat; TCOLSUM
        d = (v_t * 1.0 - kS) * b_t[..., None]           # TMULS (push v), TSUB, TMULS beta
        scrat = cols(d, S) * 1.0                        # TCOLEXPAND: d copied to every row
        scrat.mul_(rows(k_t, S))                        # TROWEXPANDMUL, in place
        S_out = S.add_(scrat)                           # TADD, in place
    npu.keep(S_out)
    with npu.vec("readout"):                            # overlaps the S_out store
        o_t = column_sum(S_out * rows(q[..., 0, :] * scale, S_out))
        o = o_t[..., None, :]
    return o, S_out


def blocks(items: int, cores: int, aivs: int) -> int:
    """bench_kda_decode.py: bd = min(B x HV, --block-cap 40)."""
    return max(1, min(items, 40))


KDN_DECODE = DecodeDesign(
    "kdn_decode", kdn_decode, "MegaGDN-PTO PR 35: AIV0 of each block, up to 40 blocks, one state per item, "
    "PIPE_ALL between items", workers=AIV0, loop=SERIAL, blocks=blocks, io_dtype="fp32", gate_dtype="fp32",
    state_dtypes=("fp32",), options=(), tokens=(1, 1), head_dim=128, source=SOURCE)
