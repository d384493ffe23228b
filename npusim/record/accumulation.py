"""Cube matmuls that accumulate in a narrow type: the precision policy's `accumulate` (e.g. fp16 in L0C)."""
from __future__ import annotations

from torch.overrides import TorchFunctionMode

from npusim.record.ops import MATMUL, classify
from npusim.record.precision import DTYPES


class NarrowAccumulation(TorchFunctionMode):
    """Cube matmuls that accumulate in a narrow type (the policy's `accumulate`): the contraction runs in
    steps of K_STEP (the Cube's 16-deep fractal) and the running sum is rounded to the type after each."""
    K_STEP = 16

    def __init__(self, type_name: str):
        super().__init__()
        self.target = DTYPES[type_name]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind, name = classify(func)
        if kind != MATMUL or name == "linear" or kwargs or len(args) != 2:
            return func(*args, **kwargs)
        a, b = (args[1], args[0]) if name == "__rmatmul__" else args
        if a.dim() < 2 or b.dim() < 2:
            return func(*args, **kwargs)
        acc = None
        for k in range(0, a.shape[-1], self.K_STEP):
            part = a[..., k:k + self.K_STEP] @ b[..., k:k + self.K_STEP, :]
            acc = part if acc is None else acc + part
            acc = acc.to(self.target).to(part.dtype)
        return acc if acc is not None else func(*args, **kwargs)
