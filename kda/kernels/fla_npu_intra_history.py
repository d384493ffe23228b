"""The earlier builds of flash-linear-attention-npu's ChunkKdaFwdIntraSubChunk (pull request 244), each from
the source at its commit, beside the shipped one (kda/kernels/fla_npu_intra.py). What changes between them
(ITERATION_LOG.md names the steps; every row of the pull request's history whose commit is checked out):

    B0  bd82ded  lockstep: one task a (sequence, head, chunk), task mod 24 its core; its four sub-chunks one
                 after the other, Prep -> Cube -> Post with nothing in flight, on AIV0 alone (AIV1 only
                 answers the flags). Prep's barrier set before V-A (16 walls); forward substitution on the
                 scalar unit: for i = 2 .. 15, i + 16 accesses to copy row i out, i (2 + 2i) to update it
                 (a multiply-add of two GetValue per term), i + 16 to copy it back; 16 + 16 for +I: 3434 a
                 sub-chunk.
    B1  e279e78  as B0, the substitution vectorised: for each i a UB copy and a Dup, then for p < i one
                 GetValue of a[p] and a Muls and an Add of 16 (a barrier after each): 4 + 2i walls a row.
    B2  e822a6b  as B0, the substitution as Brcb -> a [16, 16] broadcast tile built by 32 UB copies of 8
                 floats -> one Mul -> the Add-fold: 11 walls a row.
    P1  cd9dd85  Vec2Win (the shipped work layout: a window of two heads on the two AIVs, two windows in
                 flight, one task a chunk), B2's substitution, the barriers before V-A; Cube path A with the
                 Akk FixPipe drained in place (USE_SCORE_FIX_MTE2_DBUF = 0: the P1 measurement)
    C1  cd9dd85  P1 with the Akk FixPipe overlapping the next head's loads (the commit's default)
    V-A 5a0327f  barriers merged: Prep 15 walls, the tril's scale and Brcb and its two column Muls sharing one
                 each. The commit defaults USE_FWDSUB_SLIM to 1, but the V-B notes (081be05) record that path
                 hanging under msprof and the V-A + V-C simulator profile keeps the UB copies: the timed build
                 ran B2's substitution, modelled here.
    V-C 081be05  g_ref loaded with q, k, g (one wait, its cast with theirs: Prep 14 walls), beta with the
                 scores
    shipped 827f776 (timed at 4094141): the row-broadcast Mul substitution, kda/kernels/fla_npu_intra.py

Cube differences between builds (the W load beside the first matmul, FixPipe overlaps) are not modelled:
the model's Cube phase is the same two matmuls a head in every build. Not modelled as builds: bce0e7a and
f0028bc (no timing: the first timing is B0's), C0 (ab940ec: timed only as host wall-clock, which the model
does not time), V-B and the P2/P3 experiments (never timed).
"""
from __future__ import annotations

import torch

from kda.kernels.fla_npu_intra import BC, SHIPPED, IntraSubChunk, Version, fold_rows, kernel, row_back, row_out


def fwdsub_scalar(npu, A):
    """B0: the whole substitution on the scalar unit (after the negation's barrier: the V -> S wait drains
    nothing more); its accesses counted from the source's three loops."""
    H = A.shape[0]
    accesses = sum((i + BC) + i * (2 + 2 * i) + (i + BC) for i in range(2, BC))
    eye = torch.eye(BC)

    def solve(a):                 # a = -L: returns (I + L)^-1 - I, the diagonal added after
        inv = torch.linalg.solve_triangular(eye - a, eye.expand_as(a), upper=False, unitriangular=True)
        return inv - eye
    return npu.scalar("ForwardSub: GetValue / SetValue loops", solve, A, accesses=accesses, matrices=H)


def fwdsub_muls(npu, A):
    """B1: row i copied out, an accumulator Dup'd, then a[p] read by GetValue and Muls(row p, a[p]) + Add
    for every p < i, a barrier after each; a += acc; copied back."""
    for i in range(2, BC):
        tmp, _ = row_out(npu, A, i, brcb=False)
        acc = npu.dup(0.0, tmp)
        npu.pipe_barrier()
        for p in range(i):
            ap = npu.scalar("GetValue a[p]", lambda t, p=p: t[:, p:p + 1] * 1.0, tmp, accesses=1,
                            matrices=tmp.shape[0])
            work = A[:, p] * ap
            npu.pipe_barrier()
            acc = acc + work
            npu.pipe_barrier()
        A = row_back(npu, A, i, tmp, acc)
    return A


def fwdsub_brcd(npu, A):
    """B2 .. V-C: row i copied out and Brcb'd, a [16, 16] tile of a[p] built by 32 UB copies of 8 floats (one
    barrier after them), one Mul of the whole tile, the Add-fold, a += sum, copied back."""
    for i in range(2, BC):
        tmp, ab = row_out(npu, A, i)
        brcd = torch.stack([torch.cat([npu.ub_copy(ab[:, p]), npu.ub_copy(ab[:, p])], -1) for p in range(BC)], 1)
        npu.pipe_barrier()
        prod = A * brcd
        npu.pipe_barrier()
        acc = npu.ub_copy(fold_rows(npu, prod))
        npu.pipe_barrier()
        A = row_back(npu, A, i, tmp, acc)
    return A


def _lockstep(step: str, commit: str, fwdsub) -> IntraSubChunk:
    return kernel(Version(step, commit, window=False, barriers="b0"), fwdsub)


INTRA_SUB_CHUNK = {
    "b0": _lockstep("b0", "bd82ded", fwdsub_scalar),
    "b1": _lockstep("b1", "e279e78", fwdsub_muls),
    "b2": _lockstep("b2", "e822a6b", fwdsub_brcd),
    "p1": kernel(Version("p1", "cd9dd85", barriers="b0"), fwdsub_brcd),
    "c1": kernel(Version("c1", "cd9dd85", barriers="b0"), fwdsub_brcd),
    "va": kernel(Version("va", "5a0327f", barriers="va"), fwdsub_brcd),
    "vc": kernel(Version("vc", "081be05", barriers="vc"), fwdsub_brcd),
    "shipped": SHIPPED,
}
