"""flash-linear-attention-npu's `ChunkKdaFwdIntraSubChunk` (github flashserve/flash-linear-attention-npu,
pull request 244, `fla/ops/ascendc/kda/chunk_kda_fwd_intra_sub_chunk/`), FLA's
`chunk_kda_fwd_kernel_intra_sub_chunk` in AscendC, as its kernel runs on an A2 (`KERNEL_TYPE_MIX_AIC_1_2`).
For every 16-token diagonal sub-chunk (BC = 16) of a 64-token chunk (BT = 64) and every value head:

    gate   gq = exp2(g - g_ref), gk = exp2(g_ref - g) on the [16, 128] tile, centred on its middle row g_ref
    Cube   Aqk_raw = (q gq) (k gk)^T and Akk_raw = (k gq) (k gk)^T: two 16 x 16 x 128 matmuls
    tril   Aqk = tril(Aqk_raw) scale; L = strict_tril(Akk_raw) beta
    solve  Akkd = (I + L)^-1 by forward substitution on the Vector, in fp32

Read from the kernel's source (`op_kernel/*.h`, `op_host/*_tiling.cpp`):

  * Layout BNSD: a head's 16 rows of q, k and g are one contiguous 4 KiB run; Aqk's 16 x 16 block is 16 rows
    of 32 B, BT apart; Akkd's block 1 KiB, contiguous.
  * Work (this version, "Vec2Win"): one task a chunk, `task mod 24` its core; inside a task the windows
    (sub-chunk, pair of heads) in order, AIV0 the even head, AIV1 the odd one; AIC the two heads' matmuls one
    after the other. Two windows in flight: each AIV prepares windows w and w + 1, then for every w waits for
    the Cube, runs Post(w), then Prep(w + 2). Both AIVs meet in a CrossCoreBarrier before each window's
    hand-off to the Cube (SetS0ReadyJoined).
  * Every hand-off through GM: Qg, W = k gq and Kg (bf16, [16, 128] each) AIV -> AIC, Aqk_raw and Akk_raw
    (fp32, [16, 16]) AIC -> AIV.
  * The Vector's instructions and its pipe_barrier(PIPE_V) walls, counted from the source per window and AIV:
      Prep   4 casts, 16 row Subs (128 wide), 2 Muls, 4 clamps, 2 Exps, 3 Muls and 3 casts down: 14 walls
      Post   beta's Dup and cast, the scale, a Brcb and the beta Mul as two 8-wide column tiles issued one
             16-wide row per repeat, the Select masks built by the scalar unit (32 stores), two row-wise
             Selects, the negation: 7 walls; the forward substitution, for i = 2 .. 15: a UB copy of row i,
             a Brcb of it, two 8-wide column-tile Muls (16 repeats each), the Add-fold over the 16 rows
             (128, 64, 32, 16 elements), two UB copies and an Add: 10 walls a row, 140 in all; the diagonal
             +I by 16 GetValue and 16 SetValue; the cast of Aqk: 1 wall.
  * The Cube: per head Kg held in L1 for both matmuls, Qg and W in two L1 slots; one L0A / L0B / L0C buffer.

kda/kernels/fla_npu_intra_history.py has the earlier versions of the pull request. Not modelled: the
W load's overlap with the first matmul and the Akk FixPipe's with the next head's loads (the Cube is not the
bottleneck), the empty-pipe barrier at the start of Post, ClampFp16 (fp16 only; every row is bf16).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from npusim import phase_program
from npusim.model.schedule import SEQUENTIAL, Design, Pass
from npusim.record.precision import Precision

from kda.driver.execute import design_precision
from kda.driver.multipass import record_passes

BT, BC = 64, 16                     # chunk and sub-chunk sizes of the measured build (chunk_size = 64)
LN2 = math.log(2.0)
EXP_CLAMP = 80.0 * LN2              # EXP_INPUT_MAX / MIN: exp2 clamped at +-80


@dataclass(frozen=True)
class Version:
    """One build of the kernel: its source commit and what differs between the pull request's steps."""
    step: str                # the pull request's name for it (ITERATION_LOG.md): B0, B1, ..., FwdSub P1
    commit: str              # the commit whose source is modelled
    window: bool = True      # two heads a window on the two AIVs (Vec2Win); else lockstep on AIV0 alone
    barriers: str = "vc"     # Prep / tril barrier set: "b0" (before V-A), "va" (V-A merged), "vc" (mid merged)


