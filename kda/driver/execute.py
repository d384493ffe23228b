"""The driver: `execute` runs a design on the simulated NPU over a whole batch, in flash-linear-attention's
layout (kda.chunk_kda adds FLA's options and autograd around it):

    q, k [B, T, H, K]   v [B, T, H, V]   g [B, T, H, K] (log decay <= 0)   beta [B, T, H]
    initial_state / final state [B, H, K, V]

It checks the inputs, rounds them to their GM types, cuts the sequence into chunks (chunks.py), records the
phase graph once, and computes every chunk for all B x H sequences at once. `record_graphs`: a design's graphs on random inputs, for a timing-only run.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import torch
import torch.nn.functional as F

from npusim import Executor, Nonfinite, PhaseGraph, Precision
from npusim.model.limits import check_chunk
from npusim.model.schedule import Design
from npusim.record.precision import dtype_name

from kda.driver.checks import KdaInputError, check_inputs, check_numerics_work, check_options, seqlens_of
from kda.driver.chunks import chunk_of, chunked, cut_block, gm_round
from kda.driver.multipass import record_passes, run_passes, stored_types
from kda.programs import DEFAULT_DESIGN, get_design


@dataclass(frozen=True)
class Types:
    """The types a run computes and hands over in."""
    transfer: str | torch.dtype | None = None    # q, k, v in GM and every hand-off (None: the inputs', as FLA)
    policy: Precision | None = None              # a whole precision policy instead (per payload, state, ...)
    compute: torch.dtype = torch.float32
    out: torch.dtype | None = None               # the output's (None: the compute type)


@dataclass(frozen=True)
class ChunkLoop:
    """How the chunks are computed: every choice gives the same numbers. `fast=False` runs every chunk
    through the recording runtime (the reference path); `graphs` (default: on CUDA) captures the chunk step
    as a CUDA graph; `block`: chunks cut from the inputs at a time; the inf/NaN flags are read every
    `check_every` chunks (default: every chunk on the CPU, every 64 elsewhere, where each read waits for the
    device); `pipeline` (default: on the CPU where torch has two threads or more) runs the chunk step's
    state-independent calls ahead on a second thread; `batched` (one-pass designs) runs the chunk-parallel
    work over blocks of chunks and walks only the state's chain chunk by chunk (npusim/record/batched.py)."""
    fast: bool = True
    graphs: bool | None = None
    block: int = 16
    check_every: int | None = None
    pipeline: bool | None = None
    batched: bool = False


