"""vllm-ascend's Triton GDN forward (v0.18.0rc1, `vllm_ascend/ops/triton/fla/*.py`, vendored by MegaGDN-PTO
at kernels/triton_baseline/fla_vendor/, commit 20b1b7c), stage by stage as each Triton kernel runs: chunk BT
= 64 (128 where it compiles), K = V = 128, bf16 operands, fp32 gate and accumulation. Triton-Ascend splits
a program's tl.dot onto the Cube and the rest onto the Vector, every hand-off through a GM workspace.
Read from the kernels' source:

    cumsum      grid over blocks of tokens, every head at once: tl.cumsum along the chunk of a [BT, H]
                fp32 tile, Vector only; an item is one chunk of every head               (cumsum.py)
    kkt         grid over chunks, each program loops `for i_bh in range(B*H)`: per head one bf16 tl.dot
                K K^T (BT x BT x 128), then safe_exp(g_i - g_j), * beta, the strict mask, A stored fp32
                                                                          (chunk_scaled_dot_kkt.py)
    solve_tril  K1 (solve_tril_16x16_kernel, Vector only): the 16 x 16 diagonal blocks by forward
                substitution, `for i in range(1, 16)`: each row step a multiply, a tl.sum and an add over
                the blocks; K2 (merge_16x16_to_64x64_inverse_kernel): 4 dots of 16^3 then 2 of 32^3, all
                fp32 (input_precision="ieee"), the negations and the assembly on the Vector (solve_tril.py)
    wy_fast     grid over chunks, each program loops `for i_bh in range(H)`: A, v and k loaded and cast
                to fp32 (`.to(tl.float32)`), v * beta and k * beta * e^g on the Vector, then 4 tl.dot
                (BT x BT) (BT x 64) with fp32 operands (allow_tf32=False), u and w stored bf16 (wy_fast.py)
    chunk_h     one program per (sequence, head) walking every chunk, the state as two [128, 64] fp32
                halves on the Vector: per half W h (BT x 128 x 64, h cast to bf16), v_new = v - W h
                stored, scaled by safe_exp(g_last - g), h = h e^g_last + K^T v_new (128 x BT x 64): 2 dots a
                half, 4 dots and 6 hand-offs a chunk                                 (chunk_delta_h.py)
    chunk_o     one program per (sequence, head) walking every chunk: q h and q k^T (bf16), the gates
                and the causal mask on the Vector, then A v (A cast to bf16), o stored  (chunk_o.py)

How the loops are laid out on the model's chip:
  * kkt and wy_fast: a program is one chunk and its H heads one after another, which is H consecutive
    (sequence, chunk, head) items on one core: `CHUNKS`, ceil(NT H / 24) items a core against the
    kernel's ceil(NT / 24) H (within 3 % for the measured shapes, NT >= 512 chunks).
  * chunk_h and chunk_o: `SEQUENTIAL`, one (sequence, head) per program walking its chunks in order.
  * solve_tril: K1 and K2 are two launches, two passes of the stage (`solve_tril:k1`, `solve_tril:k2`,
    timed together as MegaGDN times the wrapper), each over chunk-head items; K1's Ad goes through GM as
    [BT, 16] fp32 rows of [T, H, 16]. K1's program spans 1216 tokens (38 diagonal blocks per row-step
    instruction, a separate 16 x 16 load per block); modelled per chunk, a row step's fixed cost is charged
    for the chunk's 4 blocks (more often than the kernel pays it) and A's diagonal is one load (fewer).
  * chunk_h: b_w and b_k are loaded once a chunk and feed both halves' dots (kept in L1).
  * cumsum: one chunk of every head per item (`all_heads`), as MegaGDN-PTO's cumsum.
Grouped heads: every kernel indexes by value head and reloads k (and q) per value head (`i_h // (H // Hg)`
only in the address), as the model does.
The wrappers: MegaGDN times the Triton stages from an idle device (a host sync before the start event), so
each wrapper's host work lies inside the row: allocations, the transposes of beta and g, the index helpers
(`prepare_chunk_indices` blocks on a `.tolist()` in cumsum and, twice, in solve_tril), the Triton launch
(`HOST`, npusim/model/host.py; the host's costs are the profile's [host] fields).
"""
from __future__ import annotations

import torch

from npusim import phase_program
from npusim.model.host import Host, Launch, Op, Sync
from npusim.model.schedule import CHUNKS, SEQUENTIAL, Design, Pass

HALF = 64               # BV = BK = 64 in wy_fast; the two [128, 64] state halves of chunk_h


def _safe_exp(x):
    """FLA's safe_exp: exp(x) where x <= 0, else 0 (a compare, an exp, a select)."""
    return torch.where(x <= 0, x.exp(), torch.zeros_like(x))


