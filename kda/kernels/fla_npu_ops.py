"""The helper functions flash-linear-attention-npu's KDA forward kernels share (common/kda/
chunk_kda_fwd_kernel.hpp), as recorded ops: the clamps, Duplicate, LoadAsFloatRow, the e^(x ln 2) of a row
difference, the row pairs the two AIVs issue as one instruction, a Catlass operand block, and the done flag's
reverse flag."""
from __future__ import annotations

import math

import torch

LN2 = math.log(2.0)
EXP_BOUND = 80.0 * LN2          # KDA_EXP2_CLAMP * LN2: ClampExpInput
FP16_MAX = 65504.0              # ClampFp32ToOutputType


def clamp_exp(npu, x):
    """ClampExpInput: Mins, barrier, Maxs, barrier."""
    x = x.clamp_max(EXP_BOUND)
    npu.pipe_barrier()
    x = x.clamp_min(-EXP_BOUND)
    npu.pipe_barrier()
    return x


def clamp_out(npu, x, cast: bool = True):
    """ClampFp32ToOutputType (fp16): Mins, barrier, Maxs, barrier; then (`cast`) the Cast down, a barrier
    (the Cast itself rides on the 16-bit store)."""
    x = x.clamp_max(FP16_MAX)
    npu.pipe_barrier()
    x = x.clamp_min(-FP16_MAX)
    npu.pipe_barrier(2 if cast else 1)
    return x


def dup(npu, shape, value: float, barrier: bool = True):
    """Duplicate (FillLocalFloat, BuildPrefixMask): one instruction over `shape`, a barrier after it."""
    out = npu.dup(value, torch.zeros(shape))
    if barrier:
        npu.pipe_barrier()
    return out


def pair(x, i: int, half: int):
    """Row i of AIV0's rows and row i of AIV1's (half + i): one instruction on each AIV."""
    return x[..., [i, half + i], :]


def rows_back(pairs: list, half: int):
    """Row pairs (AIV0 row i, AIV1 row i) back in row order: a view, no instruction."""
    stacked = torch.stack(pairs, -3)                     # [..., half, 2, D]
    return stacked.transpose(-3, -2).reshape(*stacked.shape[:-3], 2 * half, stacked.shape[-1])


def minus(a, b):
    """Sub of two rows of the same length (a reference row is read by every instruction, not expanded)."""
    return a.expand_as(b) - b if a.numel() < b.numel() else a - b.expand_as(a)


def exp2_of(npu, diffs):
    """e^(x ln 2) of the row differences: Muls LN2, ClampExpInput, Exp, a barrier after each."""
    x = diffs * LN2
    npu.pipe_barrier()
    x = clamp_exp(npu, x).exp()
    npu.pipe_barrier()
    return x


def load_row(npu, t, index):
    """LoadAsFloatRow of an fp32 row: DataCopy, the Adds copy, two barriers (hpp:501)."""
    out = npu.load(t, index) + 0.0
    npu.pipe_barrier(2)
    return out


def block(npu, t, r: int, c: int, size: int):
    """One Catlass operand: a size x size block of a C x C matrix in GM (the solve scratch, the Aqk/Akk
    workspace: its rows C apart)."""
    return npu.load(t, (..., slice(r, r + size), slice(c, c + size)), strided=True)


def reverse_flag(npu):
    """The done flag's reverse flag (Catlass WithReverse, depth 1): the AIVs set it as they pass their wait
    (an empty Vector phase marks it), and the AIC, having set done, waits for it before its next item."""
    with npu.vec("passed"):
        pass
    npu.sync(after="passed", next_item=True)
