"""The backward driver: runs a backward design (kda/programs/__init__.py BACKWARD) on the simulated NPU.

    bx = execute_backward(q, k, v, g, beta, None, h0, do, dht, version="v4")
    bx.grads["dq"], ..., bx.grads["dh0"]

A backward design is a list of passes (npusim/model/schedule.py). Its forward passes (v4.states, or FLA's
kernels up to fwd_h) recompute what the backward needs, each chunk's starting state H among it, and
store it in GM; its reverse pass walks the chunks from the last to the first carrying dS, the gradient
of the state at a chunk's end, starting from dht; its CHUNKS passes are independent per (sequence,
chunk). `states="store"` times the design without the recomputing passes (the forward kept what they
make); the numbers are the same, since the forward computed it the same way.

    GM pool   Q, K, V, dO [N, NT, C, d] (N = B x H sequences, NT chunks of C tokens; the transfer type),
              g, beta (fp32), then every pass's outputs, rounded to their stored type
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from npusim import Executor, Nonfinite, PhaseGraph, Precision
from npusim.model.schedule import CHUNKS, Design, Pass
from npusim.record.precision import itemsize

from kda.driver.checks import KdaInputError, blocks, check_inputs, check_numerics_work, check_options, seqlens_of
from kda.driver.chunks import chunked
from kda.driver.execute import Types, design_precision, resolve_precision
from kda.driver.multipass import pass_args, record_passes, run_items, run_sequential
from kda.programs import STATES, get_backward_design

GRADS = {"dQ": "dq", "dK": "dk", "dV": "dv", "dg": "dg", "dbeta": "dbeta"}
BATCHED: bool | None = None     # the sequential passes batched (npusim/record/batched.py); None: off the CPU


def backward_design(version: str, states: str = "recompute") -> Design:
    """get_backward_design with KdaInputError (one line) for a design without a backward program."""
    try:
        return get_backward_design(version, states)
    except ValueError as err:
        raise KdaInputError(str(err)) from None


@dataclass
class BackwardExecution:
    grads: dict[str, torch.Tensor]            # dq, dk, dv, dg, dbeta, dh0 (compute type), FLA's layout
    graphs: tuple[PhaseGraph, ...]            # every pass's per-chunk graph
    design: Design
    nonfinite: Nonfinite | None               # where inf/NaN first appeared (pass, chunk, sequence)
    precision: Precision
    chunks: int
    chunk_size: int
    states: str = "recompute"

    @property
    def graph(self) -> PhaseGraph:
        """The reverse pass's graph (the one that carries dS)."""
        rp = self.design.reverse_state_pass
        return next(g for g, p in zip(self.graphs, self.design.passes) if p is rp)


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
        if not all(bool(torch.isfinite(b).all()) for b in blocks(x)):
            raise KdaInputError(f"{name} contains NaN or inf")


