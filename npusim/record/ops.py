"""Which unit may run a torch op, and what its cost depends on.

Phase programs are plain torch code. While a chunk is recorded, every torch call goes through
`OpRecorder` (a TorchFunctionMode), which classifies it:
  matmul       Cube only; cost: M x N x K multiply-accumulates
  elementwise  Vector only; cost: output elements
  reduce       Vector only; cost: input elements (sums, scans)
  sequential   Vector only; cost: dependent steps + element operations (forward substitution)
  scalar       Vector unit's scalar loop (GetValue / SetValue on UB); cost: accesses (npusim/chip/issue.py)
  flag         a cross-core flag hop the Vector units wait on (an AIV <-> AIV barrier)
  layout       free on either unit (views, transposes, indexing: the copy engines handle them)
  const        free (masks, identity matrices)
  meta         not an op (shape, dtype queries)
An op the table does not know is an error rather than a silent zero cost.

Some ops come from the runtime rather than a torch call: the forward substitution of
npu.forward_substitution, and, for a program that declares its barriers (`@phase_program(...,
barriers="explicit")`), what an AscendC kernel's source issues beyond one instruction per torch op (barriers,
casts, UB copies, Brcb, scalar loops, flags): the Npu's calls (IssuedOps) and the data-flow checker's
records of them (Issued, part of dataflow.py's Checker). npusim/chip/issue.py times them.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import torch
from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils._pytree import tree_flatten

from npusim.errors import DataflowError

MATMUL, ELEMENTWISE, REDUCE, SEQUENTIAL = "matmul", "elementwise", "reduce", "sequential"
SCALAR, FLAG = "scalar", "flag"
UB_COPY, BRCB, CAST, DUP = "ub_copy", "brcb", "cast", "dup"   # Vector instructions a kernel's source names
LAYOUT, CONST, META, HOST = "layout", "const", "meta", "host"
UNIT_OF = {MATMUL: "cube", ELEMENTWISE: "vec", REDUCE: "vec", SEQUENTIAL: "vec", SCALAR: "vec", FLAG: "vec"}


@dataclass(frozen=True)
class Op:
    kind: str
    name: str
    macs: int = 0                 # matmul
    elements: int = 0             # elementwise / reduce / sequential element operations
    steps: int = 0                # sequential: dependent steps
    operand_bytes: int = 4        # matmul: widest operand element size as stored
    shape: tuple[int, ...] = ()   # matmul: (M, N, K); others: output shape
    scalar_operand: bool = False  # elementwise: fewer than two tensor inputs of more than one element
    broadcast: bool = False       # elementwise: a tensor input smaller than the output, expanded first
    lead: int = 0                 # matmul: the output's leading (batch) axis, 0 for a 2-D result
    repeats: int = 0              # Vector: repeats the instruction issues on each unit, set by the kernel
                                  # (a mask narrower than a repeat, one row a repeat); 0: by its bytes
    walls: int | None = None      # Vector: pipe_barrier(PIPE_V) waits after it, as the kernel's source counts
                                  # them; None: one after every instruction (npusim/chip/issue.py)

    def describe(self) -> str:
        if self.kind == MATMUL:
            m, n, k = self.shape
            return f"{self.name} {m}x{n}x{k} = {self.macs:,} MACs"
        if self.kind == SEQUENTIAL:
            return f"{self.name}: {self.steps} dependent steps, {self.elements:,} element ops"
        if self.kind == SCALAR:
            return f"{self.name}: {self.steps} scalar accesses a matrix"
        if self.kind == FLAG:
            return f"{self.name}: a cross-core flag hop"
        return f"{self.name} {self.kind}: {self.elements:,} elements"


_ELEMENTWISE = set("""
add sub rsub mul div true_divide floor_divide neg negative exp exp2 expm1 log log2 log10 log1p sigmoid
logsigmoid softplus abs clamp clamp_min clamp_max clip minimum maximum fmax fmin where masked_fill tril triu
pow sqrt rsqrt reciprocal square sign relu silu tanh lt le gt ge eq ne logical_and logical_or logical_not
addcmul addcdiv lerp copy fill zero isfinite isnan isinf float double half bfloat16 to type_as
nan_to_num normalize __setitem__
""".split())
_REDUCE = set("sum cumsum cumprod mean amax amin max min norm prod logcumsumexp logsumexp all any softmax "
              "var std".split())
_MATMUL = set("matmul mm bmm __matmul__ __rmatmul__ linear".split())
_LAYOUT = set("""
__getitem__ T mT H mH transpose permute view view_as reshape reshape_as unsqueeze squeeze expand expand_as
contiguous clone narrow select flatten unflatten split chunk unbind stack cat concat movedim swapaxes t
detach broadcast_to index_select diagonal flip __iter__
""".split())
_CONST = set("eye zeros ones full arange empty zeros_like ones_like full_like empty_like tensor as_tensor "
             "new_zeros new_ones new_full new_empty new_tensor".split())
_META = set("""
size dim shape dtype device numel is_floating_point __format__ __repr__ __str__ ndim is_contiguous stride
element_size data_ptr requires_grad __len__ __hash__ layout is_complex nelement names grad grad_fn
is_leaf _version output_nr __reduce_ex__ storage_offset untyped_storage __array__ __array_priority__
""".split())
_HOST = set("item tolist __bool__ __int__ __float__ __index__ numpy".split())

_KIND_CACHE: dict = {}


def _full_name(func) -> str:
    try:
        return resolve_name(func) or getattr(func, "__name__", repr(func))
    except Exception:  # noqa: BLE001 - resolve_name has no contract for foreign callables
        return getattr(func, "__name__", repr(func))


def base_name(func) -> str:
    """'torch.Tensor.mT.__get__' -> 'mT'; 'torch.Tensor.mul_' -> 'mul'; 'torch.tril' -> 'tril'."""
    parts = _full_name(func).split(".")
    if parts[-1] in ("__get__", "__set__"):
        parts = parts[:-1]
    name = parts[-1]
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    return name


def classify(func) -> tuple[str | None, str]:
    """(kind, name); kind is None for an op the cost model does not know."""
    hit = _KIND_CACHE.get(func)
    if hit is None:
        name = base_name(func)
        for kind, table in ((META, _META), (LAYOUT, _LAYOUT), (MATMUL, _MATMUL), (ELEMENTWISE, _ELEMENTWISE),
                            (REDUCE, _REDUCE), (CONST, _CONST), (HOST, _HOST)):
            if name in table:
                hit = (kind, name)
                break
        else:
            hit = (None, _full_name(func))
        _KIND_CACHE[func] = hit
    return hit


def tensors_in(obj) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(obj)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def cost_of(kind: str, name: str, inputs: list[torch.Tensor], outputs: list[torch.Tensor],
            operand_bytes: int) -> Op:
    """The Op record for one call, per (sequence, chunk): programs are recorded on one sequence."""
    if kind == MATMUL:
        a, b = inputs[0], inputs[1]
        out = outputs[0]
        k = a.shape[-1]
        m = a.shape[-2] if a.dim() > 1 else 1
        n = b.shape[-1] if b.dim() > 1 else 1
        return Op(MATMUL, name, macs=out.numel() * k, operand_bytes=operand_bytes, shape=(m, n, k),
                  lead=out.shape[0] if out.dim() > 2 else 0)
    if kind == REDUCE:
        elements = inputs[0].numel() if inputs else 0
        return Op(REDUCE, name, elements=elements, shape=tuple(outputs[0].shape) if outputs else ())
    if name in ("to", "float", "double", "half", "bfloat16", "type_as") and inputs and outputs and \
            outputs[0].dtype == inputs[0].dtype:
        return Op(ELEMENTWISE, name, elements=0, shape=tuple(outputs[0].shape))   # no-op cast
    elements = outputs[0].numel() if outputs else (inputs[0].numel() if inputs else 0)
    if name == "__setitem__" and len(inputs) > 1:
        elements = inputs[-1].numel()
    sizes = [x.numel() for x in inputs]
    return Op(ELEMENTWISE, name, elements=elements, shape=tuple(outputs[0].shape) if outputs else (),
              scalar_operand=sum(n > 1 for n in sizes) < 2, broadcast=any(1 < n < elements for n in sizes))


class OpRecorder(TorchFunctionMode):
    """Routes every torch call made by a phase program to the data-flow checker (`sink.on_op`)."""

    def __init__(self, sink):
        super().__init__()
        self.sink = sink

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind, name = classify(func)
        if kind == META:
            return func(*args, **kwargs)
        inputs = tensors_in((args, kwargs))
        self.sink.before_op(kind, name, inputs, func)
        result = func(*args, **kwargs)
        if name == "__setitem__":        # in place: the target is the output
            outputs = inputs[:1]
        else:
            outputs = tensors_in(result)
        self.sink.after_op(kind, name, inputs, outputs)
        return result


# ----- ops the runtime issues -------------------------------------------------------------------------------

_no_torch_function = torch._C.DisableTorchFunction


class Issued:
    """The Checker's part that records runtime-issued ops and explicit barriers."""
    explicit = False

    def _issued(self, op: Op) -> Op:
        """An op as the kernel issues it: in a program that declares its barriers, no wait after it until
        npu.pipe_barrier says so and a broadcast operand read by stride (its Brcb is an op of its own)."""
        if op.kind == MATMUL or not self.explicit:
            return op
        return replace(op, walls=0, broadcast=False)

    def barrier(self, count: int = 1) -> None:
        """`count` pipe_barrier(PIPE_V) (or WaitFlag<V_S>) waits after the phase's last op."""
        phase = self.phase
        if not self.explicit:
            raise DataflowError(f"program {self.program} calls npu.pipe_barrier but does not declare its barriers "
                                f"(@phase_program(..., barriers=\"explicit\"))")
        if phase is None or phase.unit != UNIT_OF[ELEMENTWISE] or not phase.ops:
            where = f"Phase {phase.name}" if phase else "outside any phase"
            raise DataflowError(f"a Vector barrier needs a Vector instruction before it in its phase ({where})")
        last = phase.ops[-1]
        phase.ops[-1] = replace(last, walls=(last.walls or 0) + count)

    def _vector_reads(self, name: str, inputs: list[torch.Tensor], what: str, whole: bool = False):
        """The current phase, a Vector one, reading `inputs` (each needed whole by every tile: `whole`)."""
        phase = self.phase
        if phase is None or phase.unit != UNIT_OF[ELEMENTWISE]:
            where = f"Phase {phase.name} (Cube)" if phase else "outside any phase"
            raise DataflowError(f"{name} is a Vector {what} but runs {where}")
        for t in inputs:
            self.read(t)
            self._use(self.info[id(t)])
            if whole:
                self._whole(self.info[id(t)])
        return phase

    def instruction(self, op: Op, inputs: list[torch.Tensor], output: torch.Tensor | None) -> None:
        """A Vector instruction issued by the runtime (a cast, a UB copy, a Brcb, a scalar loop, a flag)."""
        phase = self._vector_reads(op.name, inputs, "instruction")
        phase.ops.append(replace(op, walls=op.walls if op.walls is not None else (0 if self.explicit else None)))
        if output is not None:
            self._result(output)
        else:
            phase.step += 1

    def sequential(self, name: str, inputs: list[torch.Tensor], output: torch.Tensor, steps: int,
                   elements: int) -> None:
        """A sequential op (forward substitution) issued by the runtime, not by a torch call."""
        phase = self._vector_reads(name, inputs, "op", whole=True)
        phase.ops.append(Op(SEQUENTIAL, name, elements=elements, steps=steps, shape=tuple(output.shape)))
        self._result(output)


