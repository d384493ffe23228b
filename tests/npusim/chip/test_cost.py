"""A phase's time on the profile's rates, without the instruction tables, worked by hand on the toy program:
P reduces x [1000, 100] (1e5 elements at 1e5 a us), Q multiplies y^T [1, 1000] by w [1000, 1000] (1e6 MACs at
1e6 a us)."""
import pytest

from npusim.chip.cost import compute_us, phase_us

from tests.conftest import randn, record, toy_program


def _phases():
    graph = record(toy_program(), x=randn(1000, 100), w=randn(1000, 1000, seed=1))
    return {s.name: s for s in graph.steps if s.name in ("P", "Q")}


def test_each_unit_s_work_at_its_rate(toy_profile):
    profile, phases = toy_profile(), _phases()
    assert compute_us(phases["P"], profile) == pytest.approx(1.0)
    assert compute_us(phases["Q"], profile) == pytest.approx(1.0)
    assert phase_us(phases["Q"], profile) == pytest.approx(1.0)            # GM at an unlimited rate: nothing more


def test_an_instruction_s_overhead_is_paid_once_per_instruction(toy_profile):
    phases = _phases()
    slow = toy_profile().replace(vector__op_overhead_cycles=500.0, cube__op_overhead_cycles=2000.0)   # 1 GHz
    ops = len([op for op in phases["P"].ops if op.elements or op.steps])
    assert compute_us(phases["P"], slow) == pytest.approx(1.0 + 0.5 * ops)
    assert compute_us(phases["Q"], slow) == pytest.approx(1.0 + 2.0)        # one matmul
