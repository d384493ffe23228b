"""The instruction and transfer tables (npusim/chip/isa.py) against cycles counted by hand from msKPP's
measured 910B tables (Ascend/mskpp, csrc/prof_data/resource910b.cpp), as the calibrated profile's [isa] table
quotes them. The two FITTED fields are set to round numbers here (a dependent wait of 10 cycles, a strided
row of 16), so every expectation below is arithmetic on published figures."""
import math

import pytest

from npusim import Precision, load_profile, phase_program
from npusim.chip import isa
from npusim.model.template import _link_us, build_template
from npusim.record.ops import ELEMENTWISE, MATMUL, REDUCE, Op
from tests.conftest import randn, record

DEP, BURST = 10.0, 16.0
P = load_profile("ascend-910b2").replace(isa__vec_dependent_cycles=DEP, isa__gm_burst_cycles=BURST)


def test_the_profile_quotes_mskpp_tables():
    # msKPP resource910b.cpp: VADD_FP32 3.09 cycles at repeat 1 and 2.00 per repeat; VADDS/VCONV 1.00; VEXP
    # and VLN 2.00; VDIV 4.00; VCADD 3.00; MMAD 2.13 + 1 per fractal; L1 -> L0A 2 + B / 263.1, L0B 2 + B / 131.6;
    # GM -> L1 205.8 + B / 174.2; GM -> UB 64.1 + B / 47.7; UB -> GM 87.8 + B / 73.1; L0C -> GM 85 min, 122.6 B.
    i = P.isa
    assert (i.vec_repeat_bytes, i.vec_min_cycles, i.vec_binary_cycles, i.vec_unary_cycles, i.vec_exp_cycles,
            i.vec_div_cycles, i.vec_reduce_cycles) == (256, 3, 2, 1, 2, 4, 3)
    assert (i.mmad_fixed_cycles, i.mmad_fractal_cycles, i.mte1_fixed_cycles, i.mte1_l0a_bytes_per_cycle,
            i.mte1_l0b_bytes_per_cycle) == (2.1, 1.0, 2.0, 263.1, 131.6)
    assert (i.gm_l1_fixed_cycles, i.gm_l1_bytes_per_cycle, i.gm_ub_fixed_cycles, i.gm_ub_bytes_per_cycle,
            i.ub_gm_fixed_cycles, i.ub_gm_bytes_per_cycle, i.fixpipe_min_cycles, i.fixpipe_bytes_per_cycle) == \
        (205.8, 174.2, 64.1, 47.7, 87.8, 73.1, 85.0, 122.6)
    assert P.cube.macs_per_cycle == 4096 and P.chip.vec_per_core == 2 and P.chip.clock_ghz == 1.8


@pytest.mark.parametrize("repeats, issues", [(1, 1), (100, 1), (255, 1), (256, 2), (510, 2), (511, 3)])
def test_a_vector_instruction_takes_at_most_255_repeats(repeats, issues):
    # fp32: 64 elements a 256-B repeat. A two-tensor add: max(3 x issues, 2 x repeats) + 10 x issues.
    # 255 repeats: 510 + 10 = 520 cycles; 256 repeats are two instructions: 512 + 20 = 532.
    want = max(3 * issues, 2 * repeats) + DEP * issues
    assert isa.instruction_cycles(P, "binary", 64 * repeats) == pytest.approx(want)
    # a recorded add over both AIVs: each takes half the elements
    op = Op(ELEMENTWISE, "add", elements=2 * 64 * repeats, shape=(2 * 64 * repeats,))
    assert isa.vector_op_cycles(op, P, units=2) == pytest.approx(want)


@pytest.mark.parametrize("name, per_repeat", [("exp", 2), ("log", 2), ("div", 4), ("sqrt", 4), ("mul", 2),
                                              ("neg", 1), ("float", 1)])
def test_each_vector_op_costs_its_class(name, per_repeat):
    # 100 repeats on each AIV (6400 fp32 elements): VLN as VEXP 2 cycles a repeat (msKPP resource910b.cpp:2882),
    # VDIV 4, a unary op or a cast 1; each one instruction, plus the dependent wait
    op = Op(ELEMENTWISE, name, elements=2 * 6400, shape=(2 * 6400,))
    assert isa.vector_op_cycles(op, P, units=2) == pytest.approx(per_repeat * 100 + DEP)


def test_composite_ops_and_broadcasts_and_row_sums():
    n = 2 * 6400                                          # 100 repeats on each AIV
    # sigmoid = exp, a unary (1 + x) and a div: 200 + 100 + 400 cycles and three waits
    assert isa.vector_op_cycles(Op(ELEMENTWISE, "sigmoid", elements=n), P, 2) == pytest.approx(700 + 3 * DEP)
    # a mul with a smaller tensor expanded first: the expand (unary, 100) then the mul (200)
    bc = Op(ELEMENTWISE, "mul", elements=n, broadcast=True)
    assert isa.vector_op_cycles(bc, P, 2) == pytest.approx(300 + 2 * DEP)
    # a mul by a scalar: one unary pass (VMULS)
    assert isa.vector_op_cycles(Op(ELEMENTWISE, "mul", elements=n, scalar_operand=True), P, 2) == \
        pytest.approx(100 + DEP)
    # a row sum: VCADD 3 a repeat
    assert isa.vector_op_cycles(Op(REDUCE, "sum", elements=n), P, 2) == pytest.approx(300 + DEP)
    # a cumsum along 64 rows of 128 fp32 (per AIV: 64 rows of 64 elements, one repeat each): 64 dependent adds,
    # each max(3, 2) + 10
    cs = Op(REDUCE, "cumsum", elements=2 * 64 * 64, shape=(64, 128))
    assert isa.vector_op_cycles(cs, P, 2) == pytest.approx(64 * (3 + DEP))


