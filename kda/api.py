"""The public API, in flash-linear-attention's shape: `chunk_kda` runs a phase program on the simulated
NPU, `recurrent_kda` is the token-by-token ground truth. Both take and return FLA's layout:

    q, k [B, T, H, K]   v [B, T, H, V]   g [B, T, H, K] (log decay <= 0)   beta [B, T, H]
    initial_state / final state [B, H, K, V]

`execute` is the full driver behind `chunk_kda`: it checks the inputs, rounds them to their GM types,
cuts the sequence into chunks (padding the last one so that it changes nothing), records the phase
graph once, and computes every chunk for all B x H sequences at once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from npusim import Executor, Nonfinite, PhaseGraph, Precision
from npusim.precision import DTYPES, dtype_name

from .programs import get_program
from .reference import naive_recurrent_kda


class KdaInputError(ValueError):
    """Bad input to the KDA API; the message is one line naming what is wrong."""


@dataclass
class Execution:
    o: torch.Tensor                        # [B, T, H, V] in the compute type
    final_state: torch.Tensor              # [B, H, K, V] as kept between chunks (state type)
    graph: PhaseGraph
    nonfinite: Nonfinite | None
    precision: Precision
    chunks: int
    chunk_size: int
    inputs_as_stored: tuple                # (q, k, v, g, beta, h0) as the NPU sees them, for references


def _check(q, k, v, g, beta, initial_state, chunk_size) -> tuple[int, int, int, int, int]:
    for name, x in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
        if not isinstance(x, torch.Tensor):
            raise KdaInputError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if not x.is_floating_point():
            raise KdaInputError(f"{name} must be a floating-point tensor, got {x.dtype}")
    if q.dim() != 4:
        raise KdaInputError(f"q must be [B, T, H, K], got shape {list(q.shape)}")
    B, T, H, K = q.shape
    V = v.shape[-1] if v.dim() == 4 else -1
    expect = {"k": (k, [B, T, H, K]), "v": (v, [B, T, H, V]), "g": (g, [B, T, H, K]), "beta": (beta, [B, T, H])}
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
        if x is not None and not bool(torch.isfinite(x).all()):
            raise KdaInputError(f"{name} contains NaN or inf")
    if bool((g > 0).any()):
        raise KdaInputError(f"g is the log decay and must be <= 0 (decay alpha = exp(g) in (0, 1]); "
                            f"max g = {float(g.max()):.4g}")
    return B, T, H, K, V


def _chunked(x: torch.Tensor, C: int, T_pad: int) -> torch.Tensor:
    """[B, T, H, ...] -> [B*H, NT, C, ...], zero-padded at the end (zero g, beta, k: no decay, no update)."""
    B, T, H = x.shape[:3]
    x = x.transpose(1, 2).reshape(B * H, T, *x.shape[3:])
    if T_pad > T:
        x = torch.cat([x, x.new_zeros(B * H, T_pad - T, *x.shape[2:])], dim=1)
    return x.reshape(B * H, T_pad // C, C, *x.shape[2:])


def execute(q, k, v, g, beta, scale=None, initial_state=None, *, version: str = "v3", chunk_size: int = 64,
            transfer_dtype: str | torch.dtype | None = None, precision: Precision | None = None,
            compute_dtype: torch.dtype = torch.float32, program=None,
            progress: Callable[[int, int], None] | None = None) -> Execution:
    """Run a KDA phase program over a whole batch; see the module docstring."""
    B, T, H, K, V = _check(q, k, v, g, beta, initial_state, chunk_size)
    program = program or get_program(version)
    if precision is None:
        if transfer_dtype is None:       # as in FLA: the transfer type follows the inputs
            transfer_dtype = q.dtype if q.dtype in (torch.bfloat16, torch.float16) else torch.float32
        precision = Precision(transfer=dtype_name(transfer_dtype), compute=compute_dtype)
    cd = precision.compute
    if scale is None:
        scale = K ** -0.5
    C = chunk_size
    NT = -(-T // C)
    T_pad = NT * C

    # GM contents: q, k, v in the transfer type; g, beta and the initial state in fp32.
    stored = lambda x: precision.round(x.to(cd), precision.transfer)
    qs, ks, vs = stored(q), stored(k), stored(v)
    gs, bs = g.to(cd), beta.to(cd)
    h0 = (torch.zeros(B, H, K, V, dtype=cd) if initial_state is None
          else precision.round(initial_state.to(cd), precision.state_type))
    Qc, Kc, Vc, Gc = (_chunked(x, C, T_pad) for x in (qs, ks, vs, gs))
    Bc = _chunked(bs, C, T_pad)
    S = h0.reshape(B * H, K, V)

    ex = Executor(program, precision, input_types={"g": "fp32", "beta": "fp32"})
    chunk = lambda t, n=slice(None): {"Q": Qc[n, t], "K": Kc[n, t], "V": Vc[n, t], "g": Gc[n, t],
                                      "beta": Bc[n, t], "scale": scale}
    probe_state = S[:1].clone()
    graph = ex.record({n: (x.clone() if isinstance(x, torch.Tensor) else x) for n, x in chunk(0, slice(0, 1)).items()},
                      probe_state, shapes={"chunk_size": C, "d_k": K, "d_v": V})
    outs = []
    with torch.no_grad():
        for t in range(NT):
            result, S = ex.step(chunk(t), S, t)
            outs.append(result["O"])
            if progress is not None:
                progress(t + 1, NT)
    o = torch.stack(outs, dim=1).reshape(B, H, T_pad, V)[:, :, :T].transpose(1, 2)
    return Execution(o, S.reshape(B, H, K, V), graph, ex.first_nonfinite, precision, NT, C,
                     (qs, ks, vs, gs, bs, h0))


def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False, *,
              version: str = "v3", chunk_size: int = 64, transfer_dtype=None, precision: Precision | None = None):
    """KDA computed by running a phase program on the simulated NPU. Returns (o, final_state or None);
    o has v's dtype, the final state is fp32 (FLA's conventions)."""
    ex = execute(q, k, v, g, beta, scale, initial_state, version=version, chunk_size=chunk_size,
                 transfer_dtype=transfer_dtype, precision=precision)
    return ex.o.to(v.dtype), (ex.final_state.to(torch.float32) if output_final_state else None)


def recurrent_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False):
    """The token-by-token recurrence (FLA's naive_recurrent_kda), in fp32. Returns (o, final_state or None)."""
    _check(q, k, v, g, beta, initial_state, 1)
    o, S = naive_recurrent_kda(q, k, v, g, beta, scale, initial_state, output_final_state, dtype=torch.float32)
    return o.to(v.dtype), S
