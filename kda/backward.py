"""The backward driver: runs a backward phase program on the simulated NPU, from the last chunk to the first.

    bx = execute_backward(q, k, v, g, beta, None, h0, do, dht, version="v4")
    bx.grads["dq"], ..., bx.grads["dh0"]

A backward chunk needs the forward state at its start. `states="recompute"` (the default, as FLA does)
runs the forward program again at the start of the backward pass and keeps the chunk-start states in GM
for the duration of this layer's backward; `states="store"` means the forward pass wrote them and kept
them until the backward (the numbers are the same; the cost differs: `state_costs`). Either way the
intra-chunk intermediates (A, M, the pseudo-values) are recomputed in the backward program from q, k, v,
g, beta and the state.

The Executor records the backward program once on a probe (one sequence, one chunk) and then steps it
over every chunk in reverse order, carrying dS (the gradient of the state at a chunk's end) as its state.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from npusim import Executor, Nonfinite, PhaseGraph, Precision
from npusim.precision import itemsize

from .api import Execution, KdaInputError, _blocks, _check, _chunk_of, _precision, execute
from .programs import get_program
from .programs.v4_bwd import kda_chunk_v4_bwd

BACKWARD_PROGRAMS = {"v4": kda_chunk_v4_bwd}
STATES = ("recompute", "store")
GRAD_NAMES = {"dQ": "dq", "dK": "dk", "dV": "dv", "dg": "dg", "dbeta": "dbeta"}


def get_backward_program(version: str):
    if version not in BACKWARD_PROGRAMS:
        raise KdaInputError(f"design {version!r} has no backward program: backward runs for "
                            f"{', '.join(BACKWARD_PROGRAMS)}")
    return BACKWARD_PROGRAMS[version]


@dataclass
class BackwardExecution:
    grads: dict[str, torch.Tensor] | None     # dq, dk, dv, dg, dbeta, dh0 (compute type); None: no numerics
    graph: PhaseGraph                         # the backward program's per-chunk graph
    forward: Execution                        # the forward run the states came from
    nonfinite: Nonfinite | None               # where inf/NaN first appeared in the backward walk
    precision: Precision
    chunks: int
    chunk_size: int
    states: str = "recompute"
    do: torch.Tensor | None = None            # the output gradient as GM held it
    dht: torch.Tensor | None = None


def check_grad_outputs(do, dht, B: int, T: int, H: int, K: int, V: int) -> None:
    """do [B, T, H, V] and dht [B, H, K, V] (or None): shapes and finiteness, one line each."""
    for name, x, shape in (("do", do, [B, T, H, V]), ("dht", dht, [B, H, K, V])):
        if x is None:
            if name == "do":
                raise KdaInputError("do (the output's gradient) is missing")
            continue
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise KdaInputError(f"{name} must be a floating-point torch.Tensor")
        if list(x.shape) != shape:
            raise KdaInputError(f"{name} must have shape {shape} to match the output, got {list(x.shape)}")
        if not all(bool(torch.isfinite(b).all()) for b in _blocks(x)):
            raise KdaInputError(f"{name} contains NaN or inf")


def execute_backward(q, k, v, g, beta, scale=None, initial_state=None, do=None, dht=None, *,
                     version: str = "v4", chunk_size: int = 64, transfer_dtype=None,
                     precision: Precision | None = None, compute_dtype: torch.dtype = torch.float32,
                     states: str = "recompute", progress=None) -> BackwardExecution:
    """Gradients of <o, do> + <S_T, dht> computed by the backward phase program; see the module docstring."""
    B, T, H, K, V = _check(q, k, v, g, beta, initial_state, chunk_size)
    check_grad_outputs(do, dht, B, T, H, K, V)
    if states not in STATES:
        raise KdaInputError(f"states must be one of {', '.join(STATES)}, got {states!r}")
    bprog = get_backward_program(version)
    fprog = get_program(bprog.notes.get("forward", version))
    precision = _precision(q, transfer_dtype, precision, compute_dtype, fprog)
    cd = precision.compute
    scale = K ** -0.5 if scale is None else scale
    C = chunk_size
    NT = -(-T // C)

    kept: list[torch.Tensor] = []        # the chunk-start states, as the state hand-off kept them
    fwd = execute(q, k, v, g, beta, scale, initial_state, chunk_size=C, precision=precision, program=fprog,
                  on_state=lambda t, S: kept.append(S))
    stored = lambda x: precision.round(x, precision.transfer)

    def chunk(t: int, probe: bool = False) -> dict:
        lo, hi = t * C, min(T, (t + 1) * C)
        src = [x[:1, :, :1] if probe else x for x in (q, k, v, g, beta, do)]
        Q, K_, V_ = (_chunk_of(x, lo, hi, C, cd, stored) for x in src[:3])
        S = kept[t][:1] if probe else kept[t]
        return {"Q": Q, "K": K_, "V": V_, "g": _chunk_of(src[3], lo, hi, C, cd),
                "beta": _chunk_of(src[4], lo, hi, C, cd), "S": S, "dO": _chunk_of(src[5], lo, hi, C, cd, stored),
                "scale": scale}

    dS = (torch.zeros(B * H, K, V, dtype=cd) if dht is None
          else precision.round(dht.to(cd), precision.state_type).reshape(B * H, K, V))
    ex = Executor(bprog, precision, input_types={"g": "fp32", "beta": "fp32", "S": precision.state_type})
    graph = ex.record(chunk(NT - 1, probe=True), dS[:1].clone(), shapes={"chunk_size": C, "d_k": K, "d_v": V})
    out = {"dq": torch.empty(B, T, H, K, dtype=cd), "dk": torch.empty(B, T, H, K, dtype=cd),
           "dv": torch.empty(B, T, H, V, dtype=cd), "dg": torch.empty(B, T, H, K, dtype=cd),
           "dbeta": torch.empty(B, T, H, dtype=cd)}
    with torch.no_grad():
        for step, t in enumerate(reversed(range(NT))):
            result, dS = ex.step(chunk(t), dS, t)
            lo, hi = t * C, min(T, (t + 1) * C)
            for name, key in GRAD_NAMES.items():
                x = result[name][:, :hi - lo]
                out[key][:, lo:hi] = x.reshape(B, H, hi - lo, *x.shape[2:]).transpose(1, 2)
            if progress is not None:
                progress(step + 1, NT)
    out["dh0"] = dS.reshape(B, H, K, V)
    do_stored = precision.round(do.to(cd), precision.transfer)
    dht_stored = None if dht is None else precision.round(dht.to(cd), precision.state_type)
    return BackwardExecution(out, graph, fwd, ex.first_nonfinite, precision, NT, C, states, do_stored, dht_stored)


def record_backward_graph(version: str, *, chunk_size: int, d_k: int, d_v: int, precision: Precision) -> PhaseGraph:
    """The backward program's per-chunk graph recorded on random inputs (timing only)."""
    gen = torch.Generator().manual_seed(0)
    cd = precision.compute
    rnd = lambda *shape: torch.randn(*shape, generator=gen, dtype=cd)
    C = chunk_size
    norm = torch.nn.functional.normalize
    inputs = {"Q": norm(rnd(1, C, d_k), dim=-1), "K": norm(rnd(1, C, d_k), dim=-1), "V": rnd(1, C, d_v),
              "g": torch.nn.functional.logsigmoid(rnd(1, C, d_k)), "beta": torch.sigmoid(rnd(1, C)),
              "S": rnd(1, d_k, d_v), "dO": rnd(1, C, d_v), "scale": d_k ** -0.5}
    ex = Executor(get_backward_program(version), precision,
                  input_types={"g": "fp32", "beta": "fp32", "S": precision.state_type})
    return ex.record(inputs, rnd(1, d_k, d_v), shapes={"chunk_size": C, "d_k": d_k, "d_v": d_v})


def state_costs(chunks: int, sequences: int, d_k: int, d_v: int, precision: Precision) -> dict:
    """What keeping the chunk-start states costs: bytes per chunk and sequence, and GM held per layer.
    store: the forward writes them and they live until the backward (one layer's worth per layer of the
    model); recompute: the backward reruns the forward first and they live during this layer's backward."""
    per_chunk = d_k * d_v * itemsize(precision.state_type)
    return {"bytes_per_chunk": per_chunk, "gm_bytes_per_layer": per_chunk * chunks * sequences}