def check_backward_chunk_size(chunk_size) -> None:
    """The backward's sub-chunks are 16 wide, two or more: one line otherwise (before the forward runs)."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size % 16 or chunk_size < 32:
        raise KdaInputError(f"backward: chunk_size must be a multiple of 16 and at least 32 (16-wide sub-chunks, "
                            f"two or more), got {chunk_size}")


def execute_backward(q, k, v, g, beta, scale=None, initial_state=None, do=None, dht=None, *,
                     version: str = "v4", chunk_size: int = 64, transfer_dtype=None,
                     precision: Precision | None = None, compute_dtype: torch.dtype = torch.float32,
                     states: str = "recompute", progress=None, cu_seqlens=None) -> BackwardExecution:
    """Gradients of <o, do> + <S_T, dht> computed by the backward design; see the module docstring.
    `cu_seqlens` (FLA's varlen: q is [1, total, H, K], h0 and dht one per sequence): each sequence padded
    at its end to the longest one's chunks (zero k, beta, g and do change nothing), run as a batch."""
    if cu_seqlens is not None:
        return _varlen(q, k, v, g, beta, scale, initial_state, do, dht, cu_seqlens, version=version,
                       chunk_size=chunk_size, transfer_dtype=transfer_dtype, precision=precision,
                       compute_dtype=compute_dtype, states=states, progress=progress)
    check_options(version=version, transfer_dtype=transfer_dtype, precision=precision, chunk_size=chunk_size,
                  design_given=True)                 # backward_design names an unknown version below
    B, T, H, K, V = check_inputs(q, k, v, g, beta, initial_state, chunk_size, scale)
    check_grad_outputs(do, dht, B, T, H, K, V)
    check_backward_chunk_size(chunk_size)
    check_numerics_work(B=B, T=T, H=H, K=K, V=V, chunk_size=chunk_size, states=True)
    if states not in STATES:
        raise KdaInputError(f"states must be one of {', '.join(STATES)}, got {states!r}")
    backward_design(version, states)
    design = backward_design(version, "recompute")          # numerics: everything, recomputed
    types = Types(transfer=transfer_dtype, policy=precision, compute=compute_dtype)
    precision = design_precision(design, resolve_precision(q, types, reverse_pass(design).program))
    cd, C, dev = precision.compute, chunk_size, q.device
    scale = K ** -0.5 if scale is None else scale
    def stored(x):
        return precision.round(x, precision.transfer)
    pool = {"Q": chunked(q, C, cd, stored), "K": chunked(k, C, cd, stored), "V": chunked(v, C, cd, stored),
            "g": chunked(g, C, cd), "beta": chunked(beta, C, cd), "dO": chunked(do, C, cd, stored),
            "scale": scale}
    NT = pool["Q"].shape[1]
    S = (torch.zeros(B * H, K, V, dtype=cd, device=dev) if initial_state is None
         else precision.round(initial_state.to(cd), precision.state_type).reshape(B * H, K, V))
    dS = (torch.zeros(B * H, K, V, dtype=cd, device=dev) if dht is None
          else precision.round(dht.to(cd), precision.state_type).reshape(B * H, K, V))
    graphs, executors = record_passes(design, pool, S, precision, {"g": "fp32", "beta": "fp32"},
                                      {"chunk_size": C, "d_k": K, "d_v": V})
    with torch.no_grad():
        pool, dS, nonfinite = run_backward_passes(design, executors, pool, S, dS, precision, progress)
    grads = {}
    for name, key in GRADS.items():
        x = pool[name]
        grads[key] = x.reshape(B, H, NT * C, *x.shape[3:])[:, :, :T].transpose(1, 2)
    grads["dh0"] = dS.reshape(B, H, K, V)
    return BackwardExecution(grads, tuple(graphs), backward_design(version, states), nonfinite, precision,
                             NT, C, states)


def _varlen(q, k, v, g, beta, scale, h0, do, dht, cu_seqlens, **kw) -> BackwardExecution:
    if q.dim() != 4 or q.shape[0] != 1:
        raise KdaInputError(f"with cu_seqlens, q must be [1, total tokens, H, K], got {list(q.shape)}")
    lengths = seqlens_of(cu_seqlens, q.shape[1])
    N, C = len(lengths), kw["chunk_size"]
    for name, x in (("initial_state", h0), ("dht", dht)):
        if x is not None and x.shape[0] != N:
            raise KdaInputError(f"{name} must have one state per sequence ({N}), got {x.shape[0]}")
    check_grad_outputs(do, None, 1, q.shape[1], q.shape[2], q.shape[3], v.shape[-1])
    T = -(-max(lengths) // C) * C
    starts = [sum(lengths[:i]) for i in range(N)]

    def batch(x):
        out = x.new_zeros(N, T, *x.shape[2:])
        for i, (a, n) in enumerate(zip(starts, lengths)):
            out[i, :n] = x[0, a:a + n]
        return out
    bx = execute_backward(batch(q), batch(k), batch(v), batch(g), batch(beta), scale, h0, batch(do), dht, **kw)
    for name in ("dq", "dk", "dv", "dg", "dbeta"):
        x = bx.grads[name]
        out = x.new_empty(1, q.shape[1], *x.shape[2:])
        for i, (a, n) in enumerate(zip(starts, lengths)):
            out[0, a:a + n] = x[i, :n]
        bx.grads[name] = out
    return bx


def run_backward_passes(design: Design, executors: list[Executor], pool: dict, S, dS, precision: Precision,
                        progress=None):
    """Every pass over the pool: forward state passes from S, the reverse pass from dS (the chunk axis
    flipped going in and out). Returns (pool, dS at the first chunk's start, first inf/NaN)."""
    N, NT = pool["Q"].shape[:2]
    first: Nonfinite | None = None
    # off the CPU the sequential passes batch their chunk-parallel work over blocks of chunks and walk only the
    # state's chain (npusim/record/batched.py): a GPU replays a few calls per chunk instead of the whole step
    # (on the CPU, whose caches favour a chunk at a time, the step runs whole or split over two threads)
    batched = pool["Q"].device.type != "cpu" if BATCHED is None else BATCHED
    def flip(d):
        return {a: (x.flip(1) if isinstance(x, torch.Tensor) else x) for a, x in d.items()}
    # what a later pass reads, the gradients and Q (the layout's reference) stay; the rest is freed after the
    # pass that reads it last (the Kimi layer's pool on a GPU: tens of GB)
    later = [{"Q", *GRADS, *(a for q in design.passes[i + 1:] for a in pass_args(q))}
             for i in range(len(design.passes))]
    for i, (p, ex) in enumerate(zip(design.passes, executors)):
        if p.layout == CHUNKS:
            outputs = run_items(p, ex, pool, N, NT)
        elif p.reverse:          # only what the pass reads is flipped (a copy): the Kimi layer's pool is GBs
            reads = {a: pool[a] for a in pass_args(p) if a in pool}
            outputs, dS = run_sequential(p, ex, flip(reads), dS, NT, progress, batched=batched)
            del reads
            outputs = flip(outputs)
        else:
            outputs, S = run_sequential(p, ex, pool, S, NT, None, batched=batched)
        for name, t in outputs.items():
            pool[name] = precision.round(t, precision.of(name))
        del outputs
        for name in [n for n, x in pool.items() if isinstance(x, torch.Tensor) and n not in later[i]]:
            del pool[name]
        if first is None and ex.first_nonfinite is not None:
            nf = ex.first_nonfinite
            if p.layout == CHUNKS:            # flat items: item = sequence x NT + chunk
                first = Nonfinite(nf.sequence % NT, f"{p.name}: {nf.where}", nf.tensor, nf.sequence // NT)
            else:
                first = Nonfinite(NT - 1 - nf.chunk if p.reverse else nf.chunk, f"{p.name}: {nf.where}",
                                  nf.tensor, nf.sequence)
    return pool, dS, first


def record_backward_graphs(version: str, states: str, *, chunk_size: int, d_k: int, d_v: int,
                           precision: Precision) -> tuple[list[PhaseGraph], Precision]:
    """Every pass's graph recorded on random inputs of one chunk (timing only)."""
    design = backward_design(version, states)
    full = backward_design(version, "recompute")
    precision = design_precision(full, precision)
    gen = torch.Generator().manual_seed(0)
    cd, C = precision.compute, chunk_size
    def rnd(*shape):
        return torch.randn(*shape, generator=gen, dtype=cd)
    norm = torch.nn.functional.normalize
    pool = {"Q": norm(rnd(1, 1, C, d_k), dim=-1), "K": norm(rnd(1, 1, C, d_k), dim=-1), "V": rnd(1, 1, C, d_v),
            "g": torch.nn.functional.logsigmoid(rnd(1, 1, C, d_k)), "beta": torch.sigmoid(rnd(1, 1, C)),
            "dO": rnd(1, 1, C, d_v), "scale": d_k ** -0.5}
    graphs, _ = record_passes(full, pool, rnd(1, d_k, d_v), precision, {"g": "fp32", "beta": "fp32"},
                              {"chunk_size": C, "d_k": d_k, "d_v": d_v})
    kept = {p.name for p in design.passes}
    return [g_ for g_, p in zip(graphs, full.passes) if p.name in kept], precision


def kept_bytes(version: str, states: str, chunks: int, sequences: int, d_k: int, d_v: int,
               precision: Precision, chunk_size: int) -> int:
    """GM the forward must keep until the backward under `store` (0 under recompute): per layer."""
    design = backward_design(version, states)
    names = [x for x in design.notes.get("kept", "").split(",") if x]
    shapes = {"H": d_k * d_v, "gc": chunk_size * d_k, "A_inv": chunk_size ** 2, "A_qk": chunk_size ** 2,
              "W": chunk_size * d_k, "V_new": chunk_size * d_v}
    types = {"H": precision.state_type}
    per_chunk = sum(shapes[n] * itemsize(types.get(n, precision.of(n))) for n in names)
    return per_chunk * chunks * sequences


def reverse_pass(design: Design) -> Pass:
    """The pass that walks the chunks from the last to the first carrying the state's gradient."""
    rp = design.reverse_state_pass
    if rp is None:
        raise ValueError(f"design {design.name} has no pass that carries a state from the last chunk to the first")
    return rp
