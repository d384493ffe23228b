"""An in-place op (x.mul_(y)) keeps its tensor's buffer, as an AscendC instruction writing its own tile
does: the phase holds that buffer once, from where it was made; an in-place op on an input is refused."""
import pytest
import torch

from npusim import DataflowError, phase_program
from tests.conftest import record


@phase_program("in_place", returns=("y",))
def in_place(npu, a, b):
    with npu.vec("v"):
        y = a * 2.0                 # made at step 0: 64 x 4 B
        y.mul_(b)                   # in place: still y's buffer
        y.add_(b)
    return y


@phase_program("copies", returns=("y",))
def copies(npu, a, b):
    with npu.vec("v"):
        x = a * 2.0
        z = x * b
        y = z + b
    return y


@phase_program("into_input", returns=("a",))
def into_input(npu, a, b):
    with npu.vec("v"):
        a.mul_(b)
    return a


def _made(graph):
    (phase,) = graph.phases
    return [lo for lo in phase.locals if lo.source == "made"]


def test_in_place_keeps_one_buffer_from_where_it_was_made():
    a, b = torch.ones(64), torch.ones(64)
    made = _made(record(in_place, a=a.clone(), b=b))
    assert [(lo.nbytes, lo.first) for lo in made] == [(256, 0)]
    assert len(_made(record(copies, a=a.clone(), b=b))) == 3           # three results, three buffers
    (phase,) = record(in_place, a=a.clone(), b=b).phases
    assert [op.name for op in phase.ops] == ["mul", "mul", "add"]     # each op still costs its instruction


def test_in_place_into_an_input_is_refused():
    with pytest.raises(DataflowError, match="writes into a"):
        record(into_input, a=torch.ones(4), b=torch.ones(4))
