"""Pieces of Vector work that several decode programs issue the same way, each the instruction sequence an
AscendC/PTO kernel runs for it (the cost model, npusim/chip/isa.py, charges one instruction per recorded op):

    column_sum(x)      sum over the key axis of x [.., K, V]: pto-isa's TCOLSUM in binary mode, one add of
                       row pairs per level (K/2, K/4, .., 1 rows: log2 K dependent instructions)
    row_sum(x)         sum over the last axis of x [.., R, K]: halves added until one 256-byte repeat is left
                       (64 fp32), then one reduction within the repeat (pto-isa's TROWSUM, AscendC's ReduceSum)
    rows(x, like)      a per-row scalar [.., K] read against [.., K, V]: vbrcb spreads each scalar over a
                       32-byte block and the next instruction reads it with a zero stride (TROWEXPANDMUL),
                       so it is a view here, not a pass over [K, V]
    cols(x, like)      a [.., V] row read against every row of [.., K, V] (a repeat stride of 0): a view
    in_kernel(...)     FLA's in-kernel options on one token's q, k, g, beta (kda/programs/in_kernel.py's
                       formulas): l2norm of q and k, Kimi's gate from raw g, sigmoid of beta
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

QK_L2NORM, GATE, BETA_SIGMOID = "qk_l2norm", "gate", "beta_sigmoid"
OPTIONS = (QK_L2NORM, GATE, BETA_SIGMOID)
L2NORM_EPS = 1e-6             # FLA's l2norm_fwd


def column_sum(x: torch.Tensor) -> torch.Tensor:
    """x [.., K, V] -> [.., V]: pairs of rows added level by level (K a power of two, as TCOLSUM's binary
    mode needs); an odd row count adds its last row to the first."""
    while x.shape[-2] > 1:
        half = x.shape[-2] // 2
        summed = x[..., 0:2 * half:2, :] + x[..., 1:2 * half:2, :]
        if x.shape[-2] % 2:
            summed[..., :1, :] = summed[..., :1, :] + x[..., -1:, :]
        x = summed
    return x[..., 0, :]


def row_sum(x: torch.Tensor, repeat: int = 64) -> torch.Tensor:
    """x [.., R, K] -> [.., R]: the two halves of each row added while wider than one repeat, then a row
    reduction (vcadd) of the last repeat."""
    while x.shape[-1] > repeat and x.shape[-1] % 2 == 0:
        half = x.shape[-1] // 2
        x = x[..., :half] + x[..., half:]
    return x.sum(-1)


def rows(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """x [.., K] as a [.., K, V] operand: one scalar per row (vbrcb, then a zero repeat stride)."""
    return x[..., :, None].expand(like.shape)


def cols(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """x [.., V] as a [.., K, V] operand: the same row read for every row (a repeat stride of 0)."""
    return x[..., None, :].expand(like.shape)


def in_kernel(q, k, g, beta, A_log, dt_bias, options, lower_bound=None):
    """One token's q, k [.., K], g [.., K] and beta [..] after FLA's in-kernel options (each its exact
    formula): l2norm(q), l2norm(k); g <- -exp(A_log) softplus(g + dt_bias) (or lower_bound sigmoid(exp(A_log)
    (g + dt_bias))); beta <- sigmoid(beta). A_log [.., 1], dt_bias [.., K]."""
    if QK_L2NORM in options:
        q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + L2NORM_EPS)
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + L2NORM_EPS)
    if GATE in options:
        raw = g + dt_bias
        if lower_bound is None:
            g = -A_log.exp() * F.softplus(raw)
        else:
            g = lower_bound * torch.sigmoid(A_log.exp() * raw)
    if BETA_SIGMOID in options:
        beta = torch.sigmoid(beta)
    return q, k, g, beta