def _matmul(m, n, k, operand_bytes=2):
    return Op(MATMUL, "matmul", macs=m * n * k, operand_bytes=operand_bytes, shape=(m, n, k))


def test_a_matmul_with_one_and_two_l0_buffers():
    # 64 x 128 x 128, bf16 operands: 4 x 8 x 8 = 256 fractals, one a cycle: MMAD 2.1 + 256 = 258.1;
    # MTE1: A 64 x 128 x 2 = 16384 B, B 128 x 128 x 2 = 32768 B: 2 x 2 + 16384 / 263.1 + 32768 / 131.6;
    # the FixPipe drains 64 x 128 fp32 = 32768 B: max(85, 32768 / 122.6).
    mte1 = 4 + 16384 / 263.1 + 32768 / 131.6
    mmad = 2.1 + 256
    fixpipe = max(85, 32768 / 122.6)
    one = P.replace(core__buffer_num=1)
    assert isa.cube_op_cycles(_matmul(64, 128, 128), one) == pytest.approx(mte1 + mmad + fixpipe)
    # BUFFER_NUM 2: the next operands load into the other L0A/L0B buffer while the MMAD runs
    assert P.core.buffer_num == 2
    assert isa.cube_op_cycles(_matmul(64, 128, 128), P) == pytest.approx(max(mte1, mmad) + fixpipe)
    # fp32 operands: each fractal at the fp32 rate (4096 / 1024 = 4 cycles) and twice the bytes
    mte1_32 = 4 + 32768 / 263.1 + 65536 / 131.6
    assert isa.cube_op_cycles(_matmul(64, 128, 128, 4), P) == pytest.approx(max(mte1_32, 2.1 + 4 * 256) + fixpipe)


def test_strided_rows_cost_a_burst_after_the_first():
    # a [64, 128] bf16 tile of FLA's [B, T, H, D] layout: 64 rows H x D apart, 16384 B
    assert isa.load_cycles(P, 16384, to_l1=True, rows=64) == pytest.approx(205.8 + 16384 / 174.2 + 63 * BURST)
    assert isa.load_cycles(P, 16384, to_l1=False, rows=64) == pytest.approx(64.1 + 16384 / 47.7 + 63 * BURST)
    assert isa.store_cycles(P, 16384, from_l0c=False, rows=64) == pytest.approx(87.8 + 16384 / 73.1 + 63 * BURST)
    # one contiguous row: no burst at all
    assert isa.load_cycles(P, 16384, to_l1=True, rows=1) == pytest.approx(205.8 + 16384 / 174.2)
    assert isa.store_cycles(P, 16384, from_l0c=True, rows=64) == pytest.approx(16384 / 122.6)


def test_a_16_bit_hand_off_is_cast_on_the_vector_side():
    # Vec -> Cube, a [64, 128] bf16 payload (16384 B): each AIV stores its half from UB (MTE3 87.8 + 8192 /
    # 73.1), the Cube loads the whole into L1 (MTE2 205.8 + 16384 / 174.2), and each AIV first casts its
    # 4096 fp32 results down: 4096 x 2 B = 32 repeats at 1 cycle, + 10. At 1.8 GHz: cycles / 1800 us.
    store, load, cast = 87.8 + 8192 / 73.1, 205.8 + 16384 / 174.2, 32 + DEP
    assert _link_us(P, 16384, "vec->cube", [(16384, "bf16")]) == pytest.approx((store + load + cast) / 1800)
    # Cube -> Vec: each AIV loads its half into UB (64.1 + 8192 / 47.7) and casts it up (32 + 10)
    assert _link_us(P, 16384, "cube->vec", [(16384, "bf16")]) == pytest.approx((64.1 + 8192 / 47.7 + cast) / 1800)
    # fp32 needs no cast
    assert _link_us(P, 16384, "cube->vec", [(16384, "fp32")]) == pytest.approx((64.1 + 8192 / 47.7) / 1800)


def test_a_recorded_bf16_sync_is_timed_with_its_cast():
    @phase_program("handoff", returns=("z",))
    def program(npu, x, w):
        with npu.vec("P"):
            y = x * 2.0                         # [1, 64, 128]
        npu.sync(y)
        with npu.cube("Q"):
            z = y @ w
        return z
    graph = record(program, Precision("bf16"), x=randn(1, 64, 128), w=randn(1, 128, 128, seed=1))
    sync = next(n for n in build_template(graph, P).nodes if n.name == "sync1")
    store, load, cast = 87.8 + 8192 / 73.1, 205.8 + 16384 / 174.2, 32 + DEP
    assert sync.nbytes == 16384 and sync.busy_us == pytest.approx((store + load + cast) / 1800)
    assert sync.delay_us == sync.delay_first_us == P.sync.latency_us     # every chunk's, the first's too
    assert math.isclose(isa.cast_cycles(P, 4096), cast)
