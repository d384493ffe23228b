"""A sequence cut into chunks: flash-linear-attention's [B, T, H, ...] layout as the phase programs' chunks of
one head each, [B*H, C, ...] in the compute type, the last chunk zero-padded to C tokens (zero k, beta and g:
no update and no decay, so the padding changes nothing). A chunk at a time (the reference path), a block of
chunks in one conversion (the fast path), or the whole sequence (the passes of a design of several)."""
from __future__ import annotations

import torch

from npusim import Precision


def chunk_of(x: torch.Tensor, lo: int, hi: int, C: int, dtype: torch.dtype, round_to=None) -> torch.Tensor:
    """Tokens lo:hi of x [B, T, H, ...] as [B*H, C, ...] in `dtype`, zero-padded to C tokens at the end of
    the sequence (zero k, beta and g: no update and no decay, so the padding changes nothing). Contiguous, as
    `cut_block`'s chunks are: on CUDA, cuBLAS picks its kernel by the layout, and with it the rounding."""
    part = x[:, lo:hi].transpose(1, 2)
    part = part.reshape(-1, hi - lo, *x.shape[3:]).to(dtype).contiguous()
    if round_to is not None:
        part = round_to(part)
    if hi - lo < C:
        part = torch.cat([part, part.new_zeros(part.shape[0], C - (hi - lo), *part.shape[2:])], dim=1)
    return part


def cut_block(x: torch.Tensor, first: int, n: int, C: int, T: int, dtype: torch.dtype, round_to=None) -> torch.Tensor:
    """Chunks first..first+n-1 of x [B, T, H, ...] as [n, B*H, C, ...] in `dtype`, on x's device, in one
    conversion: the same values `chunk_of` gives chunk by chunk (the tail zero-padded to C tokens)."""
    B, H, rest = x.shape[0], x.shape[2], tuple(x.shape[3:])
    lo, hi = first * C, min(T, (first + n) * C)
    buf = torch.empty(n, B, H, C, *rest, dtype=dtype, device=x.device)
    full = (hi - lo) // C
    dims = (1, 0, 3, 2) + tuple(range(4, 4 + len(rest)))
    if full:
        buf[:full].copy_(x[:, lo:lo + full * C].unflatten(1, (full, C)).permute(dims))
    tail = hi - lo - full * C
    if tail:
        buf[full].zero_()
        buf[full, :, :, :tail].copy_(x[:, lo + full * C:hi].permute(0, 2, 1, *range(3, 3 + len(rest))))
    buf = buf.view(n, B * H, C, *rest)
    if round_to is not None:
        buf.copy_(buf.to(round_to))            # GM holds q, k, v in the transfer type: the same bits as round()
    return buf


def gm_round(x: torch.Tensor, precision: Precision) -> torch.dtype | None:
    """The type x is rounded through to hold it in GM in the transfer type; None where that changes nothing
    (x already in it, or the compute type no wider)."""
    from npusim.record.replay import rounding_target
    target = rounding_target(precision, precision.transfer, precision.compute)
    return None if target is None or x.dtype == target else target


def chunked(x: torch.Tensor, C: int, dtype: torch.dtype, round_to=None) -> torch.Tensor:
    """x [B, T, H, ...] as [B*H, NT, C, ...] in `dtype`, zero-padded to NT x C tokens."""
    B, T, H = x.shape[:3]
    NT = -(-T // C)
    x = x.to(dtype)
    if round_to is not None:
        x = round_to(x)
    if NT * C > T:
        x = torch.cat([x, x.new_zeros(B, NT * C - T, *x.shape[2:])], 1)
    x = x.reshape(B, NT, C, H, *x.shape[3:]).movedim(3, 1)
    return x.reshape(B * H, NT, C, *x.shape[4:])
