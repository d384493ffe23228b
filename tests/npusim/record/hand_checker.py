"""A chunk recorded by hand: the data-flow checker (npusim.record.dataflow with its hand-offs) driven event by
event as the Npu's op recorder drives it, for the tests of the checker and of its hand-offs."""
from contextlib import contextmanager

import torch

from npusim.record.dataflow import Checker
from npusim.record.graph import CUBE, VEC
from npusim.record.ops import ELEMENTWISE, MATMUL
from npusim.record.precision import Precision


class Chunk:
    """One chunk recorded by hand: inputs, phases (their tensors named as the program binds them), ops."""

    def __init__(self, precision=Precision("fp32"), resident=(), head_major=False):
        self.checker = Checker("toy", precision, resident, gm_layout="head-major" if head_major else "")

    def input(self, name, tensor, storage="fp32", state=False):
        self.checker.register_input(name, tensor, storage, is_state=state)
        return tensor

    @contextmanager
    def phase(self, name, unit):
        self.checker.begin_phase(name, unit)
        names: dict = {}
        yield names
        self.checker.end_phase({id(t): n for n, t in names.items()})

    def op(self, kind, name, fn, *inputs):
        self.checker.before_op(kind, name, list(inputs), fn)
        out = fn(*inputs)
        self.checker.after_op(kind, name, list(inputs), [out])
        return out

    def mul(self, x, by=2.0):
        return self.op(ELEMENTWISE, "mul", lambda a: a * by, x)

    def matmul(self, a, b):
        return self.op(MATMUL, "matmul", torch.matmul, a, b)

    def finish(self, state=None, **returns):
        return self.checker.finish(returns, state, {})

    def vec_then_cube(self, x, w):
        """Phase P (Vec): y = 2 x; a sync carrying y; Phase Q (Cube): z = y @ w. Returns (y, z)."""
        with self.phase("P", VEC) as names:
            names["y"] = y = self.mul(x)
        self.checker.sync((y,))
        with self.phase("Q", CUBE) as names:
            names["z"] = z = self.matmul(y, w)
        return y, z