# ----- the Vector's Prep: gate centring, exp2 on [16, 128] tiles, the three score operands ---------------------

def _prep(npu, v: Version, q, k, g, g_ref, qk_type):
    """q, k, g [1, H, 16 x 128] and g_ref [1, H, 128] in the qk type: one window's heads, as loaded."""
    H = q.shape[-2]

    def tile(x):
        return x.reshape(H, BC, -1)
    with npu.vec("prep"):
        mid = npu.cast(g_ref, "fp32")[0]                    # g_ref = g[mid]: its own DataCopy
        if v.barriers != "vc":                           # LoadMidRow: cast, barrier, then q/k/g
            npu.pipe_barrier()
        qF, kF, gF = (tile(npu.cast(x, "fp32")) for x in (q, k, g))
        npu.pipe_barrier()
        expP = torch.stack([gF[:, r] - mid for r in range(BC)], 1)      # Sub per row (128 wide)
        npu.pipe_barrier()
        expP = expP * LN2
        npu.pipe_barrier()
        expN = expP * -1.0
        npu.pipe_barrier()
        expP, expN = _clamp(npu, v, expP), _clamp(npu, v, expN)
        if v.barriers != "b0":
            npu.pipe_barrier()
        expP, expN = expP.exp(), expN.exp()
        npu.pipe_barrier()
        Qg, W, Kg = (_score_operand(npu, a * b, qk_type) for a, b in ((qF, expP), (kF, expP), (kF, expN)))
        if v.window:                                     # SetS0ReadyJoined: the two AIVs meet first
            npu.flag("CrossCoreBarrier AIV0 <-> AIV1")
    npu.sync(Qg, W, Kg)
    return Qg, W, Kg


def _clamp(npu, v: Version, x):
    """ClampExp: Mins, barrier, Maxs (and a barrier after before V-A)."""
    x = x.clamp_max(EXP_CLAMP)
    npu.pipe_barrier()
    x = x.clamp_min(-EXP_CLAMP)
    if v.barriers == "b0":
        npu.pipe_barrier()
    return x


def _score_operand(npu, product, qk_type):
    """The Mul just issued, a barrier, the cast down to the qk type, a barrier."""
    npu.pipe_barrier()
    out = npu.cast(product, qk_type)
    npu.pipe_barrier()
    return out


# ----- the Cube: two 16 x 16 x 128 matmuls a head ----------------------------------------------------------------

def _score(npu, Qg, W, Kg):
    with npu.cube("score"):
        Aqk_raw = Qg @ Kg.mT                             # Kg held in L1B for both
        Akk_raw = W @ Kg.mT
    npu.sync(Aqk_raw, Akk_raw)
    return Aqk_raw, Akk_raw


# ----- the Vector's Post: tril, scale, beta, forward substitution ----------------------------------------------

def _tril(npu, v: Version, Aqk_raw, Akk_raw, beta, scale):
    """ApplyTrilScaleBeta: aqk = tril(aqk) scale; akk = -(strict_tril(akk) beta), after beta's Dup and cast."""
    H = beta.shape[0]
    beta_f = npu.dup(0.0, beta)                          # Duplicate(beta, 0, BC)
    npu.pipe_barrier()
    beta_f = npu.cast(beta, "fp32")                      # loaded with the scores (V-C) or after them
    npu.pipe_barrier()
    aqk = Aqk_raw * scale
    if v.barriers == "b0":
        npu.pipe_barrier()
    bb = npu.brcb(beta_f)                                # [H, 16, 8]: beta[r] in a block of its own
    npu.pipe_barrier()
    tiles = []
    with npu.repeats(BC):                                 # Mul(akk[col], akk[col], bb, mask 8, 16 repeats)
        for col in range(0, BC, 8):
            tiles.append(Akk_raw[..., col:col + 8] * bb)
            if v.barriers == "b0":
                npu.pipe_barrier()
    if v.barriers != "b0":
        npu.pipe_barrier()
    akk = torch.cat(tiles, -1)
    zero = npu.dup(0.0, torch.zeros(H, 1, 8))
    npu.pipe_barrier()
    ones = torch.ones(H, BC, BC)
    masks = npu.scalar("BuildCausalSelectMasks: a 64-bit mask a row, two masks", lambda: torch.stack(
        [ones.tril().bool(), ones.tril(-1).bool()]), accesses=2 * BC, matrices=H)
    incl, strict = masks[0], masks[1]
    zeros = zero[..., :1].expand(H, BC, BC)              # Select's src1: the zero block, stride 0
    with npu.repeats(BC):                                 # Select(mask 16, 16 repeats)
        aqk = torch.where(incl, aqk, zeros)
        akk = torch.where(strict, akk, zeros)
    npu.pipe_barrier()
    akk = akk * -1.0                                     # Ai = -L
    npu.pipe_barrier()
    return aqk, akk