class IssuedOps:
    """The Npu's part that records an AscendC kernel's Vector instructions as its source issues them. A program
    declares `@phase_program(..., barriers="explicit")` to use them: its ops then wait for nothing until
    npu.pipe_barrier says so."""

    def pipe_barrier(self, count: int = 1) -> None:
        """pipe_barrier(PIPE_V) after the last Vector instruction (or a WaitFlag<V_S>: the scalar unit waits
        for the Vector pipe to drain)."""
        if self._checker is not None:
            self._checker.barrier(count)

    def cast(self, x: torch.Tensor, to: str) -> torch.Tensor:
        """Cast: to "fp32" from a 16-bit source, or to a 16-bit type from fp32 (its rounding applied)."""
        with _no_torch_function():
            out = (x * 1.0) if to == "fp32" else self._ex.precision.round(x * 1.0, to)
        self._instruction(Op(ELEMENTWISE, CAST, elements=x.numel(), shape=tuple(x.shape),
                             operand_bytes=4 if to in ("bf16", "fp16") else 2), [x], out)
        return out

    def ub_copy(self, x: torch.Tensor) -> torch.Tensor:
        """DataCopy UB -> UB of `x` (fp32)."""
        with _no_torch_function():
            out = x.clone()
        self._instruction(Op(ELEMENTWISE, UB_COPY, elements=x.numel(), shape=tuple(x.shape)), [x], out)
        return out

    def dup(self, value: float, like: torch.Tensor) -> torch.Tensor:
        """Duplicate: `value` into a tensor shaped as `like`."""
        with _no_torch_function():
            out = torch.full_like(like, value)
        self._instruction(Op(ELEMENTWISE, DUP, elements=out.numel(), shape=tuple(out.shape)), [], out)
        return out

    def brcb(self, x: torch.Tensor, width: int = 8) -> torch.Tensor:
        """Brcb: each element of x [..., n] into a block of `width` copies, [..., n, width]."""
        with _no_torch_function():
            out = x[..., None].expand(*x.shape, width).clone()
        self._instruction(Op(ELEMENTWISE, BRCB, elements=out.numel(), shape=tuple(out.shape)), [x], out)
        return out

    def scalar(self, name: str, fn: Callable, *inputs: torch.Tensor, accesses: int, matrices: int = 1,
               waits: int = 0) -> torch.Tensor:
        """A scalar loop over UB (GetValue / SetValue): `accesses` per matrix, `matrices` of them side by side
        (one per Vector unit that runs its own); `waits` WaitFlag<V_S> drains before it. Returns fn(*inputs)."""
        with _no_torch_function():
            out = fn(*inputs)
        self._instruction(Op(SCALAR, name, elements=matrices, steps=accesses, shape=tuple(out.shape), walls=waits),
                          list(inputs), out)
        return out

    def flag(self, name: str) -> None:
        """A cross-core flag hop both Vector units of the core wait on (CrossCoreBarrier between them)."""
        self._instruction(Op(FLAG, name), [], None)

    def _instruction(self, op: Op, inputs: list[torch.Tensor], output: torch.Tensor | None) -> None:
        if self._checker is not None:
            self._checker.instruction(op, inputs, output)
