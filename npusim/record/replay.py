"""Fast numerics: replay a recorded phase program over many chunks with as little host work as possible.

`Executor.record` checks and records the program once; after that the chunk step is plain torch code. The
fast path runs the program function with a `LeanNpu`: phases are no-op blocks (no frame scanning, no
checker), a sync only rounds its payload to the recorded transfer types, in place (one conversion there and
back), and adds its sum to a list that says, once per chunk, whether anything non-finite went by. The
numbers are those of the recording path bit for bit: the same ops in the same order on the same tensors
(`tests/kda/test_fast_numerics.py`).

The inf/NaN watch keeps its meaning. Every `check_every` chunks the flags are read (one host sync); when
one says non-finite, the chunks since the last check are run again from the state saved there, and the
first suspect chunk goes through `Executor.step`, which re-runs it watching every tensor and names where
the inf/NaN first appeared.

On CUDA, `CudaGraphStep` captures the step once as a CUDA graph and replays it per chunk; where capture
fails it says why and the eager fast path runs instead (`Replay.mode`).
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Callable

import torch
from torch.overrides import TorchFunctionMode

from npusim.errors import DataflowError
from npusim.record.accumulation import NarrowAccumulation
from npusim.record.precision import DTYPES, itemsize


class _NoPhase:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NO_PHASE = _NoPhase()


def rounding_target(precision, type_name: str, compute: torch.dtype) -> torch.dtype | None:
    """The type a payload is rounded through (`Precision.round`), or None where rounding changes nothing."""
    target = DTYPES[type_name]
    if target == compute or itemsize(type_name) >= compute.itemsize:
        return None
    return target


class LeanNpu:
    """What a phase program sees on the fast path (see the module docstring). `plan[i]` lists, for the
    i-th sync's payload, (rounding type or None, watched); `sums` collects the watched payloads' sums."""
    _phase = None

    def __init__(self, plan: list[list[tuple[torch.dtype | None, bool]]], sums: list | None, eyes: dict):
        self._plan = plan
        self._sums = sums
        self._eyes = eyes
        self._syncs = 0

    def vec(self, name: str) -> _NoPhase:
        return _NO_PHASE

    cube = vec

    def keep(self, *tensors) -> None:
        pass

    spill = keep

    def load(self, tensor: torch.Tensor, index, strided: bool | None = None) -> torch.Tensor:
        return tensor[index]

    def repeats(self, n: int) -> _NoPhase:
        return _NO_PHASE

    def sync(self, *tensors: torch.Tensor, after: str | None = None, next_item: bool = False) -> None:
        if self._syncs >= len(self._plan) or len(self._plan[self._syncs]) != len(tensors):
            raise DataflowError("a chunk makes a sync the recorded chunk did not: phase programs must do "
                                "the same work in every chunk")
        plan = self._plan[self._syncs]
        self._syncs += 1
        for t, (target, watched) in zip(tensors, plan):
            if target is not None:
                t.copy_(t.to(target))        # t.to(target).to(t.dtype) written back: the same bits
            if watched and self._sums is not None:
                self._sums.append(t.sum())

    def forward_substitution(self, A: torch.Tensor) -> torch.Tensor:
        """As `Npu.forward_substitution`, with the identity made once per shape."""
        C = A.shape[-1]
        key = (C, A.dtype, A.device)
        eye = self._eyes.get(key)
        if eye is None:
            eye = self._eyes[key] = torch.eye(C, dtype=A.dtype, device=A.device)
        eye = eye.expand(A.shape)
        return torch.linalg.solve_triangular(torch.tril(A, -1) + eye, eye, upper=False, unitriangular=True)


def _any_nonfinite(sums: list[torch.Tensor]) -> torch.Tensor:
    """A 0-d bool tensor, True where a sum is inf/NaN (stays on the device: no host sync)."""
    return (~torch.isfinite(torch.stack(sums))).any()


class Replay:
    """Runs an Executor's recorded program over chunks on the fast path. `inputs_of(t)` gives chunk t's
    inputs, `emit(t, outputs)` takes its outputs before the next chunk runs (graph outputs are reused)."""

    def __init__(self, executor, *, check_every: int = 1, graphs: bool = False, pipeline: bool | None = None,
                 batched: bool = False, blocks=None):
        if executor.graph is None:
            raise RuntimeError("Replay before Executor.record")
        self.ex = executor
        p = executor.precision
        cd = p.compute
        self.plan = [[(None if x.redundant else rounding_target(p, x.dtype, cd), not x.redundant)
                      for x in s.payload] for s in executor.graph.syncs]
        self.state_target = rounding_target(p, p.state_type, cd)
        self.check_every = max(1, check_every)
        self.graphs = graphs
        self.pipeline = pipeline      # split the step over two threads (CPU); None: where torch has >= 2
        self.batched = batched        # chunk-parallel work over blocks of chunks (npusim/record/batched.py)
        self.blocks = blocks          # a BlockIO: blocks of chunks in and out at once (else chunk by chunk)
        self.eyes: dict = {}
        self.mode = "eager"           # "eager", "cuda-graph", "pipelined" or "batched"; `fallback` says why
        #                               not the graph, the pipeline or the batches
        self.fallback: str | None = None
        self._graph: CudaGraphStep | None = None

    # -- one chunk, eager ------------------------------------------------------------------------------
    def eager_step(self, inputs: dict, state, watching: bool):
        """(outputs, next state, 0-d bool 'something looked non-finite' or None)."""
        ex = self.ex
        sums = [] if watching else None
        npu = LeanNpu(self.plan, sums, self.eyes)
        mode = _narrow(ex.precision)
        with mode:
            outputs = ex._call(npu, inputs, state)
        if npu._syncs != len(self.plan):
            raise DataflowError(f"a chunk made {npu._syncs} syncs, the recorded chunk {len(self.plan)}: "
                                f"phase programs must do the same work every chunk")
        new_state = None
        if ex.program.state is not None:
            new_state = outputs.pop(ex.program.state[1])
            if self.state_target is not None:
                new_state = new_state.to(self.state_target).to(new_state.dtype)
        flag = None
        if watching:
            sums += [t.sum() for t in (*outputs.values(), new_state) if t is not None]
            flag = _any_nonfinite(sums)
        return outputs, new_state, flag

    def step(self, inputs: dict, state, watching: bool):
        if self.graphs and self._graph is None and self.fallback is None:
            try:
                self._graph = CudaGraphStep(self, inputs, state)
                self.mode = "cuda-graph"
            except Exception as err:            # capture is an optimisation: say why, run eagerly
                first_line = (str(err).strip().splitlines() or [""])[0]
                self.fallback = f"CUDA graph capture failed ({type(err).__name__}: {first_line})"
                self._graph = None
        if self._graph is not None:
            return self._graph.replay(inputs, state, watching)
        return self.eager_step(inputs, state, watching)

    # -- the loop ----------------------------------------------------------------------------------------
    def run(self, inputs_of: Callable[[int], dict], state, chunks: int,
            emit: Callable[[int, dict], None], on_state: Callable[[int, torch.Tensor], None] | None = None):
        """Compute chunks 0..chunks-1 from `state`; returns the final state. `on_state(t, state)` sees the
        state chunk t starts from (copy it: a CUDA graph reuses its buffer)."""
        ex = self.ex
        first = 0
        batches = self._batches(inputs_of, state, chunks)
        if batches is not None:
            done = batches.run(state, emit, on_state)
            if not isinstance(done, tuple):
                return done
            first, state = done      # a block saw inf/NaN: from its first chunk on, chunk by chunk
            self.mode = "eager"
            self.fallback = f"batched up to chunk {first}, where a block's inf/NaN watch fired"
        pipe = self._pipeline(inputs_of, state, chunks) if first == 0 else None
        start, saved, flags = first, state, []
        try:
            for t in range(first, chunks):
                if on_state is not None:
                    on_state(t, state)
                watching = ex.first_nonfinite is None
                if pipe is not None:
                    outputs, state, flag = pipe.step(t, state)
                else:
                    outputs, state, flag = self.step(inputs_of(t), state, watching)
                emit(t, outputs)
                if not watching:
                    continue
                flags.append(flag)
                if len(flags) >= self.check_every or t == chunks - 1:
                    bad = _first_true(flags)
                    if bad is not None:
                        if pipe is not None:        # naming re-runs chunks here: the worker stops first
                            pipe.close()
                            pipe = None
                        self._name(inputs_of, saved, start, start + bad)
                    # eagerly each chunk makes a new state; a graph keeps it in one buffer, which the next
                    # chunk overwrites: then the state at the window's start is copied
                    copy = self._graph is not None and state is not None
                    start, saved, flags = t + 1, (state.clone() if copy else state), []
        finally:
            if pipe is not None:
                pipe.close()
        return state

    def _batches(self, inputs_of, state, chunks: int):
        """The chunk-parallel work batched over blocks of chunks (npusim/record/batched.py); None where it
        does not apply, with `fallback` saying why."""
        ex = self.ex
        if not self.batched or chunks < 2 or ex.first_nonfinite is not None:
            return None
        why = ("no state" if state is None else
               "narrow accumulation" if ex.precision.narrow_accumulation else None)
        if why is None:
            from npusim.record.batched import BatchedReplay
            from npusim.record.hoist import Untapeable
            try:
                batches = BatchedReplay(self, inputs_of, state, chunks, self.blocks)
            except Untapeable as err:
                why = str(err)
        if why is not None:
            self.fallback = f"not batched: {why}"
            return None
        self.mode = "batched"
        return batches

    def _pipeline(self, inputs_of, state, chunks: int):
        """The step split over two threads (npusim/record/pipeline.py), with chunk 0 computed while the split is
        recorded; None where it does not apply, with `fallback` saying why where it was asked for."""
        ex = self.ex
        wanted = self.pipeline if self.pipeline is not None else torch.get_num_threads() >= 2
        if not wanted or chunks < 2 or ex.first_nonfinite is not None:
            return None
        why = ("CUDA graphs asked for" if self.graphs else
               "narrow accumulation" if ex.precision.narrow_accumulation else None)
        if why is None:
            first = inputs_of(0)
            tensors = [v for v in first.values() if isinstance(v, torch.Tensor)]
            if tensors and tensors[0].device.type != "cpu":
                why = "not on the CPU"
        if why is None:
            from npusim.record.hoist import Tape, Untapeable
            try:
                tape, result = Tape.capture(lambda i, s: self.eager_step(i, s, True), first, state)
            except Untapeable as err:
                why = str(err)
        if why is not None:
            if self.pipeline:
                self.fallback = f"not pipelined: {why}"
            return None
        from npusim.record.pipeline import Pipeline
        self.mode, self.tape = "pipelined", tape
        return Pipeline(tape, inputs_of, chunks, result)

    def _name(self, inputs_of, state, start: int, bad: int) -> None:
        """Re-run chunks start..bad-1 from `state` (deterministic: the same state again), then chunk `bad`
        through Executor.step, which names where inf/NaN first appears."""
        with torch.no_grad():
            for t in range(start, bad):
                _, state, _ = self.eager_step(inputs_of(t), state, False)
            self.ex.step(inputs_of(bad), state, bad)


def _narrow(precision):
    if not precision.narrow_accumulation:
        return nullcontext()
    return NarrowAccumulation(precision.accumulate)


def _first_true(flags: list) -> int | None:
    """Index of the first True flag (one host sync for all of them)."""
    hit = torch.stack(flags).nonzero()
    return int(hit[0, 0]) if hit.numel() else None


class _DeviceIndices(TorchFunctionMode):
    """While a graph is warmed up and captured: list indices (`x[..., [0, 2], :]`) become index tensors
    made once on the device, since a copy from host memory cannot be captured."""

    def __init__(self, device: torch.device, cache: dict):
        super().__init__()
        self.device, self.cache = device, cache

    def _convert(self, index):
        if isinstance(index, list) and index and all(type(i) is int for i in index):
            key = tuple(index)
            t = self.cache.get(key)
            if t is None:
                t = self.cache[key] = torch.tensor(index, dtype=torch.long, device=self.device)
            return t
        if isinstance(index, tuple):
            return tuple(self._convert(i) for i in index)
        return index

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and len(args) >= 2:
            args = (args[0], self._convert(args[1]), *args[2:])
        return func(*args, **kwargs)


class CudaGraphStep:
    """The fast step captured once as a CUDA graph: per chunk the inputs are copied into the graph's own
    buffers and the graph is replayed; the state stays in the graph's buffer from chunk to chunk."""

    def __init__(self, replay: Replay, inputs: dict, state):
        if not torch.cuda.is_available():
            raise RuntimeError("CUDA is not available")
        tensors = [v for v in inputs.values() if isinstance(v, torch.Tensor)]
        device = tensors[0].device
        if device.type != "cuda":
            raise RuntimeError(f"inputs are on {device}, not CUDA")
        self.inputs = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
        self.state = None if state is None else state.clone()
        cache = self.indices = {}      # index tensors the graph reads: they must live as long as it does
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side), _DeviceIndices(device, cache):
            for _ in range(2):                         # warm up: cuBLAS handles, identities, index tensors
                replay.eager_step(self.inputs, self.state, True)
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph), _DeviceIndices(device, cache):
            outputs, new_state, flag = replay.eager_step(self.inputs, self.state, True)
            if new_state is not None:
                self.state.copy_(new_state)            # the next chunk reads it where this one did
        self.outputs, self.flag = outputs, flag

    def replay(self, inputs: dict, state, watching: bool):
        for k, v in inputs.items():
            if isinstance(v, torch.Tensor):
                self.inputs[k].copy_(v)
        if state is not None and state is not self.state:
            self.state.copy_(state)
        self.graph.replay()
        return self.outputs, self.state, (self.flag.clone() if watching else None)
