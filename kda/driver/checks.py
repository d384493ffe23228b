"""The checks of kda.chunk_kda's inputs (execute.py): every tensor, scale and cu_seqlens, one line
(KdaInputError) naming what is wrong, before any work; and a warning naming where an output went inf/NaN."""
from __future__ import annotations

import math
import warnings

import torch


class KdaInputError(ValueError):
    """Bad input to the KDA API; the message is one line naming what is wrong."""


def check_inputs(q, k, v, g, beta, initial_state, chunk_size, scale=None) -> tuple[int, int, int, int, int]:
    for name, x in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta), ("initial_state", initial_state)):
        if not isinstance(x, torch.Tensor) and not (name == "initial_state" and x is None):
            raise KdaInputError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x is not None and not x.is_floating_point():
            raise KdaInputError(f"{name} must be a floating-point tensor, got {x.dtype}")
        if x is not None and (x.is_meta or x.is_sparse or x.layout != torch.strided):
            raise KdaInputError(f"{name} must be a dense tensor with data, got a {x.layout} tensor on {x.device}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))
                              or not math.isfinite(scale)):
        raise KdaInputError(f"scale must be a finite number (default d_k ** -0.5), got {scale!r}")
    for name, x in (("k", k), ("v", v), ("g", g), ("beta", beta), ("initial_state", initial_state)):
        if isinstance(x, torch.Tensor) and x.device != q.device:
            raise KdaInputError(f"{name} is on {x.device}, q on {q.device}: all inputs must be on one device")
    if q.dim() != 4:
        raise KdaInputError(f"q must be [B, T, H, K], got shape {list(q.shape)}")
    B, T, H, K = q.shape
    V = v.shape[-1] if v.dim() == 4 else -1
    expect = {"k": (k, [B, T, H, K]), "v": (v, [B, T, H, V]), "g": (g, [B, T, H, K]), "beta": (beta, [B, T, H])}
    if g.dim() == 4 and list(g.shape) == [B, T, H, 1]:
        expect["g"] = (g, [B, T, H, 1])          # GDN: one decay per head, broadcast over the key channels
    for name, (x, shape) in expect.items():
        if list(x.shape) != shape:
            raise KdaInputError(f"{name} must have shape {shape} to match q {list(q.shape)}, got {list(x.shape)}")
    if initial_state is not None and list(initial_state.shape) != [B, H, K, V]:
        raise KdaInputError(f"initial_state must have shape {[B, H, K, V]}, got {list(initial_state.shape)}")
    if T < 1 or B < 1 or H < 1 or K < 1 or V < 1:
        raise KdaInputError(f"empty input: B={B}, T={T}, H={H}, K={K}, V={V}")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise KdaInputError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    for name, x in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta), ("initial_state", initial_state)):
        if x is not None and not all(finite(b) for b in blocks(x)):
            raise KdaInputError(f"{name} contains NaN or inf")
    if any(bool(b.max() > 0) for b in blocks(g)):
        raise KdaInputError(f"g is the log decay and must be <= 0 (decay alpha = exp(g) in (0, 1]); "
                            f"max g = {float(g.max()):.4g}")
    return B, T, H, K, V


class KdaOverflowWarning(RuntimeWarning):
    """The output holds inf/NaN: the message names the tensor and phase where it first appeared."""


def warn_nonfinite(ex) -> None:
    """What the CLI reports as an overflow, as a warning from the API: never NaN without a word."""
    if ex.nonfinite is not None:
        warnings.warn(f"chunk_kda: inf/NaN first appears in {ex.nonfinite}; the output holds inf/NaN",
                      KdaOverflowWarning, stacklevel=3)


def finite(x: torch.Tensor) -> bool:
    """No inf/NaN in x. One pass: a sum is finite unless an element is inf/NaN, or the sum overflows, and
    then the element-wise test decides."""
    return bool(torch.isfinite(x.sum())) or bool(torch.isfinite(x).all())


def blocks(x: torch.Tensor, elements: int = 1 << 24):
    """x in slices along its second axis (tokens) of about `elements` each: checks of a whole layer's
    inputs then need no full-size temporaries."""
    if x.dim() < 2 or x.numel() <= elements:
        yield x
        return
    step = max(1, elements // max(1, x.numel() // x.shape[1]))
    for lo in range(0, x.shape[1], step):
        yield x[:, lo:lo + step]


def seqlens_of(cu_seqlens, total: int) -> list[int]:
    """Lengths from FLA's cu_seqlens [0, l0, l0 + l1, ..., total]; one line naming what is wrong otherwise."""
    if isinstance(cu_seqlens, torch.Tensor):
        if cu_seqlens.dim() != 1 or cu_seqlens.is_meta:
            raise KdaInputError(f"cu_seqlens must be one row of token offsets, got shape {list(cu_seqlens.shape)}"
                                f"{' (a meta tensor)' if cu_seqlens.is_meta else ''}")
        cu_seqlens = cu_seqlens.tolist()
    if not isinstance(cu_seqlens, (list, tuple)) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x == int(x)
            for x in cu_seqlens):
        raise KdaInputError(f"cu_seqlens must be whole token offsets, e.g. [0, 40, 150], got {cu_seqlens!r:.80}")
    cu = [int(x) for x in cu_seqlens]
    if len(cu) < 2 or cu[0] != 0:
        raise KdaInputError(f"cu_seqlens must start at 0 and hold at least one sequence, got {cu[:4]}")
    lengths = [b - a for a, b in zip(cu, cu[1:])]
    if any(n <= 0 for n in lengths):
        raise KdaInputError(f"cu_seqlens must increase strictly: sequence {next(i for i, n in enumerate(lengths) if n <= 0)} "
                            f"has {min(lengths)} tokens")
    if cu[-1] != total:
        raise KdaInputError(f"cu_seqlens ends at {cu[-1]}, but the inputs hold {total} tokens")
    return lengths