@phase_program("triton.cumsum", returns=("gc_heads",))
def cumsum(npu, g_heads):
    """tl.cumsum along the chunk of a [BT, H] fp32 tile (one chunk of every head)."""
    with npu.vec("scan"):
        gc_heads = g_heads.cumsum(-2)
    return gc_heads


@phase_program("triton.kkt", returns=("A",))
def kkt(npu, K, gc, beta):
    """One head of a program: b_A = tl.dot(b_k, tl.trans(b_k)); b_A *= safe_exp(g_i - g_j); b_A *= beta;
    tl.where(i > j, b_A, 0); stored fp32."""
    C = K.shape[-2]
    with npu.cube("kk"):
        KK = K @ K.mT                                    # BT x BT x 128, bf16 in, fp32 out
    npu.sync(KK)
    with npu.vec("gate"):
        g = gc[..., :, 0]
        mask = torch.ones(C, C).tril(-1)
        A = KK * _safe_exp(g[..., :, None] - g[..., None, :]) * beta[..., :, None] * mask
    return A


@phase_program("triton.solve_tril_k1", returns=("Ad",))
def solve_tril_k1(npu, A):
    """solve_tril_16x16_kernel on one chunk's diagonal 16 x 16 blocks: b_A = -A * is_lower; 15 dependent row
    steps (row * blocks, tl.sum, add, insert_slice); + I; stored fp32 as [BT, 16] rows of Ad [T, H, 16]."""
    C = A.shape[-1]
    nb = C // 16
    with npu.vec("k1"):
        blocks = torch.stack([A[..., 16 * i:16 * i + 16, 16 * i:16 * i + 16] for i in range(nb)], -3)
        lower = torch.ones(16, 16).tril(-1)
        Ab = -(blocks * lower)                           # b_A = -b_A * is_lower
        for i in range(1, 16):                           # for i in range(1, 16): one row of every block
            row = -blocks[..., i, :]                     # extract_slice of the original row
            prod = row[..., :, None] * Ab                # b_a[:, :, None] * b_A
            row_new = row + prod.sum(-2)                 # tl.sum over the block's rows
            Ab = torch.cat([Ab[..., :i, :], row_new[..., None, :], Ab[..., i + 1:, :]], -2)   # insert_slice
        Ad = (Ab + torch.eye(16)).reshape(*Ab.shape[:-3], C, 16)     # tl.where(on_diagonal, b_A + 1, b_A)
    return Ad


