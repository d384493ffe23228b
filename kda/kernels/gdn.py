"""`gdn_fla`: FLA's Gated DeltaNet forward (`chunk_gated_delta_rule_fwd`), the decomposition that FlagGems'
Triton kernels and vllm-ascend's Triton + AscendC path run on Ascend: GDN is KDA with one decay per head,
so g is [C, 1] and broadcast over the key channels.

    chunk_local_cumsum -> scaled_dot_kkt -> solve_tril -> recompute_w_u -> fwd_h -> fwd_o

What differs from `fla` (KDA) is where the gate enters the intra-chunk matrices. With a scalar gate,
exp(gc_i - gc_j) is one [C, C] matrix, so K K^T and Q K^T are plain Cube matmuls and the gate is a C x C
Vector multiply (FLA's `safe_exp`), where KDA needs 16-wide sub-chunks and d_k-wide pair products. A_qk is
formed inside fwd_o, as FLA's GDN `chunk_fwd_o` does. The cumsum, solve_tril, recompute_w_u and fwd_h
kernels are `fla`'s own programs on the [C, 1] gate: their gate exps touch C values instead of C x d_k.
"""
from __future__ import annotations

from npusim import phase_program
from npusim.model.schedule import CHUNKS, SEQUENTIAL, Design, Pass

from kda.programs.fla import chunk_local_cumsum, fwd_h, recompute_w_u, solve_tril


@phase_program("gdn.kkt", returns=("A_kk",))
def scaled_dot_kkt(npu, K, gc, beta):
    """beta * StrictTril(K K^T * exp(gc_i - gc_j)): one Cube matmul, then the [C, C] gate on the Vector."""
    with npu.cube("dots"):
        A_raw = K @ K.mT
    npu.sync(A_raw)
    with npu.vec("gate"):
        A_kk = (A_raw * (gc - gc.mT).tril().exp()).tril(-1) * beta[..., :, None]
    return A_kk


@phase_program("gdn.fwd_o", returns=("O",))
def fwd_o(npu, Q, K, gc, H, V_new, scale):
    """O = scale exp(gc) (Q H) + tril(scale Q K^T exp(gc_i - gc_j)) V_new."""
    with npu.cube("dots"):
        O_raw = Q @ H
        A_raw = Q @ K.mT
    npu.sync(O_raw, A_raw)
    with npu.vec("gate"):
        O_inter = O_raw * (gc.exp() * scale)
        A_qk = (A_raw * (gc - gc.mT).tril().exp()).tril() * scale
    npu.sync(A_qk)
    npu.keep(O_inter)
    with npu.cube("intra"):
        O_intra = A_qk @ V_new
    npu.sync(O_intra)
    with npu.vec("sum"):
        O = O_inter + O_intra
    return O


GDN_FLA = Design("gdn_fla", (
    Pass("chunk_local_cumsum", chunk_local_cumsum, CHUNKS),
    Pass("scaled_dot_kkt", scaled_dot_kkt, CHUNKS),
    Pass("solve_tril", solve_tril, CHUNKS),
    Pass("recompute_w_u", recompute_w_u, CHUNKS),
    Pass("fwd_h", fwd_h, SEQUENTIAL),
    Pass("fwd_o", fwd_o, CHUNKS),
), description="FLA's GDN decomposition (scalar gate per head): six kernels, five over all (sequence, chunk) items",
    notes={"stored": "gc=fp32,A_kk=fp32", "state_for_bf16": "fp32", "gate": "head"})

