"""An AscendC kernel's Vector instructions as its source issues them (npusim/chip/issue.py): the cycles of each
mechanism worked out by hand from the profile's fields, and the recording rules of a program that declares its
barriers (npusim/record/ops.py: Issued, IssuedOps)."""
from __future__ import annotations

import pytest
import torch

from npusim import DataflowError, load_profile, phase_program
from npusim.chip.isa import vector_op_cycles
from npusim.chip.issue import declared, op_cycles
from npusim.record.ops import BRCB, CAST, ELEMENTWISE, FLAG, SCALAR, UB_COPY, Op
from npusim.record.precision import Precision
from npusim.record.program import Executor

P = load_profile("ascend-910b2")
WALL = P.isa.vec_dependent_cycles


def test_a_narrow_tile_issued_a_row_a_repeat():
    """[2, 16, 8] fp32 over two AIVs: 512 B each, two repeats by bytes; with mask 8 and a repeat a row,
    16 repeats of a two-tensor op (2 cycles) = 32 cycles, and one wall after it."""
    op = Op(ELEMENTWISE, "mul", elements=2 * 16 * 8, shape=(2, 16, 8), repeats=16, walls=0)
    assert vector_op_cycles(op, P, 2) == pytest.approx(32)
    op = Op(ELEMENTWISE, "mul", elements=2 * 16 * 8, shape=(2, 16, 8), repeats=16, walls=1)
    assert vector_op_cycles(op, P, 2) == pytest.approx(32 + WALL)
    by_bytes = Op(ELEMENTWISE, "mul", elements=2 * 16 * 8, shape=(2, 16, 8), walls=0)
    assert vector_op_cycles(by_bytes, P, 2) == pytest.approx(max(P.isa.vec_min_cycles, 2 * 2))


def test_copies_brcb_casts():
    """A UB copy of 16 floats: 64 B at 262 B a cycle, so the instruction's least, 3 cycles. A Brcb of 16 into
    [16, 8]: 512 B out, two repeats at one cycle. A cast of 2048 bf16 up: 4 KiB of source, 16 repeats; of
    2048 fp32 down: 8 KiB, 32 repeats."""
    assert vector_op_cycles(Op(ELEMENTWISE, UB_COPY, elements=32, shape=(2, 16)), P, 2) == pytest.approx(3)
    assert vector_op_cycles(Op(ELEMENTWISE, BRCB, elements=256, shape=(2, 16, 8)), P, 2) == pytest.approx(3)
    up = Op(ELEMENTWISE, CAST, elements=4096, shape=(2, 16, 128), operand_bytes=2, walls=1)
    assert vector_op_cycles(up, P, 2) == pytest.approx(16 + WALL)
    down = Op(ELEMENTWISE, CAST, elements=4096, shape=(2, 16, 128), operand_bytes=4, walls=0)
    assert vector_op_cycles(down, P, 2) == pytest.approx(32)


def test_scalar_loops_and_flags():
    """3402 GetValue / SetValue on one AIV; a loop each AIV runs for its own head counts once a unit; a flag
    hop between the two AIVs is one cross-core hop, sync.latency_us at 1.8 GHz."""
    loop = Op(SCALAR, "loop", elements=1, steps=3402, walls=0)
    assert vector_op_cycles(loop, P, 1) == pytest.approx(3402 * P.isa.scalar_access_cycles)
    assert vector_op_cycles(Op(SCALAR, "loop", elements=2, steps=32, walls=0), P, 2) == pytest.approx(
        32 * P.isa.scalar_access_cycles)
    assert vector_op_cycles(Op(FLAG, "barrier"), P, 2) == pytest.approx(P.sync.latency_us * 1800)


def test_an_op_recorded_by_torch_keeps_one_wait_per_instruction():
    """Without declared barriers an op is an instruction and a wait (what the GDN kernels' programs assume)."""
    op = Op(ELEMENTWISE, "mul", elements=128 * 128, shape=(128, 128))
    repeats = 128 * 128 // 2 * 4 // 256                  # half the tile on each AIV: 128 repeats, one issue
    assert vector_op_cycles(op, P, 2) == pytest.approx(2 * repeats + WALL)


def _record(program):
    ex = Executor(program, Precision("bf16", {}))
    return ex.record({"x": torch.randn(16, 16)}, None)


def test_declared_barriers_are_counted_from_the_program():
    @phase_program("explicit", returns=("y",), barriers="explicit")
    def explicit(npu, x):
        with npu.vec("v"):
            a = x * 2.0
            b = a + 1.0
            npu.pipe_barrier()
            with npu.repeats(16):
                y = b[:, :8] * b[:, 8:]
            npu.pipe_barrier(2)
        return y
    ops = _record(explicit).phases[0].ops
    assert [op.walls for op in ops] == [0, 1, 2]
    assert ops[2].repeats == 16


def test_a_barrier_needs_declared_barriers():
    @phase_program("implicit", returns=("y",))
    def implicit(npu, x):
        with npu.vec("v"):
            y = x * 2.0
            npu.pipe_barrier()
        return y
    with pytest.raises(DataflowError, match="declare its barriers"):
        _record(implicit)


def test_a_flag_a_scalar_loop_and_a_copy_as_issue_py_times_them():
    """By hand from the profile: a flag is the sync latency in cycles (1800 cycles a us at 1.8 GHz) plus its
    walls; a scalar loop of 64 stores over 4 matrices on 2 AIVs runs 2 matrices on each, 128 accesses; a UB -> UB
    copy of 1024 fp32 on 2 AIVs moves 2 KiB on each at 262 bytes a cycle."""
    never = lambda cls: pytest.fail("no class cost for these")         # noqa: E731
    flag = Op(FLAG, "wait", walls=1)
    assert op_cycles(flag, P, 2, "binary", never) == pytest.approx(P.sync.latency_us * 1800 + WALL)
    loop = Op(SCALAR, "masks", elements=4, steps=64, walls=0)
    assert op_cycles(loop, P, 2, "binary", never) == pytest.approx(128 * P.isa.scalar_access_cycles)
    copy = Op(ELEMENTWISE, UB_COPY, elements=1024, walls=0)
    assert op_cycles(copy, P, 2, "unary", never) == pytest.approx(2048 / 262)
    assert declared(flag) and declared(copy) and not declared(Op(ELEMENTWISE, "mul", elements=64))
