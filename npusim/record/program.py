"""Phase programs and the runtime they talk to.

A phase program computes one chunk of one (or many) sequences in blocks that name their unit:

    @phase_program("v3", returns=("O", "S_new"), state=("S_prev", "S_new"), resident=("Q_scaled", "K_decay"))
    def kda_v3(npu, Q, K, V, g, beta, S_prev, scale):
        with npu.vec("A"):
            gc = g.cumsum(-2)
            ...
        npu.sync(K_scaled, K_div, Q_scaled, K_decay, V)      # hand-off through the GM workspace
        with npu.cube("B"):
            A_raw = K_scaled @ K_div.mT
        ...
        return O, S_new

The Executor records the program once on a probe (one sequence, one chunk) with every torch call
classified and checked (ops.py, dataflow.py), which yields the PhaseGraph the event model replays; then it
runs the real math on all sequences at once, chunk after chunk, with the recorder switched off. Both
passes round every sync payload to its transfer type and watch for inf/NaN.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable

import torch

from npusim.errors import DataflowError
from npusim.record.accumulation import NarrowAccumulation  # noqa: F401  (npusim.record.program.NarrowAccumulation, as before)
from npusim.record.dataflow import Checker
from npusim.record.graph import CUBE, VEC, PhaseGraph, sync_label
from npusim.record.ops import IssuedOps, OpRecorder
from npusim.record.precision import Precision

_no_torch_function = torch._C.DisableTorchFunction
OFF, LIGHT, FULL = "off", "light", "full"      # how closely a run watches for inf/NaN


def _suspect(t: torch.Tensor) -> bool:
    """A cheap test: a sum is finite unless an element is inf/NaN (or the sum overflows: then the
    precise watch decides)."""
    with _no_torch_function():
        return not bool(torch.isfinite(t.sum()))


@dataclass(frozen=True)
class PhaseProgram:
    fn: Callable
    name: str
    returns: tuple[str, ...]                  # names of the returned tensors, in order
    state: tuple[str, str] | None = None      # (input name, returned name) handed to the next chunk
    resident: tuple[str, ...] = ()            # tensors placed in the workspace's resident region
    description: str = ""
    notes: dict[str, str] = field(default_factory=dict, hash=False)   # free-form facts for reports

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def phase_program(name: str, *, returns: tuple[str, ...], state: tuple[str, str] | None = None,
                  resident: tuple[str, ...] = (), description: str = "", **notes: str):
    """Declare a function as a per-chunk phase program (see the module docstring)."""
    def wrap(fn: Callable) -> PhaseProgram:
        return PhaseProgram(fn, name, tuple(returns), state, tuple(resident),
                            description or (fn.__doc__ or "").strip().split("\n")[0], dict(notes))
    return wrap


@dataclass(frozen=True)
class Nonfinite:
    """Where inf/NaN first appeared."""
    chunk: int
    where: str          # "Phase D", "sync ④ (fp16)", "state hand-off (bf16)"
    tensor: str
    sequence: int       # first sequence (batch x head, flattened) that has it

    def __str__(self) -> str:
        return f"{self.tensor} in {self.where} of chunk {self.chunk} (sequence {self.sequence})"


class Npu(IssuedOps):
    """What a phase program sees. `npu.vec(name)` / `npu.cube(name)` open a phase; `npu.sync(...)` hands
    tensors to the other unit; `npu.keep(...)` keeps tensors on their unit for its later phases;
    `npu.forward_substitution(A)` is the sequential Vector op of the UT transform."""

    def __init__(self, executor: "Executor", chunk: int, checker: Checker | None = None, watch: str = FULL):
        self._ex = executor
        self._checker = checker
        self._watch = watch             # OFF, LIGHT (hand-offs only, a cheap test) or FULL (every tensor)
        self.suspect = False            # LIGHT: a hand-off looked non-finite
        self.chunk = chunk
        self._phase: _Block | None = None
        self._syncs = 0
        self._alive: list[torch.Tensor] = []

    def vec(self, name: str) -> "_Block":
        return _Block(self, name, VEC)

    def cube(self, name: str) -> "_Block":
        return _Block(self, name, CUBE)

    def sync(self, *tensors: torch.Tensor, after: str | None = None, next_item: bool = False) -> None:
        """Hand `tensors` to the other unit through the GM workspace, from the last phase (or from the earlier
        phase `after`, on the other unit than the next phase) to the next phase. `next_item=True`: a flag
        (no tensors) into the core's next work item, whose first phase on the other unit waits for it (a
        depth-1 reverse flag: the other unit at most one item ahead)."""
        if self._checker is not None:
            payload = [p for _, p in self._checker.sync(tensors, after, next_item).payload]
        else:
            recorded = self._ex.graph.syncs
            if self._syncs >= len(recorded) or len(recorded[self._syncs].payload) != len(tensors):
                raise DataflowError(f"chunk {self.chunk} makes a sync the recorded chunk did not: phase "
                                    f"programs must do the same work in every chunk")
            payload = recorded[self._syncs].payload
        self._syncs += 1
        label = sync_label(self._syncs)
        with _no_torch_function():
            for t, p in zip(tensors, payload):
                if p.redundant:                  # the other unit already has it: nothing is rounded
                    continue
                rounded = self._ex.precision.round(t, p.dtype)
                if rounded is not t:
                    t.copy_(rounded)             # from now on the tensor is its workspace copy
                if self._watch == FULL:
                    self._ex.watch(t, self.chunk, f"sync {label} ({p.dtype})", p.name)
                elif self._watch == LIGHT and not self.suspect:
                    self.suspect = _suspect(t)

    def keep(self, *tensors: torch.Tensor) -> None:
        if self._checker is not None:
            self._checker.keep(tensors)

    def load(self, tensor: torch.Tensor, index, strided: bool | None = None) -> torch.Tensor:
        """tensor[index], loaded by the current phase as one DataCopy of that part of a GM tensor (an input,
        or one stored with `spill`); rows narrower than the tensor's are strided (`strided=True`: the kernel
        keeps the tensor as a block of a wider matrix)."""
        with _no_torch_function():
            part = tensor[index]
        if self._checker is not None:
            self._checker.load(part, tensor, strided)
        return part

    def spill(self, *tensors: torch.Tensor) -> None:
        """After the phase that made them: it stores `tensors` to GM, where later phases of either unit load
        them (a round trip through GM on the same unit, or a tensor the other unit reads without a flag)."""
        if self._checker is not None:
            self._checker.spill(tensors)

    def repeats(self, n: int) -> "_Repeats":
        """`with npu.repeats(n):` each Vector instruction recorded inside issues n repeats on each unit (a
        mask narrower than a repeat: one row a repeat), whatever its bytes."""
        return _Repeats(self._checker, n)

    def forward_substitution(self, A: torch.Tensor) -> torch.Tensor:
        """R = (I + StrictTril(A))^-1 for A [..., C, C]: row i needs rows < i, so C-1 dependent steps
        (the document's forward_substitution_optimized, section 3.2, without the Diag(beta) factor)."""
        C = A.shape[-1]
        with _no_torch_function():
            eye = torch.eye(C, dtype=A.dtype, device=A.device).expand(A.shape)
            R = torch.linalg.solve_triangular(torch.tril(A, -1) + eye, eye, upper=False, unitriangular=True)
        if self._checker is not None:
            # row i: R[i, j] = -L[i, j:i] . R[j:i, j] for j < i: i(i+1)/2 multiply-adds, per matrix (the
            # probe holds one sequence, so A's leading dims count the matrices it solves side by side)
            matrices = A.numel() // (C * C)
            self._checker.sequential("forward_substitution", [A], R, steps=C - 1,
                                     elements=matrices * (C - 1) * C * (C + 1) // 6)
        return R


class _Repeats:
    def __init__(self, checker, n: int):
        self.checker, self.n = checker, n

    def __enter__(self) -> "_Repeats":
        if self.checker is not None:
            self.checker.set_repeats(self.n)
        return self

    def __exit__(self, *exc) -> bool:
        if self.checker is not None:
            self.checker.set_repeats(0)
        return False


class _Block:
    """`with npu.vec("A"):` — names the tensors the block binds to variables and watches them."""

    def __init__(self, npu: Npu, name: str, unit: str):
        self.npu, self.name, self.unit = npu, name, unit

    def __enter__(self) -> "_Block":
        npu = self.npu
        if npu._phase is not None:
            raise DataflowError(f"Phase {self.name} opens inside Phase {npu._phase.name}: phases do not nest")
        self._before = _tensor_ids(sys._getframe(1).f_locals)
        if npu._checker is not None:
            npu._checker.begin_phase(self.name, self.unit)
        npu._phase = self
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        npu = self.npu
        npu._phase = None
        if exc_type is not None:
            return False
        made: dict[int, tuple[str, torch.Tensor]] = {}
        for name, tensor in _tensors(sys._getframe(1).f_locals):
            if self._before.get(name) != id(tensor):
                made[id(tensor)] = (name, tensor)
                npu._alive.append(tensor)
        if npu._checker is not None:
            npu._checker.end_phase({tid: name for tid, (name, _) in made.items()})
        if npu._watch == FULL:
            for name, tensor in made.values():
                npu._ex.watch(tensor, npu.chunk, f"Phase {self.name}", name)
        return False


def _tensors(frame_locals: dict):
    """(name, tensor) for tensor variables and the tensors in list, tuple or dict variables ("t[2]")."""
    for key, value in frame_locals.items():
        if isinstance(value, torch.Tensor):
            yield key, value
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if isinstance(item, torch.Tensor):
                    yield f"{key}[{i}]", item
        elif isinstance(value, dict):
            for k, item in value.items():
                if isinstance(item, torch.Tensor):
                    yield f"{key}[{k!r}]", item


def _tensor_ids(frame_locals: dict) -> dict[str, int]:
    return {name: id(t) for name, t in _tensors(frame_locals)}


class Executor:
    """Runs a phase program chunk by chunk. `record` makes the PhaseGraph from a probe; `step` computes."""

    def __init__(self, program: PhaseProgram, precision: Precision, input_types: dict[str, str] | None = None):
        self.program = program
        self.precision = precision
        self.input_types = dict(input_types or {})
        self.graph: PhaseGraph | None = None
        self.first_nonfinite: Nonfinite | None = None
        self.replay_mode: str | None = None       # how `run` computed the chunks

    def record(self, inputs: dict, state: torch.Tensor | None, shapes: dict[str, int] | None = None) -> PhaseGraph:
        """Record the phase graph of one chunk. `inputs` hold one sequence: costs are per (sequence, chunk)."""
        checker = Checker(self.program.name, self.precision, self.program.resident,
                          self.program.notes.get("gm_layout", ""))
        checker.explicit = self.program.notes.get("barriers") == "explicit"
        for name, value in inputs.items():
            if isinstance(value, torch.Tensor):
                checker.register_input(name, value, self.input_types.get(name, self.precision.transfer))
        if self.program.state is not None:
            if state is None:
                raise DataflowError(f"program {self.program.name} needs its state {self.program.state[0]}")
            checker.register_input(self.program.state[0], state, self.precision.state_type, is_state=True)
        npu = Npu(self, chunk=0, checker=checker, watch=OFF)
        with OpRecorder(checker):
            outputs = self._call(npu, inputs, state)
        self.graph = checker.finish(outputs, self.program.state, shapes or {})
        return self.graph

    def step(self, inputs: dict, state: torch.Tensor | None, chunk: int) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """Compute one chunk for every sequence in `inputs`; returns (outputs, next state).

        Until the first inf/NaN is found, the hand-offs, outputs and state are tested cheaply; when one of
        them looks non-finite, the chunk runs again watching every tensor, to name where it first appeared
        (the run is deterministic, and a program never writes into its inputs)."""
        if self.graph is None:
            raise RuntimeError("Executor.step before Executor.record")
        watch = OFF if self.first_nonfinite is not None else LIGHT
        outputs, new_state, suspect = self._run(inputs, state, chunk, watch)
        if watch == LIGHT and (suspect or any(_suspect(t) for t in (*outputs.values(), new_state) if t is not None)):
            self._run(inputs, state, chunk, FULL)
            for name, t in (*outputs.items(), (self.program.state[1] if self.program.state else "", new_state)):
                if t is not None:
                    self.watch(t, chunk, "the chunk's results", name)
        return outputs, new_state

    def run(self, inputs_of: Callable[[int], dict], state, chunks: int, emit: Callable[[int, dict], None], *,
            fast: bool = True, graphs: bool = False, check_every: int = 1, pipeline: bool | None = None,
            batched: bool = False, blocks=None, on_state: Callable[[int, torch.Tensor], None] | None = None):
        """Compute chunks 0..chunks-1 from `state`: `inputs_of(t)` gives chunk t's inputs, `emit(t, outputs)`
        takes its outputs, `on_state(t, state)` (optional) sees the state chunk t starts from (copy it: a CUDA
        graph reuses its buffer). `fast` replays the program without the runtime's bookkeeping
        (npusim/record/replay.py, the same numbers bit for bit); `graphs` captures the step as a CUDA graph;
        `pipeline` splits it over two threads on the CPU (npusim/record/pipeline.py; None: where torch has two
        threads or more); `batched` runs the chunk-parallel work over blocks of chunks and only the state's
        chain chunk by chunk (npusim/record/batched.py; before the graph and the pipeline where it applies;
        `blocks`, a npusim.record.batched.BlockIO, hands blocks of chunks in and out at once). Returns the
        final state."""
        if not fast:
            for t in range(chunks):
                if on_state is not None:
                    on_state(t, state)
                outputs, state = self.step(inputs_of(t), state, t)
                emit(t, outputs)
            self.replay_mode = "recording runtime"
            return state
        from npusim.record.replay import Replay
        replay = Replay(self, check_every=check_every, graphs=graphs, pipeline=pipeline, batched=batched,
                        blocks=blocks)
        state = replay.run(inputs_of, state, chunks, emit, on_state)
        self.replay_mode = replay.mode + (f"; {replay.fallback}" if replay.fallback else "")
        return state

    def _run(self, inputs: dict, state, chunk: int, watch: str):
        npu = Npu(self, chunk, watch=watch)
        if self.precision.narrow_accumulation:
            with NarrowAccumulation(self.precision.accumulate):
                outputs = self._call(npu, inputs, state)
        else:
            outputs = self._call(npu, inputs, state)
        if npu._syncs != len(self.graph.syncs):
            raise DataflowError(f"chunk {chunk} made {npu._syncs} syncs, the recorded chunk "
                                f"{len(self.graph.syncs)}: phase programs must do the same work every chunk")
        new_state = None
        if self.program.state is not None:
            new_state = outputs.pop(self.program.state[1])
            with _no_torch_function():
                rounded = self.precision.round(new_state, self.precision.state_type)
                if rounded is not new_state:
                    new_state = rounded
                    if watch == FULL:
                        self.watch(new_state, chunk, f"state hand-off ({self.precision.state_type})",
                                   self.program.state[1])
        return outputs, new_state, npu.suspect

    def _call(self, npu: Npu, inputs: dict, state) -> dict[str, torch.Tensor]:
        kwargs = dict(inputs)
        if self.program.state is not None:
            kwargs[self.program.state[0]] = state
        result = self.program.fn(npu, **kwargs)
        if npu._phase is not None:
            raise DataflowError(f"Phase {npu._phase.name} is still open at the end of the program")
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) != len(self.program.returns):
            raise DataflowError(f"program {self.program.name} returns {len(result)} values, declared "
                                f"{len(self.program.returns)} ({', '.join(self.program.returns)})")
        return dict(zip(self.program.returns, result))

    def watch(self, tensor: torch.Tensor, chunk: int, where: str, name: str) -> None:
        """Remember the first place inf/NaN appears; later ones follow from it."""
        if self.first_nonfinite is not None:
            return
        with _no_torch_function():
            bad = ~torch.isfinite(tensor)
            if bool(bad.any()):
                seq = int(bad.reshape(tensor.shape[0], -1).any(1).nonzero()[0, 0]) if tensor.dim() > 1 else 0
                self.first_nonfinite = Nonfinite(chunk, where, name, seq)
