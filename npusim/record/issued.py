"""Ops the runtime issues rather than a torch call: the forward substitution of npu.forward_substitution, and
for a program that declares its barriers (`@phase_program(..., barriers="explicit")`) what an AscendC kernel's
source issues beyond one instruction per torch op (barriers, row-wise repeats, casts, UB copies, Brcb, scalar
loops, flags). Part of the data-flow checker (dataflow.py); npusim/chip/issue.py times them."""
from __future__ import annotations

from dataclasses import replace

import torch

from npusim.errors import DataflowError
from npusim.record.graph import VEC
from npusim.record.ops import MATMUL, SEQUENTIAL, Op


class Issued:
    """The Checker's part that records runtime-issued ops, explicit barriers and row-wise repeats."""
    explicit = False
    repeats = 0                                 # > 0: ops recorded now issue this many repeats (npu.repeats)

    def set_repeats(self, repeats: int) -> None:
        self.repeats = repeats

    def _issued(self, op: Op) -> Op:
        """An op as the kernel issues it: with npu.repeats, that many repeats on each unit; in a program that
        declares its barriers, no wait after it until npu.pipe_barrier says so and a broadcast operand read by
        stride (its Brcb is an op of its own)."""
        if op.kind == MATMUL:
            return op
        if self.repeats:
            op = replace(op, repeats=self.repeats)
        return replace(op, walls=0, broadcast=False) if self.explicit else op

    def barrier(self, count: int = 1) -> None:
        """`count` pipe_barrier(PIPE_V) (or WaitFlag<V_S>) waits after the phase's last op."""
        phase = self.phase
        if not self.explicit:
            raise DataflowError(f"program {self.program} calls npu.pipe_barrier but does not declare its barriers "
                                f"(@phase_program(..., barriers=\"explicit\"))")
        if phase is None or phase.unit != VEC or not phase.ops:
            where = f"Phase {phase.name}" if phase else "outside any phase"
            raise DataflowError(f"a Vector barrier needs a Vector instruction before it in its phase ({where})")
        last = phase.ops[-1]
        phase.ops[-1] = replace(last, walls=(last.walls or 0) + count)

    def instruction(self, op: Op, inputs: list[torch.Tensor], output: torch.Tensor | None) -> None:
        """A Vector instruction issued by the runtime (a cast, a UB copy, a Brcb, a scalar loop, a flag)."""
        phase = self.phase
        if phase is None or phase.unit != VEC:
            where = f"Phase {phase.name} (Cube)" if phase else "outside any phase"
            raise DataflowError(f"{op.name} is a Vector instruction but runs {where}")
        for t in inputs:
            self.read(t)
            self._use(self.info[id(t)])
        phase.ops.append(replace(op, walls=op.walls if op.walls is not None else (0 if self.explicit else None)))
        if output is not None:
            self._result(output)
        else:
            phase.step += 1

    def sequential(self, name: str, inputs: list[torch.Tensor], output: torch.Tensor, steps: int,
                   elements: int) -> None:
        """A sequential op (forward substitution) issued by the runtime, not by a torch call."""
        phase = self.phase
        if phase is None or phase.unit != VEC:
            where = f"Phase {phase.name} (Cube)" if phase else "outside any phase"
            raise DataflowError(f"{name} is a Vector op but runs {where}")
        for t in inputs:
            self.read(t)
            self._use(self.info[id(t)])
            self._whole(self.info[id(t)])
        phase.ops.append(Op(SEQUENTIAL, name, elements=elements, steps=steps, shape=tuple(output.shape)))
        self._result(output)
