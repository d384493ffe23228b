"""Prepare's solve, the heart of flash-linear-attention-npu's ChunkKdaFwdPrepare (kda/kernels/fla_npu.py):
the solve's inputs on the AIVs (PrepareAqkAkkSolveInputRows: beta, the causal Selects, I - L row by row),
then (I + L)^-1 on the AIC by 16 x 16 diagonal blocks (ComputeAkkInverseMchFull: L_ii^2, the rounds of
X_ii Y_ii with the AIVs adding each round into X's diagonal, then the 32 and 64 merges of
ComputeAkkMergeCube), every Cube phase one Catlass call."""
from __future__ import annotations

import numpy as np
import torch

from kda.kernels.fla_npu_ops import block, dup, load_row, pair, rows_back

DIAG = 16                       # KDA_SOLVE_DIAG_BT: the diagonal blocks of the solve
MCH_ITERS = 3                   # KDA_SOLVE_DIAG_MCH_ITERS


def solve_input(npu, beta, aqk: list, akk: list, C: int):
    """PrepareAqkAkkSolveInputRows: C / 2 rows on each AIV. Returns (L, X, masked Aqk)."""
    half = C // 2
    def wide(blocks):
        return torch.cat([torch.cat([blk, torch.zeros(*blk.shape[:-1], C - blk.shape[-1])], -1)
                                         for blk in blocks], -2)
    causal = torch.as_tensor(np.tril(np.ones((C, C), dtype=bool)))           # the masks the scalar loop writes
    strict = torch.as_tensor(np.tril(np.ones((C, C), dtype=bool), -1))
    with npu.vec("solve_in"):
        [dup(npu, (C, C), 0.0), dup(npu, (C, C), 0.0), dup(npu, (C,), 0.0)]   # FillLocalFloat aqk, akk, beta
        bs = load_row(npu, beta, (..., slice(None)))                      # LoadAsFloatRow
        Aqk, Akk = wide(aqk), wide(akk)                                    # DataCopyPad of the rows (fp32)
        bb = npu.brcb(bs)                                                  # Brcb
        npu.pipe_barrier()
        cols = []
        with npu.repeats(half):                                            # Mul(mask 8, repeat rows) x C / 8
            for c in range(0, C, 8):
                cols.append(Akk[..., :, c:c + 8] * bb)
                npu.pipe_barrier()
        dup(npu, (2, 8), 0.0)                                             # SelectCausalRows: the zero block
        masks = npu.scalar("BuildCausalSelectMasks: two 64-bit masks a row", lambda: torch.stack(
            [causal, strict]), accesses=2 * half, matrices=2)              # each AIV its rows' masks
        Aqk_m = torch.where(masks[0], Aqk, 0.0)                            # Select, a row a repeat
        L = torch.where(masks[1], torch.cat(cols, -1), 0.0)
        npu.pipe_barrier(2)                                                # and WaitFlag<V_S>
        neg = L * -1.0                                                     # Muls
        npu.pipe_barrier()
        xs = []
        for i in range(half):                                              # + I, one row a round on each AIV
            m = dup(npu, (2, C), 0.0, barrier=False)                      # BuildPrefixMask(row + 1)
            dup(npu, (half + 2 * i + 2,), 1.0)
            o = dup(npu, (2, C), 0.0, barrier=not i)                      # BuildPrefixMask(row)
            dup(npu, (half + 2 * i,), 1.0) if i else None
            mask = m - o                                                   # Sub, Add
            npu.pipe_barrier()
            xs.append(pair(neg, i, half) + mask)
            npu.pipe_barrier()
        X = rows_back(xs, half)
    npu.spill(Aqk_m, L, X)                               # aqk and L (akk) back to the fp32 workspace, X
    npu.sync()                                           # ready: RunAicAfterBothAivReady
    return L, X, Aqk_m


def solve(npu, L, X, C: int):
    """ComputeAkkInverseMchFull with the AIVs' AddSolveTmpToXDiagRows rounds; returns (the inverse with its
    diagonal blocks, the last merged block). Every Cube phase is one CubeGemmSolveSub."""
    n, half = C // DIAG, C // 2
    def d(i):
        return i * DIAG
    def diag(r):
        return slice((r // DIAG) * DIAG, (r // DIAG + 1) * DIAG)
    Yl, T, Xs = [], [], [X]                              # Y^(2^it) blocks, each round's X_ii Y_ii, X
    for i in range(n):
        with npu.cube(f"y{i}"):                          # L_ii L_ii
            Yl.append(block(npu, L, d(i), d(i), DIAG) @ block(npu, L, d(i), d(i), DIAG))
        npu.spill(Yl[i])
    for it in range(MCH_ITERS):
        for i in range(n):
            with npu.cube(f"xy{it}_{i}"):                # tmp_ii = X_ii Y_ii
                T.append(block(npu, Xs[it], d(i), d(i), DIAG) @ block(npu, Yl[it * n + i], 0, 0, DIAG))
            npu.spill(T[it * n + i])
        npu.sync()                                       # done: the AIVs add the round into X's diagonal
        if it + 1 < MCH_ITERS:                           # the AIV's WaitFlagWithReverse sets the reverse flag
            with npu.vec(f"rev{it}"):                    # as it passes (depth 1): the AIC waits for it before
                pass                                     # it squares Y
        with npu.vec(f"add{it}"):                        # x rows and tmp rows loaded, one 16-wide Add a row
            x = Xs[it]
            tmp = torch.cat([torch.cat([T[it * n + i]] * n, -1) for i in range(n)], -2)
            sums = []
            for r in range(half):
                sums.append(pair(x, r, half)[..., diag(r)] + pair(tmp, r, half)[..., diag(r)])
                npu.pipe_barrier()
            Xs.append(torch.cat([rows_back(sums, half)] * n, -1))
        npu.spill(Xs[it + 1])                            # x back to the solve scratch (the last: also to akk)
        if it + 1 < MCH_ITERS:
            npu.sync(after=f"rev{it}")                   # the reverse flag
            for i in range(n):
                with npu.cube(f"yy{it}_{i}"):            # Y_ii^2 while the AIVs add
                    Y = Yl[it * n + i]
                    Yl.append(block(npu, Y, 0, 0, DIAG) @ block(npu, Y, 0, 0, DIAG))
                npu.spill(Yl[(it + 1) * n + i])
        npu.sync(after=f"add{it}")                       # ready
    Ai, merged = Xs[-1], []
    size = 2 * DIAG
    while size <= C:                                     # ComputeAkkMergeCube
        h = size // 2
        for b in range(0, C, size):
            lo, k = b + h, len(merged)
            with npu.cube(f"m{size}_{b}a"):              # tmp = Ai[lo, lo] X[lo, b]
                merged.append(block(npu, Ai, lo, lo, h) @ block(npu, Ai, lo, b, h))
            npu.spill(merged[k])
            with npu.cube(f"m{size}_{b}b"):              # Ai[lo, b] = tmp Ai[b, b]
                merged.append(block(npu, merged[k], 0, 0, h) @ block(npu, Ai, b, b, h))
            if size < C:
                npu.spill(merged[k + 1])
        size *= 2
    npu.sync(merged[-1])                                 # done: the AIVs read the inverse
    return Ai, merged[-1]
