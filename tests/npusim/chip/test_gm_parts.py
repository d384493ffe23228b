"""What a kernel read from its source needs from the recording: parts of GM tensors loaded as one DataCopy each
(strided where they are blocks of a wider matrix), tensors through GM (npu.spill), a flag from an earlier
phase (npu.sync(after=...)), instructions whose repeat count the kernel sets (npu.repeats), and a layout whose
rows are one run (gm_layout="head-major"). The costs are hand-computed from the profile's msKPP figures."""
from __future__ import annotations

import pytest
import torch

from npusim import DataflowError, Precision, build_template, load_profile, phase_program
from npusim.chip import isa
from npusim.chip.pipes import plan_phase
from tests.conftest import randn, record

M = randn(1, 64, 64)


@phase_program("blocks", returns=("z",))
def blocks(npu, m):
    with npu.cube("P"):
        a = npu.load(m, (..., slice(16, 32), slice(16, 32)))      # a 16 x 16 block of a 64 x 64 matrix
        b = npu.load(m, (..., slice(16, 32), slice(16, 32)))      # the same block again: its own DataCopy
        z = a @ b
    return z


def test_a_block_of_a_gm_matrix_is_one_strided_datacopy_each_time():
    g = record(blocks, m=M)
    loads = [lo for lo in g.phase("P").locals if lo.source == "gm"]
    assert [(lo.nbytes, lo.segments) for lo in loads] == [(16 * 16 * 4, 16), (16 * 16 * 4, 16)]
    assert g.phase("P").gm_read_bytes == 2 * 16 * 16 * 4
    prof = load_profile("ascend-910b2")
    plan = plan_phase(g.phase("P"), prof)
    one = prof.isa.gm_l1_fixed_cycles + 1024 / prof.isa.gm_l1_bytes_per_cycle + 15 * prof.isa.gm_burst_cycles
    assert plan.timing.load_us == pytest.approx(prof.cycles_to_us(2 * one))


@phase_program("rows", returns=("z",), gm_layout="head-major")
def rows_head_major(npu, x):
    with npu.vec("P"):
        z = npu.load(x, (..., slice(0, 16), slice(None))) * 2.0   # 16 whole rows: one run in a head-major layout
    return z


def test_whole_rows_of_a_head_major_input_and_its_output_are_one_run():
    g = record(rows_head_major, x=M)
    (load,) = [lo for lo in g.phase("P").locals if lo.source == "gm"]
    (store,) = [lo for lo in g.phase("P").locals if lo.stored]
    assert (load.nbytes, load.segments, store.segments) == (16 * 64 * 4, 1, 1)


@phase_program("spill", returns=("z",))
def through_gm(npu, x, w):
    with npu.cube("A"):
        y = x @ w
    npu.spill(y)
    with npu.cube("B"):                                  # the same unit reads y back from GM
        z = y @ w
    return z


def test_a_spilled_tensor_is_stored_by_its_maker_and_loaded_again_by_its_readers():
    x, w = randn(1, 16, 8), randn(1, 8, 8, seed=1)
    g = record(through_gm, x=x, w=w)
    assert g.phase("A").gm_write_bytes == 16 * 8 * 4
    assert g.phase("B").gm_read_bytes == 16 * 8 * 4 + 8 * 8 * 4          # y and w
    assert {lo.name: lo.source for lo in g.phase("B").locals} == {"y": "gm", "w": "gm", "z": "made"}
    assert not g.syncs


@phase_program("spill_inside", returns=("y",))
def spill_inside(npu, x):
    with npu.vec("A"):
        y = x * 2.0
        npu.spill(y)
    return y


def test_spill_inside_its_phase_is_refused():
    with pytest.raises(DataflowError, match="npu.spill is inside Phase A"):
        record(spill_inside, x=M)


@phase_program("early_flag", returns=("z",))
def early_flag(npu, x, w):
    with npu.vec("V1"):
        a = x * 2.0
    npu.sync(a)
    with npu.cube("C1"):
        b = a @ w
    with npu.vec("V2"):                                  # the Vector goes on while the Cube works
        c = x * 3.0
    npu.keep(c)
    npu.sync(b, after="C1")                              # C1's flag, not V2's
    with npu.vec("V3"):
        z = b + c
    return z


def test_a_flag_from_an_earlier_phase_leaves_the_phase_between_free():
    w = randn(1, 64, 64, seed=1)
    g = record(early_flag, x=M, w=w)
    assert [(s.producer, s.consumer, s.direction) for s in g.syncs] == [("V1", "C1", "vec->cube"),
                                                                        ("C1", "V3", "cube->vec")]
    tpl = build_template(g, load_profile("ascend-910b2"))
    node = {n.name: n for n in tpl.nodes}
    assert node["V2"].deps == (node["V1"].index,)        # V2 waits for V1 only, not for C1
    assert set(node["V3"].deps) == {node["V2"].index, node["sync2"].index}


@phase_program("masked", returns=("z",))
def masked(npu, x, b):
    with npu.vec("P"):
        with npu.repeats(32):                            # Mul(mask 8, repeat 32): 8 lanes of a row a repeat
            z = x[..., :, 0:8] * b
    return z


def test_an_instruction_narrower_than_a_repeat_costs_its_repeats():
    g = record(masked, x=M, b=randn(1, 64, 8, seed=2))
    (op,) = g.phase("P").ops
    assert (op.repeats, op.elements) == (32, 64 * 8)
    prof = load_profile("ascend-910b2")
    # one binary instruction of 32 repeats on each AIV: 2 cycles a repeat, then the dependent wait
    expected = max(prof.isa.vec_min_cycles, 32 * prof.isa.vec_binary_cycles) + prof.isa.vec_dependent_cycles
    assert isa.vector_op_cycles(op, prof, 2) == pytest.approx(expected)
    # by its bytes alone it would be 256 elements on each AIV: 4 repeats
    assert expected > max(prof.isa.vec_min_cycles, 4 * prof.isa.vec_binary_cycles) + prof.isa.vec_dependent_cycles


@phase_program("load_outside", returns=("z",))
def load_outside(npu, x):
    part = npu.load(x, (..., slice(0, 8), slice(None)))
    with npu.vec("P"):
        z = part * 2.0
    return z


def test_a_load_outside_a_phase_is_refused():
    with pytest.raises(DataflowError, match="npu.load runs outside any phase"):
        record(load_outside, x=M)


def test_the_features_replay_numerically_as_recorded():
    """The fast path (LeanNpu) and the recording runtime give the same numbers for a program using them."""
    from npusim import Executor
    ex = Executor(early_flag, Precision("fp32"))
    w = randn(1, 64, 64, seed=1)
    ex.record({"x": M, "w": w}, None)
    out, _ = ex.step({"x": M, "w": w}, None, 0)
    assert torch.allclose(out["z"], (M * 2.0) @ w + M * 3.0)
