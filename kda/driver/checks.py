"""The checks of kda.chunk_kda's inputs (execute.py): every tensor, scale and cu_seqlens, one line
(KdaInputError) naming what is wrong, before any work; and a warning naming where an output went inf/NaN."""
from __future__ import annotations

import math
import warnings

import torch


class KdaInputError(ValueError):
    """Bad input to the KDA API; the message is one line naming what is wrong."""


DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)    # what the designs compute from


def check_tensor(name: str, x, optional: bool = False) -> None:
    """One input: a dense tensor with data (not meta, sparse or nested) of a floating type the designs
    compute from; KdaInputError naming it otherwise."""
    if x is None and optional:
        return
    if not isinstance(x, torch.Tensor):
        raise KdaInputError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.is_nested or x.is_meta or x.is_sparse or x.layout != torch.strided:
        kind = "nested" if x.is_nested else f"{x.layout} tensor on {x.device}"
        raise KdaInputError(f"{name} must be a dense tensor with data, got a {kind}")
    if x.dtype not in DTYPES:
        raise KdaInputError(f"{name} must be fp16, bf16, fp32 or fp64, got {x.dtype}")


def check_inputs(q, k, v, g, beta, initial_state, chunk_size, scale=None) -> tuple[int, int, int, int, int]:
    for name, x in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta), ("initial_state", initial_state)):
        check_tensor(name, x, optional=name == "initial_state")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))
                              or not math.isfinite(float(scale) if abs(scale) < 1e308 else math.inf)):
        raise KdaInputError(f"scale must be a finite number (default d_k ** -0.5), got {scale!r:.40}")
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
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
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


SAFE = ("v4", "v6")      # the designs whose every exponent is <= 0: none overflows on strong gates


def warn_nonfinite(ex, version: str | None = None) -> None:
    """What the CLI reports as an overflow, as a warning from the API: never NaN without a word, and the
    safe designs to use instead; where inf/NaN appeared in a step but the output and final state are
    finite, it says so (a masked overflow), not that the output holds inf/NaN."""
    if ex.nonfinite is None:
        return
    held = [name for name, x in (("output", ex.o), ("final state", ex.final_state))
            if x is not None and not finite(x)]
    if held:
        what = f"the {' and the '.join(held)} hold{'s' if len(held) == 1 else ''} inf/NaN"
    else:
        what = "the output and the final state are finite (the step's inf/NaN was masked)"
    safe = [v for v in SAFE if v != version]
    advice = (f"; version={safe[-1]!r} (or {', '.join(map(repr, safe[:-1]))}) keeps every exponent <= 0 and "
              f"does not overflow on strong gates" if safe else "")
    if held and ex.precision.transfer == "fp16":
        advice += ", and transfer_dtype='bf16' or 'fp32' has fp16's range problem nowhere"
    warnings.warn(f"chunk_kda: inf/NaN first appears in {ex.nonfinite}; {what}{advice}",
                  KdaOverflowWarning, stacklevel=3)


def warn_recurrence(o: torch.Tensor, state) -> None:
    """recurrent_kda: the recurrence itself left inf/NaN (it diverges on these inputs, e.g. beta beyond 1)."""
    if not finite(o) or (state is not None and not finite(state)):
        warnings.warn("recurrent_kda: the output holds inf/NaN: the recurrence itself diverges on these inputs "
                      "(a beta outside [0, 1], or values beyond the compute type's range)", KdaOverflowWarning,
                      stacklevel=3)


def check_numerics_work(*, B: int, T: int, H: int, K: int, V: int, chunk_size: int, states: bool = False) -> None:
    """The work limits of the command line (npusim/model/limits.py) for a call: one chunk of every sequence
    held at once (each chunk padded to chunk_size), and the per-chunk states when they are kept; LimitError
    (one line) before anything is allocated."""
    from npusim.model.limits import check, check_chunk, memory_bytes
    check_chunk(chunk_size, K, V, B * H, f"chunk_size {chunk_size}: one chunk of the {B * H} sequences")
    if states:
        gib = 4 / 2**30 * B * H * -(-T // chunk_size) * K * V
        check("the intermediate states", gib, memory_bytes() / 2 / 2**30, " GiB")


def check_options(*, version, transfer_dtype, precision, chunk_size, design_given: bool = False) -> None:
    """The keyword options of the API: one line naming what is wrong (KdaInputError), before any work.
    `design_given`: a program or design is passed instead of `version`, which is then not read."""
    from npusim.record.precision import Precision, dtype_name

    from kda.programs import resolve
    if not design_given:
        try:
            resolve(version)          # a built-in name, or a file's path.py:NAME loaded and checked once
        except ValueError as err:
            raise KdaInputError(str(err)) from None
    if precision is not None and not isinstance(precision, Precision):
        raise KdaInputError(f"precision must be an npusim.Precision (or None: transfer_dtype alone), got "
                            f"{type(precision).__name__} {precision!r:.40}; for one type use transfer_dtype={precision!r:.20}")
    if transfer_dtype is not None:
        try:
            Precision(dtype_name(transfer_dtype))
        except (ValueError, TypeError, KeyError) as err:
            raise KdaInputError(f"transfer_dtype: {err}") from None
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise KdaInputError(f"chunk_size must be a positive integer, got {chunk_size!r:.40}")


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


def offsets_of(cu, name: str = "cu_seqlens") -> list[int]:
    """FLA's cu_seqlens (a list, tuple or 1-D tensor of whole token offsets) as a list of ints; one line
    naming `name` and what is wrong otherwise (a fraction is never rounded)."""
    if isinstance(cu, torch.Tensor):
        if cu.dim() != 1 or cu.is_meta or cu.is_nested or cu.layout != torch.strided:
            raise KdaInputError(f"{name} must be one row of token offsets, got shape {list(cu.shape)}"
                                f"{' (a meta tensor)' if cu.is_meta else ''}")
        cu = cu.tolist()
    def whole(x):
        return (isinstance(x, (int, float)) and not isinstance(x, bool)
                and (isinstance(x, int) or (math.isfinite(x) and x == int(x))))
    if not isinstance(cu, (list, tuple)) or not all(whole(x) for x in cu):
        raise KdaInputError(f"{name} must be whole token offsets, e.g. [0, 40, 150], got {cu!r:.80}")
    return [int(x) for x in cu]


def seqlens_of(cu_seqlens, total: int) -> list[int]:
    """Lengths from FLA's cu_seqlens [0, l0, l0 + l1, ..., total]; one line naming what is wrong otherwise."""
    cu = offsets_of(cu_seqlens)
    if len(cu) < 2 or cu[0] != 0:
        raise KdaInputError(f"cu_seqlens must start at 0 and hold at least one sequence, got {cu[:4]}")
    lengths = [b - a for a, b in zip(cu, cu[1:])]
    if any(n <= 0 for n in lengths):
        raise KdaInputError(f"cu_seqlens must increase strictly: sequence {next(i for i, n in enumerate(lengths) if n <= 0)} "
                            f"has {min(lengths)} tokens")
    if cu[-1] != total:
        raise KdaInputError(f"cu_seqlens ends at {cu[-1]}, but the inputs hold {total} tokens")
    return lengths
