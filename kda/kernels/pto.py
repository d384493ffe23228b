"""MegaGDN-PTO's Gated DeltaNet forward (huawei-csl/megagdn-pto, kernels/pto/, commit 20b1b7c), stage by
stage as its kernels run on a 910B2: chunk C = 128, K = V = 128, fp16 operands, fp32 accumulation and
Vector math, every hand-off through a GM workspace. Read from the kernels' source:

    cumsum      one item = one chunk of every head ([C, H] fp32), on AIV0 of each core only: a row-by-row
                prefix sum, each add and copy after a pipe_barrier(V)                (chunk_cumsum.cpp)
    kkt         (sequence, head) items walking their chunks; K K^T on the Cube, the gate
                exp(min(g_i + log beta_i - g_j, 0)) and the strict mask on the Vector; two workspace slots
                                                                                     (scaled_dot_kkt.cpp)
    solve_tril  Cube only: (I + A)^-1 by 24 dependent 128^3 matmuls, each result back to L1 through the
                FixPipe (tri_inverse_impl.cpp: 16-wide diagonal blocks by a power series, then 16 -> 32
                -> 64 -> 128 block recursion)
    wy_fast     (sequence, chunk, head) items: A2 = A beta and A1 = A beta e^g on the Vector, U = A2 V and
                W = A1 K on the Cube; one workspace slot                             (wy_fast.cpp)
    chunk_h     (sequence, head) items walking their chunks with the state: WS = W S and K~^T V_new on the
                Cube, the state in fp32 in the Vector's UB and an fp16 copy to the Cube each chunk; four
                hand-offs a chunk                                                   (chunk_h.cpp)
    chunk_o     (sequence, chunk, head) items: Q K^T and Q S, then (Q K^T o gate) V_new on the Cube, the
                gate and the sum on the Vector; one workspace slot                   (chunk_o.cpp)

The fused kernel (mega_kernel.cpp) runs the same stages in one launch with an all-core SyncAll between
them (seven in all, one of them doubled) and two [T, H] -> [H, T] transposes on AIV0 after the cumsum;
its solve_tril stores fp16. Grouped heads (Hg < H): every stage indexes its work by value head and loads
q/k per value head (no reuse across the group), as the kernels do.
"""
from __future__ import annotations

import numpy as np
import torch

from npusim import phase_program
from npusim.model.host import Host, Launch, Op, Sync
from npusim.model.schedule import BARRIER, CHUNKS, SEQUENTIAL, Design, Pass


@phase_program("pto.cumsum", returns=("gc_heads",))
def cumsum(npu, g_heads):
    """g_heads [C, H]: one chunk of every head's log decay. acc = row 0; out_i = acc += row_i."""
    C = g_heads.shape[-2]
    with npu.vec("scan"):
        out = torch.empty_like(g_heads)
        acc = g_heads[..., 0, :] * 1.0                   # TMOV acc <- row 0
        out[..., 0, :] = acc                             # TMOV out_0 <- acc
        for i in range(1, C):
            acc = acc + g_heads[..., i, :]               # TADD, pipe_barrier(V)
            out[..., i, :] = acc                         # TMOV, pipe_barrier(V)
        gc_heads = out
    return gc_heads


@phase_program("pto.transpose", returns=("gc_t",))
def transpose(npu, gc_heads):
    """mega_transpose_TH_to_HT: [C, H] -> [H, C] on AIV0 (TTRANS), stored row by row."""
    with npu.vec("transpose"):
        gc_t = gc_heads.mT * 1.0
    return gc_t