@dataclass
class Execution:
    o: torch.Tensor | None                 # [B, T, H, V] (the compute type unless asked otherwise); None: no numerics
    final_state: torch.Tensor | None       # [B, H, K, V] as kept between chunks (state type)
    graph: PhaseGraph
    nonfinite: Nonfinite | None
    precision: Precision
    chunks: int
    chunk_size: int
    inputs: tuple | None = None            # (q, k, v, g, beta, h0) as given
    graphs: tuple = ()                     # every pass's graph (a design of several passes); () = (graph,)
    design: Design | None = None
    seqlens: tuple[int, ...] | None = None # tokens of each sequence of a variable-length batch (cu_seqlens)

    @property
    def pass_graphs(self) -> tuple:
        return self.graphs or (self.graph,)
    replay: str | None = None              # how the chunks were computed (Executor.replay_mode)
    states: torch.Tensor | None = None     # intermediate_states=True: [B, NT, H, K, V], the state before each
                                           # chunk as kept between chunks (varlen: [1, chunks of all sequences, ..])

    def computed(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The output and the final state (ValueError for an execution that ran without numerics)."""
        if self.o is None or self.final_state is None:
            raise ValueError("the execution ran without numerics: it has no output or final state")
        return self.o, self.final_state

    @cached_property
    def inputs_as_stored(self) -> tuple:
        """(q, k, v, g, beta, h0) as the NPU's GM holds them (q, k, v in the transfer type), for references."""
        if self.inputs is None:
            raise ValueError("the execution keeps no inputs to store for a reference")
        q, k, v, g, beta, h0 = self.inputs
        p, cd = self.precision, self.precision.compute
        def stored(x):
            return p.round(x.to(cd), p.transfer)
        B, _, H, K = q.shape
        h0 = (torch.zeros(B, H, K, v.shape[-1], dtype=cd, device=q.device) if h0 is None else p.round(h0.to(cd), p.state_type))
        return stored(q), stored(k), stored(v), g.to(cd), beta.to(cd), h0


def program_default_state(program, transfer: str) -> str | None:
    """A program may declare the type its state is kept in under a transfer type
    (`@phase_program(..., state_for_bf16="fp32")`); None: the transfer type."""
    return program.notes.get(f"state_for_{transfer}")


def resolve_precision(q, types: Types, program) -> Precision:
    """The run's precision policy: `types.policy` as given, else every hand-off in `types.transfer` (as in
    FLA, the inputs' type by default) and the state in the program's declared type for it."""
    if types.policy is not None:
        return types.policy
    transfer_dtype = types.transfer
    if transfer_dtype is None:       # as in FLA: the transfer type follows the inputs
        transfer_dtype = q.dtype if q.dtype in (torch.bfloat16, torch.float16) else torch.float32
    transfer = dtype_name(transfer_dtype)
    return Precision(transfer=transfer, compute=types.compute, state=program_default_state(program, transfer))


def record_graph(program, *, chunk_size: int, d_k: int, d_v: int, precision: Precision,
                 gate_width: int | None = None, group: int = 1) -> PhaseGraph:
    """The phase graph of one chunk, recorded on random inputs: it depends on the shapes and the
    precision policy only, so a timing-only replay needs no real data (`--no-numerics`).
    `gate_width=1` records GDN: one decay per head, broadcast over the key channels by the same program
    (its gate ops then touch C values instead of C x d_k). `group` > 1 records one q/k head with the
    `group` value heads that share it (grouped value heads): Q and K [1, C, d_k] loaded once, V, g, beta
    and the state [group, ...]; the program's ops broadcast Q and K over the group."""
    check_recording(chunk_size, d_k, d_v, group)
    gen = torch.Generator().manual_seed(0)
    cd = precision.compute
    def rnd(*shape):
        return torch.randn(*shape, generator=gen, dtype=cd, device="cpu")
    C, G = chunk_size, group
    inputs = {"Q": F.normalize(rnd(1, C, d_k), dim=-1), "K": F.normalize(rnd(1, C, d_k), dim=-1),
              "V": rnd(G, C, d_v), "g": F.logsigmoid(rnd(G, C, gate_width or d_k)), "beta": torch.sigmoid(rnd(G, C)),
              "scale": d_k ** -0.5}
    ex = Executor(program, precision, input_types={"g": "fp32", "beta": "fp32"})
    return ex.record(inputs, torch.zeros(G, d_k, d_v, dtype=cd, device="cpu"), shapes=_shapes(C, d_k, d_v, G))


def check_recording(chunk_size: int, d_k: int, d_v: int, group: int = 1) -> None:
    """Every tool records a chunk of its design before it times or computes anything: the dimensions are
    checked here, once, against this machine (npusim/model/limits.py: LimitError, one line)."""
    check_chunk(chunk_size, d_k, d_v, group, f"recording one chunk (C = {chunk_size}, d_k = {d_k}, d_v = {d_v}"
                                             f"{f', {group} value heads' if group > 1 else ''})")


def _shapes(C: int, d_k: int, d_v: int, group: int = 1) -> dict[str, int]:
    """The graph's shapes; `group` (value heads per q/k head) only where grouped (npusim/chip/capacity.py)."""
    return {"chunk_size": C, "d_k": d_k, "d_v": d_v, **({"group": group} if group > 1 else {})}


def design_precision(design, precision: Precision) -> Precision:
    """The run's policy with the types a design keeps its intermediates in (its notes' `stored`) beneath
    the user's per-tensor types."""
    stored = stored_types(design)
    if not stored:
        return precision
    return Precision(precision.transfer, {**stored, **precision.overrides}, state=precision.state,
                     compute=precision.compute, accumulate=precision.accumulate)


def record_graphs(design, *, chunk_size: int, d_k: int, d_v: int, precision: Precision,
                  gate_width: int | None = None, group: int = 1) -> tuple[list, Precision]:
    """Every pass's graph, recorded on random inputs of one chunk (see record_graph, `group` too); and the
    policy used."""
    if design.single:
        return [record_graph(design.passes[0].program, chunk_size=chunk_size, d_k=d_k, d_v=d_v,
                             precision=precision, gate_width=gate_width, group=group)], precision
    check_recording(chunk_size, d_k, d_v, group)
    precision = design_precision(design, precision)
    gen = torch.Generator().manual_seed(0)
    cd, C, G = precision.compute, chunk_size, group
    def rnd(*shape):
        return torch.randn(*shape, generator=gen, dtype=cd, device="cpu")
    pool = {"Q": F.normalize(rnd(1, 1, C, d_k), dim=-1), "K": F.normalize(rnd(1, 1, C, d_k), dim=-1),
            "V": rnd(G, 1, C, d_v), "g": F.logsigmoid(rnd(G, 1, C, gate_width or d_k)),
            "beta": torch.sigmoid(rnd(G, 1, C)),
            "scale": d_k ** -0.5}
    pool.update({"A_log": rnd(G, 1, 1, 1), "dt_bias": rnd(G, 1, 1, d_k)})     # the in-kernel gate's (in_kernel.py)
    graphs, _ = record_passes(design, pool, torch.zeros(G, d_k, d_v, dtype=cd, device="cpu"), precision,
                              {"g": "fp32", "beta": "fp32", "A_log": "fp32", "dt_bias": "fp32"},
                              _shapes(C, d_k, d_v, G), whole=True)
    return graphs, precision


def execute(q, k, v, g, beta, scale=None, initial_state=None, *, version: str = DEFAULT_DESIGN, chunk_size: int = 64,
            design: Design | None = None, cu_seqlens=None, types: Types = Types(), loop: ChunkLoop = ChunkLoop(),
            progress: Callable[[int, int], None] | None = None, intermediate_states: bool = False) -> Execution:
    """Run a KDA design (`design`, else the registered `version`) over a whole batch; see the module
    docstring. Every tensor is made on the inputs' device. `types`: what the run computes and hands over in;
    `loop`: how the chunks are computed (the same numbers every way). `cu_seqlens` (FLA's varlen: q is
    [1, sum of lengths, H, K]) gives each sequence's start and end. `intermediate_states`: also keep the
    state each chunk starts from (Execution.states), copied out of the same chunk loop."""
    check_options(version=version, transfer_dtype=types.transfer, precision=types.policy, chunk_size=chunk_size,
                  design_given=design is not None)
    if cu_seqlens is not None:
        return _execute_varlen(q, k, v, g, beta, scale, initial_state, cu_seqlens, version=version,
                               chunk_size=chunk_size, design=design, types=types, loop=loop,
                               progress=progress, intermediate_states=intermediate_states)
    B, T, H, K, V = check_inputs(q, k, v, g, beta, initial_state, chunk_size, scale)
    check_numerics_work(B=B, T=T, H=H, K=K, V=V, chunk_size=chunk_size, states=intermediate_states)
    design = design or get_design(version)
    run = _execute_one_pass if design.single else _execute_design
    return run(design, q, k, v, g, beta, scale, initial_state, chunk_size=chunk_size, types=types, loop=loop,
               progress=progress, intermediate_states=intermediate_states)


def _execute_one_pass(design: Design, q, k, v, g, beta, scale, initial_state, *, chunk_size: int, types: Types,
                      loop: ChunkLoop, progress, intermediate_states: bool) -> Execution:
    """A design of one pass: chunks are cut from the inputs `loop.block` at a time, so memory beyond the
    inputs and the output stays at a few chunks' worth."""
    program = design.passes[0].program
    B, T, H, K = q.shape
    V, device = v.shape[-1], q.device
    fast, block = loop.fast, loop.block
    precision = resolve_precision(q, types, program)
    cd = precision.compute
    if scale is None:
        scale = K ** -0.5
    C = chunk_size
    NT = -(-T // C)
    block = max(1, min(block, NT))

    # GM contents: q, k, v in the transfer type; g, beta and the initial state in fp32.
    def stored(x):
        return precision.round(x, precision.transfer)

    def probe() -> dict:
        src = [x[:1, :, :1] for x in (q, k, v, g, beta)]
        Q, K_, V_ = (chunk_of(x, 0, min(T, C), C, cd, stored) for x in src[:3])
        return {"Q": Q, "K": K_, "V": V_, "g": chunk_of(src[3], 0, min(T, C), C, cd),
                "beta": chunk_of(src[4], 0, min(T, C), C, cd), "scale": scale}

    blocks: dict[int, list] = {}

    def chunk(t: int) -> dict:
        if not fast:                          # the reference path: the recording runtime, chunk by chunk
            lo, hi = t * C, min(T, (t + 1) * C)
            Q, K_, V_ = (chunk_of(x, lo, hi, C, cd, stored) for x in (q, k, v))
            return {"Q": Q, "K": K_, "V": V_, "g": chunk_of(g, lo, hi, C, cd), "beta": chunk_of(beta, lo, hi, C, cd),
                    "scale": scale}
        first = t - t % block
        if first not in blocks:
            blocks.clear()
            n = min(block, NT - first)
            blocks[first] = [cut_block(x, first, n, C, T, cd, gm_round(x, precision) if i < 3 else None)
                             for i, x in enumerate((q, k, v, g, beta))]
        Q, K_, V_, g_, b_ = (b[t - first] for b in blocks[first])
        return {"Q": Q, "K": K_, "V": V_, "g": g_, "beta": b_, "scale": scale}

    S = (torch.zeros(B * H, K, V, dtype=cd, device=device) if initial_state is None
         else precision.round(initial_state.to(cd), precision.state_type).reshape(B * H, K, V))
    ex = Executor(program, precision, input_types={"g": "fp32", "beta": "fp32"})
    graph = ex.record(probe(), S[:1].clone(), shapes={"chunk_size": C, "d_k": K, "d_v": V})
    o = torch.empty(B, T, H, V, dtype=types.out or cd, device=device)

    def emit(t: int, result: dict) -> None:
        lo, hi = t * C, min(T, (t + 1) * C)
        o[:, lo:hi] = result["O"][:, :hi - lo].reshape(B, H, hi - lo, V).transpose(1, 2)
        if progress is not None:
            progress(t + 1, NT)

    graphs = fast and device.type == "cuda" if loop.graphs is None else loop.graphs
    check_every = (1 if device.type == "cpu" else 64) if loop.check_every is None else loop.check_every
    states, on_state = _state_keeper(intermediate_states, S, NT)
    with torch.no_grad():
        S = ex.run(chunk, S, NT, emit, fast=fast, graphs=graphs, check_every=check_every, pipeline=loop.pipeline,
                   batched=loop.batched, on_state=on_state)
    result = Execution(o, S.reshape(B, H, K, V), graph, ex.first_nonfinite, precision, NT, C,
                       (q, k, v, g, beta, initial_state))
    result.replay = ex.replay_mode
    result.states = _states_out(states, B)
    return result


def _state_keeper(wanted: bool, S: torch.Tensor, NT: int):
    """(buffer [B*H, NT, K, V], on_state) keeping the state each chunk starts from; (None, None) if not wanted."""
    if not wanted:
        return None, None
    states = S.new_empty(S.shape[0], NT, *S.shape[1:])

    def on_state(t: int, state: torch.Tensor) -> None:
        states[:, t].copy_(state)
    return states, on_state


def _states_out(states: torch.Tensor | None, B: int) -> torch.Tensor | None:
    """[B*H, NT, K, V] -> FLA's [B, NT, H, K, V]."""
    return None if states is None else states.unflatten(0, (B, -1)).transpose(1, 2)


def _execute_design(design: Design, q, k, v, g, beta, scale, initial_state, *, chunk_size: int, types: Types,
                    loop: ChunkLoop, progress, intermediate_states: bool = False) -> Execution:
    """A design of several passes (kda/driver/multipass.py): every tensor between passes is kept for the whole batch."""
    B, T, H, K, V = q.shape[0], q.shape[1], q.shape[2], q.shape[3], v.shape[-1]
    state_program = (design.state_pass or design.passes[0]).program
    precision = design_precision(design, resolve_precision(q, types, state_program))
    cd, C = precision.compute, chunk_size
    scale = K ** -0.5 if scale is None else scale
    def stored(x):
        return precision.round(x, precision.transfer)
    pool = {"Q": chunked(q, C, cd, stored), "K": chunked(k, C, cd, stored), "V": chunked(v, C, cd, stored),
            "g": chunked(g, C, cd), "beta": chunked(beta, C, cd), "scale": scale}
    S = (torch.zeros(B * H, K, V, dtype=cd, device=q.device) if initial_state is None
         else precision.round(initial_state.to(cd), precision.state_type).reshape(B * H, K, V))
    graphs, executors = record_passes(design, pool, S, precision, {"g": "fp32", "beta": "fp32"},
                                      {"chunk_size": C, "d_k": K, "d_v": V})
    states, on_state = _state_keeper(intermediate_states, S, pool["Q"].shape[1])
    with torch.no_grad():
        pool, S, nonfinite = run_passes(design, executors, pool, S, precision, progress, loop.fast, loop.graphs,
                                        loop.pipeline, on_state)
    NT = pool["Q"].shape[1]
    o = pool["O"].reshape(B, H, NT * C, V)[:, :, :T].transpose(1, 2).to(types.out or cd)
    main = next((g_ for g_, p in zip(graphs, design.passes) if p.program.state is not None), graphs[-1])
    result = Execution(o, S.reshape(B, H, K, V), main, nonfinite, precision, NT, C,
                       (q, k, v, g, beta, initial_state), graphs=tuple(graphs), design=design)
    result.replay = next((ex.replay_mode for ex in executors if ex.replay_mode), None)
    result.states = _states_out(states, B)
    return result


def _execute_varlen(q, k, v, g, beta, scale, initial_state, cu_seqlens, **kw) -> Execution:
    """FLA's variable-length batch: each sequence padded at its end to the longest one's chunks (zero k,
    beta and g change nothing), run as a batch, and cut back."""
    check_inputs(q, k, v, g, beta, None, kw["chunk_size"], scale)          # types before shapes are read
    if initial_state is not None and not isinstance(initial_state, torch.Tensor):
        raise KdaInputError(f"initial_state must be a torch.Tensor, got {type(initial_state).__name__}")
    if q.dim() != 4 or q.shape[0] != 1:
        raise KdaInputError(f"with cu_seqlens, q must be [1, total tokens, H, K], got {list(q.shape)}")
    lengths = seqlens_of(cu_seqlens, q.shape[1])
    N, C = len(lengths), kw["chunk_size"]
    if initial_state is not None and initial_state.shape[0] != N:
        raise KdaInputError(f"initial_state must have one state per sequence ({N}), got {initial_state.shape[0]}")
    T = -(-max(lengths) // C) * C
    starts = [0]
    for n in lengths[:-1]:
        starts.append(starts[-1] + n)

    def batch(x):
        out = x.new_zeros(N, T, *x.shape[2:])
        for i, (a, n) in enumerate(zip(starts, lengths)):
            out[i, :n] = x[0, a:a + n]
        return out
    ex = execute(batch(q), batch(k), batch(v), batch(g), batch(beta), scale, initial_state, **kw)
    batched, _ = ex.computed()
    o = batched.new_empty(1, q.shape[1], *batched.shape[2:])
    for i, (a, n) in enumerate(zip(starts, lengths)):
        o[0, a:a + n] = batched[i, :n]
    ex.o, ex.seqlens, ex.inputs = o, tuple(lengths), (q, k, v, g, beta, initial_state)
    if ex.states is not None:       # each sequence's own chunks, sequence after sequence (FLA's order)
        ex.states = torch.cat([ex.states[i, :-(-n // C)] for i, n in enumerate(lengths)])[None]
    return ex
