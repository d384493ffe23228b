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
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils._pytree import tree_flatten

MATMUL, ELEMENTWISE, REDUCE, SEQUENTIAL = "matmul", "elementwise", "reduce", "sequential"
SCALAR, FLAG = "scalar", "flag"
UB_COPY, BRCB, CAST, DUP = "ub_copy", "brcb", "cast", "dup"   # Vector instructions a kernel's source names
LAYOUT, CONST, META, HOST = "layout", "const", "meta", "host"
COMPUTE_KINDS = (MATMUL, ELEMENTWISE, REDUCE, SEQUENTIAL, SCALAR, FLAG)
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