def _row_expand(npu, col, n: int):
    """col [..., C, 1] -> [..., C, n] as pto-isa's TROWEXPAND does it on the A2/A3 Vector unit (a [C, 1]
    source into rows wider than one 32-B block): row by row, a V -> S flag, a scalar read of the row's value
    from UB, an S -> V flag and a vector_dup (pto-isa include/pto/npu/a2a3/TRowExpand.hpp). So per row on
    each AIV a scalar access and one dependent instruction: row i of AIV0 and row C/2 + i of AIV1 are one
    recorded op of each."""
    C = col.shape[-2]
    half = max(C // 2, 1)
    out = torch.empty(*col.shape[:-1], n)
    for i in range(half):
        rows = col[..., i::half, :]
        value = npu.scalar("TROWEXPAND: read a row's value", lambda r: r * 1.0, rows, accesses=1,
                           matrices=rows.numel())
        out[..., i::half, :] = value.expand(*rows.shape[:-1], n)
    return out


def _gate(npu, gc, beta=None):
    """exp(min(g_i (+ log beta_i) - g_j, 0)) on [C, C]: TROWEXPAND of the row gate, TCOLEXPAND of the
    column gate with the sub, min, exp."""
    g = gc[..., :, 0]
    rows = g + beta.log() if beta is not None else g
    return (_row_expand(npu, rows[..., :, None], gc.shape[-2]) - g[..., None, :]).clamp_max(0.0).exp()


@phase_program("pto.kkt", returns=("A",))
def kkt(npu, K, gc, beta):
    """A = K K^T o exp(min(g_i + log beta_i - g_j, 0)) o StrictTril."""
    C = K.shape[-2]
    with npu.cube("kkt"):
        KK = K @ K.mT                                    # 128 x 128 x 128, fp16 in, fp32 in L0C
    npu.sync(KK)
    with npu.vec("gate"):
        mask = torch.ones(C, C).tril(-1)                 # loaded once per kernel
        A = KK * _gate(npu, gc, beta) * mask
    return A


def _diag_blocks(X, size: int):
    """The block diagonal of X in `size`-wide blocks (fractal copies L1 -> L0: no arithmetic)."""
    C = X.shape[-1]
    zero = torch.zeros(size, size, dtype=X.dtype)
    rows = [torch.cat([X[..., i:i + size, j:j + size] if i == j else zero.expand(*X.shape[:-2], size, size)
                       for j in range(0, C, size)], -1) for i in range(0, C, size)]
    return torch.cat(rows, -2)


def _level(X, M, size: int):
    """X holds the inverses of the `size`-wide diagonal blocks; (LX, RX, Mb): X's lower and upper blocks of
    each 2 size-wide block, and the block of M between them."""
    C = X.shape[-1]
    zero = torch.zeros(size, size, dtype=X.dtype).expand(*X.shape[:-2], size, size)
    def pick(src, keep):
        rows = []
        for i in range(0, C, size):
            rows.append(torch.cat([src[..., i:i + size, j:j + size] if keep(i // size, j // size) else zero
                                   for j in range(0, C, size)], -1))
        return torch.cat(rows, -2)
    LX = pick(X, lambda i, j: i == j and i % 2 == 1)
    RX = pick(X, lambda i, j: i == j and i % 2 == 0)
    Mb = pick(M, lambda i, j: i == j + 1 and i % 2 == 1)
    return LX, RX, Mb


@phase_program("pto.solve_tril", returns=("A_inv",))
def solve_tril(npu, A):
    """(I + A)^-1 for strictly lower A on the Cube alone (the MXR inverse): 24 matmuls of 128^3, each pair
    accumulated in L0C written as one matmul of the concatenated operands."""
    C = A.shape[-1]
    with npu.cube("inverse"):
        eye = torch.as_tensor(np.eye(C), dtype=A.dtype).expand_as(A)      # constants built in L1 once
        neg_eye = torch.as_tensor(-np.eye(C), dtype=A.dtype).expand_as(A)
        neg_M = neg_eye @ A                                         # 1
        D = _diag_blocks(A, 16)
        Y = D @ D                                                   # 2
        X = torch.cat([D, neg_eye], -1) @ torch.cat([neg_eye, neg_eye], -2)   # 3, 4: I - D
        for step in range(3):                                       # 5 .. 12: X (I + D^2)(I + D^4)(I + D^8)
            X = torch.cat([X, X], -1) @ torch.cat([eye, Y], -2)
            if step < 2:
                Y = Y @ Y
        size = 16
        while size < C:                                             # 13 .. 24: 16 -> 32 -> 64 -> 128
            LX, RX, Mb = _level(X, neg_M, size)
            T = torch.cat([LX, LX], -1) @ torch.cat([eye, Mb], -2)   # LX (I - M_b)
            X = torch.cat([eye, T], -1) @ torch.cat([X, RX], -2)     # X - LX M_b RX
            size *= 2
        A_inv = X
    return A_inv


@phase_program("pto.wy_fast", returns=("W", "U"))
def wy_fast(npu, K, V, gc, beta, A_inv):
    """A2 = A diag(beta), U = A2 V; A1 = A diag(beta e^g), W = A1 K. The Cube loads K and V into L1 before
    it waits for A2 (wy_fast.cpp:762-780), so their loads overlap the Vector's work."""
    with npu.cube("kv_in"):
        K, V = K.clone(), V.clone()
    npu.keep(K, V)
    with npu.vec("a2"):
        A2 = A_inv * beta[..., None, :]
    npu.sync(A2)
    with npu.cube("u"):
        U = A2 @ V
    with npu.vec("a1"):
        A1 = A_inv * (beta * gc[..., :, 0].exp())[..., None, :]
    npu.sync(A1)
    with npu.cube("w"):
        W = A1 @ K
    return W, U


@phase_program("pto.chunk_h", returns=("H", "V_new", "S_new"), state=("S_prev", "S_new"), state_handoff="own")
def chunk_h(npu, K, W, U, gc, S_prev):
    """WS = W S; V_new = U - WS; K~ = exp(g_last - g) K; S' = exp(g_last) S + K~^T V_new. The state lives in
    the Vector's UB; the Cube reads its fp16 copy from the workspace every chunk."""
    with npu.vec("decay"):                               # runs while the Cube makes WS
        U = U.clone()                                    # U loaded before the wait for WS (chunk_h.cpp:653-701)
        g_last = gc[..., -1:, :]
        K_decay = K * _row_expand(npu, (g_last - gc).exp(), K.shape[-1])     # TEXP, TROWEXPAND, TMUL
        gamma = g_last.exp()
    npu.keep(gamma, U)
    with npu.cube("ws"):
        WS = W @ S_prev
    npu.sync(WS)
    with npu.vec("v_new"):
        V_new = U - WS
    npu.sync(K_decay, V_new)
    with npu.cube("kv"):
        KV = K_decay.mT @ V_new
    npu.sync(KV)
    with npu.vec("update"):
        S_new = S_prev * gamma + KV
        H = S_new * 1.0                                  # S_handle[chunk + 1]
    return H, V_new, S_new


@phase_program("pto.chunk_o", returns=("O",))
def chunk_o(npu, Q, K, gc, H, V_new):
    """O = (Q K^T o exp(min(g_i - g_j, 0)) o Tril) V_new + exp(g) o (Q S) (no scale: the wrapper's)."""
    C = Q.shape[-2]
    with npu.vec("gate"):
        mask = torch.ones(C, C).tril()
        coeff = _gate(npu, gc) * mask
        eg = gc.exp()
    npu.keep(coeff, eg)                                  # stays in UB for the item
    with npu.cube("qk_qs"):
        QK = Q @ K.mT
        QS = Q @ H
    npu.sync(QK, QS)
    with npu.vec("qk_gated"):
        QK_gated = QK * coeff
    npu.sync(QK_gated)
    with npu.cube("qkv"):
        QKV = QK_gated @ V_new
    npu.sync(QKV)
    with npu.vec("sum"):
        O = QS * _row_expand(npu, eg, QS.shape[-1]) + QKV    # TROWEXPAND exp(g), TMUL, TADD
    return O


# Buffers: the stage kernels' gemm_v0 holds one L0A/L0B/L0C tile (buffers=1); tri_inverse keeps two
# (NumL0Buffers = 2, tri_inverse_impl.cpp). Workspace slots: kkt two per core, the others one.
STORED = {"stored": "gc_heads=fp32,gc_t=fp32,A=fp16,A_inv=fp16,W=fp16,U=fp16,H=fp16,V_new=fp16",
          "state_for_bf16": "fp16", "gate": "head"}

GDN_PTO = Design("gdn_pto", (
    Pass("cumsum", cumsum, CHUNKS, vec_units=1, all_heads=True),
    Pass("kkt", kkt, SEQUENTIAL, slots=2, buffers=1),
    Pass("solve_tril", solve_tril, CHUNKS, buffers=2),
    Pass("wy_fast", wy_fast, CHUNKS, slots=1, buffers=1),
    Pass("chunk_h", chunk_h, SEQUENTIAL, slots=1, buffers=1),
    Pass("chunk_o", chunk_o, CHUNKS, slots=1, buffers=1),
), description="MegaGDN-PTO's GDN forward: six kernels at chunk 128, each its own launch", notes=STORED)

# run_mega_kernel inside the timed region (megagdn_pto/mega_kernel.py; `_bench_npu`: the host runs ahead
# until total_chunks blocks on cu_seqlens.cpu()): the buffers it allocates and zero-fills, the ctypes launch
# and the o * scale after it. The masks and the library are cached (lru_cache).
_WS = ((48, "C", "C", 2), (24, "C", "C", 2), (24, "C", "C", 2), (96, "K", "V", 2), (24, "C", "C", 2),
       (24, "C", "V", 2), (24, "C", "C", 2))      # kkt_ws, wy_ws_a1/a2, h_ws, o_ws_qk/qs/gated (block_dim 24)
MEGA_HOST = Host({"": (
    Sync("total_chunks: cu_seqlens.cpu().tolist()"),
    Op("g_sum = torch.empty"), Op("g_t = torch.empty"), Op("beta_t = torch.empty"),
    Op("A = torch.zeros(1, T, H, C) fp16", ("T", "H", "C", 2)),
    Op("A_inv_f32 = torch.zeros(1, T, H, C) fp32", ("T", "H", "C", 4)),
    Op("A_inv = torch.zeros(1, T, H, C) fp16", ("T", "H", "C", 2)),
    Op("w = torch.empty_like(v)"), Op("u = torch.empty_like(v)"),
    Op("s = torch.zeros(tc H, D, D) fp16", ("NC", "H", "K", "V", 2)),
    Op("v_new = torch.empty_like(v)"),
    Op("fs = torch.zeros(N H, D, D) fp16", ("N", "H", "K", "V", 2)),
    *(Op("workspace = torch.zeros", size) for size in _WS),
    Op("o_out = torch.empty_like(v)"),
    Launch("", via="ctypes"),
    Op("o_out * scale: read and write fp16", ("T", "H", "V", 2, 2)),
)}, idle=False, source="MegaGDN-PTO megagdn_pto/mega_kernel.py run_mega_kernel; bench_gdn_kernels.py _bench_npu")

GDN_PTO_FUSED = Design("gdn_pto_fused", (
    Pass("cumsum", cumsum, CHUNKS, vec_units=1, all_heads=True),
    Pass("transpose_g", transpose, CHUNKS, boundary=BARRIER, vec_units=1, all_heads=True),
    Pass("transpose_beta", transpose, CHUNKS, boundary=BARRIER, barriers=0, vec_units=1, all_heads=True),
    Pass("kkt", kkt, SEQUENTIAL, boundary=BARRIER, slots=2, buffers=1),
    Pass("solve_tril", solve_tril, CHUNKS, boundary=BARRIER, buffers=2),
    Pass("wy_fast", wy_fast, CHUNKS, boundary=BARRIER, slots=1, barriers=2, buffers=1),
    Pass("chunk_h", chunk_h, SEQUENTIAL, boundary=BARRIER, slots=1, buffers=1),
    Pass("chunk_o", chunk_o, CHUNKS, boundary=BARRIER, slots=1, buffers=1),
), description="MegaGDN-PTO's fused GDN forward: the six stages in one launch, SyncAll between them",
    notes=STORED, host=MEGA_HOST)