def fold_rows(npu, prod):
    """Add-fold over the rows of [H, 16, 16]: Add(prod, prod, prod[half rows]) 16 -> 8 -> 4 -> 2 -> 1, a
    barrier after each (contiguous: 128, 64, 32, 16 elements)."""
    rows = prod.shape[1]
    while rows > 1:
        rows //= 2
        prod = prod[:, :rows] + prod[:, rows:2 * rows]
        npu.pipe_barrier()
    return prod[:, 0]


def _replace_row(A, i: int, row):
    return torch.cat([A[:, :i], row[:, None], A[:, i + 1:]], 1)


def row_out(npu, A, i: int, brcb: bool = True):
    """Row i of A copied out (UB -> UB), then Brcb'd (each a[p] in a block of its own), a barrier after each:
    (the row, its Brcb)."""
    tmp = npu.ub_copy(A[:, i])
    npu.pipe_barrier()
    if not brcb:
        return tmp, None
    ab = npu.brcb(tmp)
    npu.pipe_barrier()
    return tmp, ab


def row_back(npu, A, i: int, tmp, acc):
    """a += acc, copied back into row i of A, a barrier after each."""
    tmp = tmp + acc
    npu.pipe_barrier()
    A = _replace_row(A, i, npu.ub_copy(tmp))
    npu.pipe_barrier()
    return A


def fwdsub_rowmul(npu, A):
    """FwdSub P1 (4094141d, shipped): row i: copy it out, Brcb it, prod[p, c] = A[p, c] a[p] as two 8-wide
    column tiles issued a row a repeat (one barrier after both), the Add-fold, a += sum, copy it back."""
    for i in range(2, BC):
        tmp, ab = row_out(npu, A, i)
        with npu.repeats(BC):
            tiles = [A[..., col:col + 8] * ab for col in range(0, BC, 8)]
        npu.pipe_barrier()
        acc = npu.ub_copy(fold_rows(npu, torch.cat(tiles, -1)))
        npu.pipe_barrier()
        A = row_back(npu, A, i, tmp, acc)
    return A


def _diag_plus_identity(npu, A):
    """+I on the diagonal: 16 GetValue and 16 SetValue by the scalar unit (after a barrier: the V -> S wait
    drains nothing more); the block as stored, [H, 256] fp32."""
    H = A.shape[0]
    return npu.scalar("diagonal +I: GetValue, SetValue", lambda a: (a + torch.eye(BC)).reshape(H, BC * BC), A,
                      accesses=2 * BC, matrices=H)


def _post(npu, v: Version, fwdsub, Aqk_raw, Akk_raw, beta, scale, qk_type):
    H = beta.shape[-2]
    with npu.vec("post"):
        aqk, A = _tril(npu, v, Aqk_raw, Akk_raw, beta[0], scale)
        Akkd = _diag_plus_identity(npu, fwdsub(npu, A))
        Aqk = npu.cast(aqk.reshape(H * BC, BC), qk_type)  # its 16 rows of 32 B lie BT apart in GM
        npu.pipe_barrier()
    return Aqk, Akkd