@phase_program("triton.solve_tril_k2", returns=("A_inv",))
def solve_tril_k2(npu, A, Ad):
    """merge_16x16_to_64x64_inverse_kernel: Ai_21 = -Ai_22 A_21 Ai_11 and Ai_43 likewise (16^3 dots), then
    the 32 x 32 merge (32^3 dots), all fp32 operands ("ieee"); the 64 x 64 inverse stored."""
    C = A.shape[-1]
    nb = C // 16
    with npu.cube("merge16"):                            # Ai_21 = -Ai_22 A_21 Ai_11, Ai_43 likewise: 16^3 dots
        Adb = Ad.reshape(*Ad.shape[:-2], nb, 16, 16)
        T16 = [Adb[..., i + 1, :, :] @ A[..., 16 * i + 16:16 * i + 32, 16 * i:16 * i + 16] for i in range(0, nb, 2)]
        X16 = torch.stack([t @ Adb[..., i, :, :] for t, i in zip(T16, range(0, nb, 2))], -3)
    npu.sync(X16)
    with npu.vec("assemble32"):                          # -dot, the 32 x 32 diagonal blocks
        Adv = Ad.reshape(*Ad.shape[:-2], nb, 16, 16)
        z = torch.zeros(16, 16)
        Ai32 = torch.stack([torch.cat([torch.cat([Adv[..., i, :, :], z.expand_as(Adv[..., i, :, :])], -1),
                                       torch.cat([-X16[..., i // 2, :, :], Adv[..., i + 1, :, :]], -1)], -2)
                            for i in range(0, nb, 2)], -3)
    npu.sync(Ai32)
    with npu.cube("merge32"):                            # Ai_21 = -Ai_22 A_21 Ai_11 on 32 x 32 blocks
        T32 = [Ai32[..., i + 1, :, :] @ A[..., 32 * i + 32:32 * i + 64, 32 * i:32 * i + 32]
               for i in range(0, nb // 2, 2)]
        X32 = torch.stack([t @ Ai32[..., i, :, :] for t, i in zip(T32, range(0, nb // 2, 2))], -3)
    npu.sync(X32)
    with npu.vec("assemble64"):                          # the 64 x 64 inverse (the kernel takes BT <= 64;
        z32 = torch.zeros(32, 32).expand_as(Ai32[..., 0, :, :])       # wider chunks: block diagonal)
        Ai64 = [torch.cat([torch.cat([Ai32[..., i, :, :], z32], -1),
                           torch.cat([-X32[..., i // 2, :, :], Ai32[..., i + 1, :, :]], -1)], -2)
                for i in range(0, nb // 2, 2)]
        z64 = torch.zeros(64, 64).expand_as(Ai64[0])
        A_inv = torch.cat([torch.cat([Ai64[i] if i == j else z64 for j in range(len(Ai64))], -1)
                           for i in range(len(Ai64))], -2)
    return A_inv


@phase_program("triton.wy_fast", returns=("W", "U"))
def wy_fast(npu, K, V, gc, beta, A_inv):
    """One head of a program: b_A = A.to(fp32); `for i_v in range(2)`: u = tl.dot(b_A, v * beta);
    `for i_k in range(2)`: w = tl.dot(b_A, k * beta * e^g): 4 dots with fp32 operands, each after its
    Vector scaling (four hand-offs a head)."""
    with npu.vec("v0"):                                  # b_A, b_beta, then the first i_v iteration
        A32 = A_inv * 1.0                                # .to(tl.float32)
        b_beta = beta[..., :, None] * 1.0
        vb0 = V[..., :, :HALF] * b_beta
    npu.keep(b_beta)
    npu.sync(A32, vb0)
    with npu.cube("u0"):
        U0 = A32 @ vb0                                   # (BT x BT) (BT x 64), fp32 operands
    npu.keep(U0)
    with npu.vec("v1"):
        vb1 = V[..., :, HALF:] * b_beta
    npu.sync(vb1)
    with npu.cube("u1"):
        U = torch.cat([U0, A32 @ vb1], -1)               # u stored bf16 from L0C
    with npu.vec("k0"):                                  # the i_k loop: k * beta * e^g
        b_kscale = b_beta * gc.exp()
        kb0 = K[..., :, :HALF] * b_kscale
    npu.keep(b_kscale)
    npu.sync(kb0)
    with npu.cube("w0"):
        W0 = A32 @ kb0
    npu.keep(W0)
    with npu.vec("k1"):
        kb1 = K[..., :, HALF:] * b_kscale
    npu.sync(kb1)
    with npu.cube("w1"):
        W = torch.cat([W0, A32 @ kb1], -1)
    return W, U


@phase_program("triton.chunk_h", returns=("H", "V_new", "S_new"), state=("S_prev", "S_new"), state_handoff="own")
def chunk_h(npu, K, W, U, gc, S_prev):
    """One chunk of a (sequence, head) program: h stored; then for each 64-wide half of the state:
    v_new = v - tl.dot(w, h.to(bf16)); stored; v_new *= safe_exp(g_last - g); h = h e^g_last +
    tl.dot(k^T, v_new.to(bf16))."""
    with npu.vec("store_h"):
        H = S_prev * 1.0                                 # tl.store(h, b_h.to(bf16)), both halves
        g_last = gc[..., -1:, :]
        decay = _safe_exp(g_last - gc)
        gamma = g_last.exp()
        hb0 = S_prev[..., :, :HALF] * 1.0                # b_h1_bv1.to(b_w.dtype)
    npu.keep(decay, gamma)
    npu.sync(hb0)
    with npu.cube("ws0"):
        W_l1 = W[..., :, :]                              # b_w: loaded once a chunk, used by both halves
        WS0 = W_l1 @ hb0                                 # BT x 128 x 64
    npu.keep(W_l1)
    npu.sync(WS0)
    with npu.vec("v_new0"):
        Vn0 = U[..., :, :HALF] - WS0
        Vs0 = Vn0 * decay
        S0 = S_prev[..., :, :HALF] * gamma
        hb1 = S_prev[..., :, HALF:] * 1.0
    npu.keep(S0, Vn0)
    npu.sync(Vs0, hb1)
    with npu.cube("kv0_ws1"):
        K_l1 = K.mT                                      # b_k [128, BT]: loaded once a chunk
        KV0 = K_l1 @ Vs0                                 # 128 x BT x 64
        WS1 = W_l1 @ hb1
    npu.keep(K_l1)
    npu.sync(KV0, WS1)
    with npu.vec("v_new1"):
        S_new0 = S0 + KV0
        Vn1 = U[..., :, HALF:] - WS1
        Vs1 = Vn1 * decay
        S1 = S_prev[..., :, HALF:] * gamma
    npu.keep(S_new0, S1, Vn1)
    npu.sync(Vs1)
    with npu.cube("kv1"):
        KV1 = K_l1 @ Vs1
    npu.sync(KV1)
    with npu.vec("update"):
        S_new = torch.cat([S_new0, S1 + KV1], -1)
        V_new = torch.cat([Vn0, Vn1], -1)
    return H, V_new, S_new


@phase_program("triton.chunk_o", returns=("O",))
def chunk_o(npu, Q, K, gc, H, V_new, scale):
    """One chunk of a (sequence, head) program: b_o = q h, b_A = q k^T; b_o *= e^g, b_A *= safe_exp(g_i -
    g_j), causal tl.where; o = b_o scale + tl.dot(b_A.to(bf16), v) scale."""
    C = Q.shape[-2]
    with npu.cube("qh_qk"):
        QH = Q @ H                                       # BT x 128 x 128
        QK = Q @ K.mT                                    # BT x 128 x BT
    npu.sync(QH, QK)
    with npu.vec("gate"):
        g = gc[..., :, 0]
        mask = torch.ones(C, C).tril()
        O_inter = QH * g[..., :, None].exp()
        Ag = QK * _safe_exp(g[..., :, None] - g[..., None, :]) * mask
    npu.keep(O_inter)
    npu.sync(Ag)
    with npu.cube("av"):
        AV = Ag @ V_new                                  # BT x BT x 128
    npu.sync(AV)
    with npu.vec("sum"):
        O = O_inter * scale + AV * scale
    return O


# What each stage keeps in GM and hands over in: A fp32 (output_dtype=torch.float32), K1's Ad fp32, K2's
# dots fp32 ("ieee"), wy_fast's upcast operands fp32, the rest in the operand type (bf16).
STORED = {"stored": "gc_heads=fp32,KK=fp32,A=fp32,Ad=fp32,X16=fp32,Ai32=fp32,X32=fp32,"
                    "A32=fp32,vb0=fp32,vb1=fp32,kb0=fp32,kb1=fp32,WS0=fp32,WS1=fp32,KV0=fp32,KV1=fp32,"
                    "QH=fp32,QK=fp32,AV=fp32",
          "state_for_bf16": "fp32", "gate": "head"}

# The wrappers inside MegaGDN's timed region (bench_gdn_kernels.py `_bench_triton`: a host sync, then the
# start event: the device is idle while the host runs them), read from fla_vendor/*.py. triton.cdiv on a
# tensor is three ops ((x + BT - 1) // BT); prepare_chunk_indices does `.tolist()` and copies its indices back
# (two blocking copies; the CPU-side arange/cat/stack between them counts with the copies).
_LENS = (Op("prepare_lens: cu_seqlens[1:] - cu_seqlens[:-1]"), Op("cdiv: + BT"), Op("cdiv: - 1"), Op("cdiv: // BT"))
_INDICES = _LENS + (Sync("prepare_chunk_indices: .tolist()"), Sync("prepare_chunk_indices: .to(cu_seqlens)"))
_OFFSETS = _LENS + (Sync("prepare_chunk_offsets: cu_seqlens.new_tensor([0])"), Op("torch.cat"), Op(".cumsum(-1)"))
_G_T = Op("g.transpose(1, 2).contiguous() fp32", ("T", "H", 4, 2))
_BETA_T = Op("beta.transpose(1, 2).contiguous() bf16", ("T", "H", 2, 2))
HOST = Host({
    "cumsum": _INDICES + (Op("torch.empty_like(g)"), Launch("cumsum")),
    "kkt": (Op("A = torch.empty(B, T, H, BT)"), _BETA_T, _G_T, Launch("kkt")),
    "solve_tril": (Op("Ad = torch.empty(B, T, H, 16)"),) + _INDICES + (Launch("solve_tril:k1"),
                   Op("Ai = torch.empty(B, T, H, BT)")) + _INDICES + (Launch("solve_tril:k2"),),
    "wy_fast": (Op("u = torch.empty_like(v)"), Op("w = k.new_empty(B, T, H, K)"), _BETA_T, _G_T, Launch("wy_fast")),
    "chunk_h": (Op("h = k.new_empty(B, NT, H, K, V)"), Op("h_update = k.new_empty(B, NT, H, K, K)"),
                Op("v_new = torch.empty_like(u)"), _G_T, Launch("chunk_h")),
    "chunk_o": (Op("o = torch.empty_like(v)"),) + _OFFSETS + (_G_T, Launch("chunk_o")),
}, idle=True, source="MegaGDN-PTO benchmarks/kernel/bench_gdn_kernels.py _bench_triton; fla_vendor/*.py wrappers")

GDN_TRITON = Design("gdn_triton", (
    Pass("cumsum", cumsum, CHUNKS, all_heads=True),
    Pass("kkt", kkt, CHUNKS),
    Pass("solve_tril:k1", solve_tril_k1, CHUNKS),
    Pass("solve_tril:k2", solve_tril_k2, CHUNKS),
    Pass("wy_fast", wy_fast, CHUNKS),
    Pass("chunk_h", chunk_h, SEQUENTIAL),
    Pass("chunk_o", chunk_o, SEQUENTIAL),
), description="vllm-ascend's Triton GDN forward: six kernels as their programs loop", notes=STORED, host=HOST)
