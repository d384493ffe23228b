"""Numerics of a design of several passes (npusim/model/schedule.py): each pass recorded once on a probe, then
run over the whole batch, its outputs stored in GM for the passes after it.

    GM pool   Q, K, V [N, NT, C, d] (N = B x H sequences, NT chunks of C tokens), g, beta, scale,
              then every pass's outputs, rounded to their stored type (the policy's, else the transfer type)
    CHUNKS    all N x NT items at once, in groups of at most `GROUP` items (memory stays bounded)
    SEQUENTIAL chunk after chunk, all N sequences at once, carrying the state

The per-chunk programs are the same code the single-pass driver runs: a pass reads the pool by argument
name. Where inf/NaN first appears is named with its pass, chunk and sequence.
"""
from __future__ import annotations

import inspect

import torch

from npusim import Executor, Nonfinite, PhaseGraph, Precision
from npusim.model.schedule import CHUNKS, Design, Pass
from npusim.record.batched import BlockIO

GROUP = 4096          # items of a CHUNKS pass computed at once


def stored_types(design: Design) -> dict[str, str]:
    """Intermediates a design keeps in a given type in GM ('gc=fp32,A_kk=fp32' in its notes)."""
    text = design.notes.get("stored", "")
    return dict(item.split("=") for item in text.split(",") if item)


def pass_args(p: Pass) -> list[str]:
    """The names a pass reads (its program's positional parameters after npu; not the state)."""
    code = getattr(p.program.fn, "__code__", None)
    if code is not None:
        names = code.co_varnames[1:code.co_argcount]
    else:                    # a functools.partial (v1, v2): its positional parameters
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        names = [n for n, q in inspect.signature(p.program.fn).parameters.items() if q.kind in positional][1:]
    return [a for a in names if p.program.state is None or a != p.program.state[0]]


def _probe_state(p: Pass, state: torch.Tensor | None, n: int | None) -> torch.Tensor | None:
    """A fresh copy of the probe's state, for a pass that carries one."""
    if not p.program.state:
        return None
    if state is None:
        raise ValueError(f"pass {p.name} carries a state, but none was given")
    return state[:n].clone()


def record_passes(design: Design, pool: dict, state: torch.Tensor | None, precision: Precision,
                  input_types: dict[str, str], shapes: dict[str, int],
                  whole: bool = False) -> tuple[list[PhaseGraph], list[Executor]]:
    """Record every pass on a probe (the first item of `pool`, one sequence's first chunk; `whole`: every
    item's first chunk, e.g. one q/k head with its group of value heads, execute.record_graphs); the probe's
    outputs feed the next pass's probe."""
    graphs, executors = [], []
    n = None if whole else 1
    probe = {k: (v[:n, 0] if isinstance(v, torch.Tensor) else v) for k, v in pool.items()}
    types = dict(input_types)
    for p in design.passes:
        ex = Executor(p.program, precision, input_types=types)
        args = _args(p, probe)
        graphs.append(ex.record(args, _probe_state(p, state, n), shapes=shapes))
        executors.append(ex)
        outputs, _ = ex.step(args, _probe_state(p, state, n), 0)
        ex.first_nonfinite = None
        for name, t in outputs.items():
            probe[name] = precision.round(t, precision.of(name))
            types[name] = precision.of(name)
    return graphs, executors


