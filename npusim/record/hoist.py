"""The fast chunk step split in two: the ops that do not depend on the carried state, and those that do.

`Tape.capture` runs the fast step (`Replay.eager_step`) once under a TorchFunctionMode that writes down
every torch call: the function, its arguments (tensors as slots) and its results. Every chunk has the same
shapes, so the same calls with the same arguments compute any other chunk. A call depends on the state when
one of its tensors does (transitively, from the state input), or when it touches memory that a
state-dependent call wrote or read (views share memory; an in-place write is ordered after the reads it
follows). The others (v3: Phases A-C, W, U and Q K^T of Phase D, their roundings and watch sums) can run
ahead of the chunk loop, for the next chunks, while the state-dependent calls of this chunk run
(`npusim.record.pipeline`): the same calls on the same tensors in the same order within each half, so the
same bits (`tests/kda/test_hoist_designs.py`).

A step the tape cannot replay says why (`Tape.capture` raises `Untapeable`), and the replay runs the
step call by call instead: a call whose result is a value read from a tensor (`.item()`, `bool(t)`: the program would branch
on data), or one that writes into a tensor the tape did not make (shared between chunks).
"""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

# calls that read a tensor's metadata: the same for every chunk, so they are not replayed
_METADATA = {"shape", "size", "dim", "ndim", "dtype", "device", "numel", "stride", "is_contiguous",
             "__len__", "element_size", "itemsize", "layout", "requires_grad", "is_floating_point",
             "is_complex", "is_cuda", "grad_fn", "names", "storage_offset"}


class Untapeable(Exception):
    """The step cannot be replayed as a list of calls (the message says why)."""


def _name(func) -> str:
    name = getattr(func, "__name__", str(func))
    if name in ("__get__", "__set__"):
        name = getattr(getattr(func, "__self__", None), "__name__", name)
    return name


def _in_place(func, kwargs) -> bool:
    name = _name(func)
    return (name == "__setitem__" or (name.endswith("_") and not name.startswith("__"))
            or (name.startswith("__i") and name.endswith("__")) or "out" in kwargs)


class Slot:
    """A tensor of the captured step, by its position `i` in a chunk's list of values."""
    __slots__ = ("i",)

    def __init__(self, i: int):
        self.i = i


def _template(x, ref):
    """An argument with its tensors as slots (`ref`), one level into tuples and lists; and whether it holds
    a slot. Deeper nesting: Untapeable."""
    if isinstance(x, torch.Tensor):
        return ref(x), True
    if isinstance(x, (tuple, list)):
        if any(isinstance(y, (tuple, list, dict)) and _has_tensor(y) for y in x):
            raise Untapeable("an argument nests tensors two levels deep")
        if any(isinstance(y, torch.Tensor) for y in x):
            return type(x)(ref(y) if isinstance(y, torch.Tensor) else y for y in x), True
    elif isinstance(x, dict) and _has_tensor(x):
        raise Untapeable("an argument holds tensors in a dict")
    return x, False


def _constant(x) -> bool:
    """No slot in it (its tensors are constants: made before the step)."""
    if isinstance(x, Slot):
        return False
    return not (isinstance(x, (tuple, list)) and any(isinstance(y, Slot) for y in x))


def _has_tensor(x) -> bool:
    return any(isinstance(y, torch.Tensor) for y in tree_flatten(x)[0])


def _fill(x, values: list):
    if isinstance(x, Slot):
        return values[x.i]
    return type(x)(values[y.i] if isinstance(y, Slot) else y for y in x)


class _Call:
    """One recorded call: `func(*args, **kwargs)` with the slots filled in; its tensor results go to
    `outs` (one slot, or one per item of a returned tuple)."""
    __slots__ = ("func", "args", "kwargs", "holes", "kwholes", "outs", "single", "reads", "writes", "name")

    def __init__(self, func, args, kwargs, holes, kwholes, outs, single, reads, writes, name):
        self.func, self.args, self.kwargs, self.holes, self.kwholes = func, args, kwargs, holes, kwholes
        self.outs, self.single, self.reads, self.writes, self.name = outs, single, reads, writes, name

    def run(self, values: list) -> None:
        a = self.args
        if self.holes:
            a = list(a)
            for j in self.holes:
                a[j] = _fill(a[j], values)
        kw = self.kwargs
        if self.kwholes:
            kw = dict(kw)
            for k in self.kwholes:
                kw[k] = _fill(kw[k], values)
        result = self.func(*a, **kw)
        if self.single:
            values[self.outs[0]] = result
        elif self.outs:
            for i, r in zip(self.outs, result):
                if i is not None:
                    values[i] = r


class _Recorder(TorchFunctionMode):
    def __init__(self, tape: "Tape"):
        super().__init__()
        self.tape = tape

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        self.tape._record(func, args, kwargs, result)
        return result