def window_program(v: Version, fwdsub):
    """One window: a pair of heads (one for the lockstep builds) of one sub-chunk, Prep -> Cube -> Post."""
    @phase_program(f"fla_npu.intra_sub_chunk.{v.step}", returns=("Aqk", "Akkd"), barriers="explicit")
    def intra_sub_chunk(npu, q, k, g, g_ref, beta, scale, qk_type):
        Qg, W, Kg = _prep(npu, v, q, k, g, g_ref, qk_type)
        Aqk_raw, Akk_raw = _score(npu, Qg, W, Kg)
        return _post(npu, v, fwdsub, Aqk_raw, Akk_raw, beta, scale, qk_type)
    return intra_sub_chunk


# ----- the kernel: its work over the chip, its recording --------------------------------------------------------

STORED = {"stored": "Aqk_raw=fp32,Akk_raw=fp32,Akkd=fp32"}


@dataclass(frozen=True)
class IntraSubChunk:
    """A build as a measured kernel: its design (one pass, a window an item), its items and its recording."""
    version: Version
    design: Design

    @property
    def heads(self) -> int:
        return 2 if self.version.window else 1

    def check(self, d_k: int, chunk: int, grouped: bool) -> None:
        """ValueError where the kernel's tiling refuses the shape (K = 128, BT 32, 64 or 128) or the model does
        not follow it (grouped q/k heads)."""
        if d_k != 128 or chunk not in (32, 64, 128) or grouped:
            raise ValueError(f"ChunkKdaFwdIntraSubChunk takes K = 128, chunk 32, 64 or 128 and one q/k head per "
                             f"value head; got K = {d_k}, chunk {chunk}{', grouped q/k heads' if grouped else ''}")

    def items(self, batch: int, seqlens: tuple[int, ...], heads: int, chunk: int) -> list[int]:
        """Windows of each task, tasks in the order the cores take them (task mod 24): Vec2Win one task a
        (sequence, chunk) with NC x ceil(H / 2) windows; lockstep one task a (sequence, head, chunk) with NC."""
        nc = chunk // BC
        chunks = [math.ceil(n / chunk) for n in seqlens * batch]
        if self.version.window:
            return [nc * math.ceil(heads / 2) for n in chunks for _ in range(n)]
        return [nc for n in chunks for _ in range(n * heads)]

    def task_bound(self, batch: int, seqlens: tuple[int, ...], heads: int, chunk: int) -> tuple[int, int]:
        """(tasks, windows of the largest task) as items() lays them out, worked out without listing them."""
        nc = chunk // BC
        chunks = batch * sum(math.ceil(n / chunk) for n in seqlens)
        if self.version.window:
            return chunks, nc * math.ceil(heads / 2)
        return chunks * heads, nc

    def record(self, dtype: str, d_k: int) -> list:
        precision = design_precision(self.design, Precision(dtype, {}))
        gen = torch.Generator().manual_seed(0)
        H = self.heads

        def rnd(*shape):
            return torch.randn(1, 1, *shape, generator=gen)
        g = -torch.rand(1, 1, H, BC, d_k, generator=gen).cumsum(-2)
        pool = {"q": rnd(H, BC * d_k), "k": rnd(H, BC * d_k), "g": g.reshape(1, 1, H, BC * d_k),
                "g_ref": g[..., BC // 2, :], "beta": torch.rand(1, 1, H, BC, generator=gen),
                "scale": d_k ** -0.5, "qk_type": dtype}
        types = {name: dtype for name in ("q", "k", "g", "g_ref", "beta")}
        graphs, _ = record_passes(self.design, pool, None, precision, types, {"chunk_size": BC, "d_k": d_k})
        return graphs


def kernel(v: Version, fwdsub) -> IntraSubChunk:
    design = Design(f"fla_npu_intra_{v.step}", (
        Pass("intra_sub_chunk", window_program(v, fwdsub), SEQUENTIAL, slots=2 if v.window else 1,
             vec_units=2 if v.window else 1, buffers=1),
    ), description=f"flash-linear-attention-npu ChunkKdaFwdIntraSubChunk, {v.step} ({v.commit})", notes=STORED)
    return IntraSubChunk(v, design)


SHIPPED = kernel(Version("shipped", "827f776", barriers="vc"), fwdsub_rowmul)