def run_passes(design: Design, executors: list[Executor], pool: dict, state: torch.Tensor | None,
               precision: Precision, progress=None, fast: bool = True,
               graphs: bool | None = None, pipeline: bool | None = None,
               on_state=None) -> tuple[dict, torch.Tensor | None, Nonfinite | None]:
    """Run every pass over the pool; returns (pool with every pass's outputs, final state, first inf/NaN).
    `fast`, `graphs` and `pipeline`: how the sequential passes replay their chunks (see run_sequential);
    `on_state(t, state)`: the state each chunk of the state pass starts from (Executor.run)."""
    N, NT = pool["Q"].shape[:2]
    first: Nonfinite | None = None
    for p, ex in zip(design.passes, executors):
        if p.layout == CHUNKS:
            outputs = run_items(p, ex, pool, N, NT)
        else:
            outputs, state = run_sequential(p, ex, pool, state, NT, progress, fast, graphs, pipeline,
                                             on_state=on_state if p.program.state is not None else None)
        for name, t in outputs.items():
            pool[name] = precision.round(t, precision.of(name))
        if first is None and ex.first_nonfinite is not None:
            nf = ex.first_nonfinite
            if p.layout == CHUNKS:         # the executor saw flat items: item = sequence x NT + chunk
                nf = Nonfinite(nf.sequence % NT, f"{p.name}: {nf.where}", nf.tensor, nf.sequence // NT)
            else:
                nf = Nonfinite(nf.chunk, f"{p.name}: {nf.where}", nf.tensor, nf.sequence)
            first = nf
    return pool, state, first


def _args(p: Pass, pool: dict) -> dict:
    missing = [a for a in pass_args(p) if a not in pool]
    if missing:
        raise ValueError(f"pass {p.name} reads {', '.join(missing)}, which neither the inputs nor an earlier "
                         f"pass provide")
    return {a: pool[a] for a in pass_args(p)}


def run_items(p: Pass, ex: Executor, pool: dict, N: int, NT: int) -> dict:
    """A CHUNKS pass: the N x NT items in groups, flat as [items, C, ...]."""
    flat = {a: (v.flatten(0, 1) if isinstance(v, torch.Tensor) else v) for a, v in _args(p, pool).items()}
    parts: dict[str, list] = {}
    for lo in range(0, N * NT, GROUP):
        group = {a: (v[lo:lo + GROUP] if isinstance(v, torch.Tensor) else v) for a, v in flat.items()}
        if ex.first_nonfinite is not None:
            ex.first_nonfinite = Nonfinite(0, ex.first_nonfinite.where, ex.first_nonfinite.tensor,
                                           ex.first_nonfinite.sequence)
        before = ex.first_nonfinite
        outputs, _ = ex.step(group, None, 0)
        if before is None and ex.first_nonfinite is not None:       # item numbers from the group's start
            nf = ex.first_nonfinite
            ex.first_nonfinite = Nonfinite(0, nf.where, nf.tensor, nf.sequence + lo)
        for name, t in outputs.items():
            parts.setdefault(name, []).append(t)
    return {name: torch.cat(ts).unflatten(0, (N, NT)) for name, ts in parts.items()}


def run_sequential(p: Pass, ex: Executor, pool: dict, state, NT: int, progress, fast: bool = True,
                    graphs: bool | None = None, pipeline: bool | None = None,
                    batched: bool = False, on_state=None) -> tuple[dict, torch.Tensor]:
    """A SEQUENTIAL pass: chunk after chunk through Executor.run (the fast replay unless `fast` is False; a
    CUDA graph on CUDA unless `graphs` says otherwise; on the CPU split over two threads unless `pipeline` is
    False; `batched`: the chunk-parallel work over blocks of chunks, npusim/record/batched.py); each chunk's
    outputs go straight into [N, NT, ...]."""
    args = _args(p, pool)
    out: dict[str, torch.Tensor] = {}

    def inputs_of(t: int) -> dict:
        return {a: (v[:, t] if isinstance(v, torch.Tensor) else v) for a, v in args.items()}

    def block_of(t0: int, t1: int) -> dict:       # views: a block's chunks have each chunk's strides
        return {a: (v[:, t0:t1].transpose(0, 1) if isinstance(v, torch.Tensor) else v) for a, v in args.items()}

    def emit_block(t0: int, outputs: dict) -> None:
        for name, x in outputs.items():
            if name not in out:
                out[name] = x.new_empty(x.shape[1], NT, *x.shape[2:])
            out[name][:, t0:t0 + x.shape[0]] = x.transpose(0, 1)
        if progress is not None:
            progress(t0 + next(iter(outputs.values())).shape[0], NT)

    def emit(t: int, outputs: dict) -> None:
        for name, x in outputs.items():
            if name not in out:
                out[name] = x.new_empty(x.shape[0], NT, *x.shape[1:])
            out[name][:, t] = x                   # a copy: a graph's outputs are reused by the next chunk
        if progress is not None:
            progress(t + 1, NT)

    device = pool["Q"].device
    graphs = (fast and device.type == "cuda") if graphs is None else graphs
    state = ex.run(inputs_of, state, NT, emit, fast=fast, graphs=graphs,
                   check_every=1 if device.type == "cpu" else 64, pipeline=pipeline, batched=batched,
                   blocks=BlockIO(block_of, emit_block), on_state=on_state)
    return out, state