class Tape:
    """The calls of one fast chunk step, split into `ahead` (state-independent) and `after` (the rest)."""

    # set by `capture`: the step's results as slots (or constants), and the split
    outputs: dict[str, Slot | torch.Tensor]
    new_state: Slot | torch.Tensor | None
    flag: Slot | torch.Tensor | None
    ahead: list[_Call]
    after: list[_Call]
    dependent: set[int]
    size: int
    drop: list[int]

    def __init__(self) -> None:
        self.values: list = []          # slot -> the tensor of the captured chunk (kept: ids stay unique)
        self.slot: dict[int, int] = {}  # id(tensor) -> slot
        self.calls: list[_Call] = []
        self.inputs: dict[str, int] = {}
        self.state: int | None = None
        self.why: str | None = None     # the first reason the step cannot be replayed

    # -- capture ---------------------------------------------------------------------------------------
    @classmethod
    def capture(cls, step, inputs: dict, state):
        """Run `step(inputs, state)` recording its calls; returns (tape, step's result). The result is a
        (dict of tensors, tensor or None, tensor or None), as `Replay.eager_step` returns."""
        tape = cls()
        for name, v in inputs.items():
            if isinstance(v, torch.Tensor):
                tape.inputs[name] = tape._new(v)
        if state is not None:
            tape.state = tape._new(state)
        with _Recorder(tape):
            result = step(inputs, state)
        if tape.why is not None:
            raise Untapeable(tape.why)
        outputs, new_state, flag = result
        tape.outputs = {k: tape._ref(v) for k, v in outputs.items()}
        tape.new_state = None if new_state is None else tape._ref(new_state)
        tape.flag = None if flag is None else tape._ref(flag)
        tape._split()
        return tape, result

    def _new(self, t) -> int:
        self.slot[id(t)] = len(self.values)
        self.values.append(t)
        return len(self.values) - 1

    def _ref(self, t: torch.Tensor) -> Slot | torch.Tensor:
        """A tensor's slot; a tensor the step did not make (a cached identity): a constant."""
        i = self.slot.get(id(t))
        return Slot(i) if i is not None else t

    def _record(self, func, args, kwargs, result) -> None:
        name = _name(func)
        if name in _METADATA or self.why is not None:
            return
        try:
            self._append(func, name, args, kwargs, result)
        except Untapeable as err:
            self.why = f"{name}: {err}"

    def _append(self, func, name, args, kwargs, result) -> None:
        single = isinstance(result, torch.Tensor)
        items = [result] if single else list(result) if isinstance(result, (tuple, list)) else \
            [] if result is None else None
        if items is None or any(not isinstance(r, (torch.Tensor, type(None))) for r in items):
            raise Untapeable("the step reads a value from a tensor: it may branch on data")
        tensors = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
        reads = [self.slot[id(x)] for x in tensors if id(x) in self.slot]
        writes = []
        if _in_place(func, kwargs):
            for t in tree_flatten(kwargs.get("out", args[0] if args else None))[0]:
                if isinstance(t, torch.Tensor):
                    if id(t) not in self.slot:
                        raise Untapeable("it writes into a tensor the step did not make (shared by chunks)")
                    writes.append(self.slot[id(t)])
        holes, targs = [], []
        for j, x in enumerate(args):
            x, slotted = _template(x, self._ref)
            targs.append(x)
            if slotted:
                holes.append(j)
        kwholes, tkw = [], {}
        for k, x in kwargs.items():
            tkw[k], slotted = _template(x, self._ref)
            if slotted:
                kwholes.append(k)
        holes = [j for j in holes if not _constant(targs[j])]
        kwholes = [k for k in kwholes if not _constant(tkw[k])]
        outs = [None if r is None else self.slot[id(r)] if id(r) in self.slot else self._new(r) for r in items]
        self.calls.append(_Call(func, tuple(targs), tkw, holes, kwholes, outs, single, reads, writes, name))

    # -- the split -------------------------------------------------------------------------------------
    def _split(self) -> None:
        def mem(i):
            return self.values[i].untyped_storage().data_ptr()
        dep: set[int] = set()
        dep_written: set[int] = set()     # memory a state-dependent call wrote
        dep_read: set[int] = set()        # memory a state-dependent call read
        if self.state is not None:
            dep.add(self.state)
            dep_written.add(mem(self.state))
            dep_read.add(mem(self.state))
        self.ahead, self.after = [], []
        for c in self.calls:
            d = (any(i in dep for i in c.reads) or any(mem(i) in dep_written for i in c.reads)
                 or any(mem(i) in dep_read or mem(i) in dep_written for i in c.writes))
            if d:
                dep.update(i for i in (c.outs or ()) if i is not None)
                dep.update(c.writes)
                dep_written.update(mem(i) for i in c.writes)
                dep_written.update(mem(i) for i in (c.outs or ()) if i is not None)
                dep_read.update(mem(i) for i in c.reads)
            (self.after if d else self.ahead).append(c)
        self.dependent = dep
        self.size = len(self.values)
        # what the state-dependent half reads of the other's: the rest is let go once a chunk is started,
        # so that chunks waiting ahead hold only that (and the allocator reuses the rest while it is warm)
        needed = {i for c in self.after for i in c.reads}
        needed.update(r.i for r in (*self.outputs.values(), self.new_state, self.flag) if isinstance(r, Slot))
        self.drop = [i for i in range(self.size) if i not in needed]
        self.values, self.slot = [], {}       # the captured chunk's tensors are no longer needed

    # -- replay ----------------------------------------------------------------------------------------
    def start(self, inputs: dict) -> list:
        """A fresh slot list for one chunk with its inputs, and the state-independent calls run."""
        values = [None] * self.size
        for name, i in self.inputs.items():
            values[i] = inputs[name]
        for c in self.ahead:
            c.run(values)
        for i in self.drop:
            values[i] = None
        return values

    def finish(self, values: list, state):
        """The state-dependent calls of a chunk started by `start`: (outputs, next state, flag)."""
        if self.state is not None:
            values[self.state] = state
        for c in self.after:
            c.run(values)
        def get(r):
            return values[r.i] if isinstance(r, Slot) else r
        outputs = {k: get(v) for k, v in self.outputs.items()}
        return (outputs, None if self.new_state is None else get(self.new_state),
                None if self.flag is None else get(self.flag))
