"""npusim.record.dataflow's Checker driven by hand, event by event as the Npu's op recorder sends them: where
each tensor lives, the bytes each phase loads and stores, and the errors that name the tensor and the phase."""
import re

import pytest
import torch

from npusim.errors import DataflowError
from npusim.record.graph import CUBE, VEC
from npusim.record.ops import ELEMENTWISE, MATMUL
from npusim.record.precision import Precision

from tests.npusim.record.hand_checker import Chunk


def _two_phases(precision=Precision("fp32"), x_storage="fp32"):
    """P (Vec): y = 2 x; sync y; Q (Cube): z = y @ w. x [16, 8], w [8, 8]."""
    c = Chunk(precision)
    x = c.input("x", torch.ones(16, 8), x_storage)
    w = c.input("w", torch.ones(8, 8))
    y, z = c.vec_then_cube(x, w)
    return c, c.checker.finish({"z": z}, None, {"chunk_size": 16})


def test_a_correct_chunk_gives_its_phases_sync_and_bytes():
    _, g = _two_phases(Precision("bf16"), x_storage="bf16")
    assert [p.name for p in g.phases] == ["P", "Q"] and [p.unit for p in g.phases] == [VEC, CUBE]
    (s,) = g.syncs
    assert (s.number, s.producer, s.consumer, s.direction, s.tensors) == (1, "P", "Q", "vec->cube", ("y",))
    assert s.nbytes == 16 * 8 * 2                               # y in bf16, the transfer type
    P, Q = g.phase("P"), g.phase("Q")
    assert P.reads == ("x",) and Q.reads == ("y", "w")
    assert P.gm_read_bytes == 16 * 8 * 2                        # x loaded from GM in bf16
    assert Q.gm_read_bytes == 8 * 8 * 4                         # w in fp32; y comes from the workspace
    assert (P.gm_write_bytes, Q.gm_write_bytes) == (0, 16 * 8 * 2)   # z stored in bf16
    (mul,) = P.ops
    assert (mul.kind, mul.elements) == (ELEMENTWISE, 16 * 8)
    (mm,) = Q.ops
    assert (mm.kind, mm.shape, mm.macs, mm.operand_bytes) == (MATMUL, (16, 8, 8), 16 * 8 * 8, 4)
    placement = {n: (t.placement, t.producer, t.readers) for n, t in g.tensors.items()}
    assert placement == {"x": ("gm", "GM", ("P",)), "w": ("gm", "GM", ("Q",)), "y": ("slot", "P", ("Q",)),
                         "z": ("local", "Q", ())}
    assert g.shapes == {"chunk_size": 16} and g.transfer_dtype == "bf16"


def test_what_each_phase_holds_on_its_unit():
    _, g = _two_phases(Precision("bf16"), x_storage="bf16")
    held = {p.name: {loc.name: (loc.source, loc.nbytes, loc.whole, loc.stored) for loc in p.locals}
            for p in g.phases}
    assert held["P"] == {"x": ("gm", 16 * 8 * 2, False, False),         # loaded at its stored type
                         "y": ("made", 16 * 8 * 4, False, False)}       # results in fp32 on the unit
    assert held["Q"] == {"y": ("workspace", 16 * 8 * 2, True, False),   # a matmul's left operand: whole
                         "w": ("gm", 8 * 8 * 4, False, False),
                         "z": ("made", 16 * 8 * 4, False, True)}        # the result the phase stores


def test_a_resident_payload_and_an_unknown_resident_name():
    c = Chunk(resident=("y",))
    x, w = c.input("x", torch.ones(4, 4)), c.input("w", torch.ones(4, 4))
    y, z = c.vec_then_cube(x, w)
    g = c.checker.finish({"z": z}, None, {})
    assert g.tensors["y"].placement == "resident" and g.syncs[0].payload[0].placement == "resident"
    c = Chunk(resident=("nothing",))
    x = c.input("x", torch.ones(4, 4))
    with c.phase("P", VEC) as names:
        names["y"] = y = c.mul(x)
    with pytest.raises(DataflowError, match="^the workspace plan makes nothing resident, but the program has no "
                                            "tensor of that name$"):
        c.checker.finish({"y": y}, None, {})


def test_a_read_across_units_without_a_sync_names_the_phase_tensor_and_producer():
    c = Chunk()
    x, w = c.input("x", torch.ones(16, 8)), c.input("w", torch.ones(8, 8))
    with c.phase("P", VEC) as names:
        names["y"] = y = c.mul(x)
    with pytest.raises(DataflowError) as err:
        with c.phase("Q", CUBE):
            c.matmul(y, w)
    assert str(err.value) == ("missing sync: Phase Q (Cube) reads y, made by Phase P (Vec), but no sync "
                              "carried it")


def test_a_read_on_the_same_unit_needs_keep_or_the_workspace():
    c = Chunk()
    x, w = c.input("x", torch.ones(4, 4)), c.input("w", torch.ones(4, 4))
    with c.phase("P", VEC) as names:
        names["y"] = y = c.mul(x)
        names["t"] = t = c.mul(x, 3.0)
    c.checker.sync((y,))
    with c.phase("Q", CUBE) as names:
        names["z"] = z = c.matmul(y, w)
    c.checker.sync((z,))
    with pytest.raises(DataflowError, match=r"^Phase R \(Vec\) reads t, made by Phase P on the same unit, but it "
                                            r"was neither kept there \(npu.keep\) nor synced to the workspace$"):
        with c.phase("R", VEC):
            c.op(ELEMENTWISE, "add", torch.add, z, t)


def test_a_tensor_read_before_anything_made_it_is_an_error():
    c = Chunk()
    c.input("x", torch.ones(4, 4))
    stranger = torch.ones(4, 4)                 # never registered nor made in a phase
    with pytest.raises(DataflowError, match="^Phase P uses a tensor the runtime does not know"):
        with c.phase("P", VEC):
            c.checker.read(stranger)
    with pytest.raises(DataflowError, match="^program toy: a tensor is used outside any phase$"):
        Chunk().checker.read(stranger)


def test_a_second_write_into_another_phases_tensor_names_both():
    c = Chunk()
    x, w = c.input("x", torch.ones(4, 4)), c.input("w", torch.ones(4, 4))
    with c.phase("P", VEC) as names:
        names["y"] = y = c.mul(x)
    c.checker.keep((y,))
    c.checker.sync((y,))
    with c.phase("Q", CUBE) as names:
        names["z"] = z = c.matmul(y, w)
    c.checker.sync((z,))
    with pytest.raises(DataflowError, match="^Phase R writes into y, made by P: write a new tensor instead$"):
        with c.phase("R", VEC):
            c.op(ELEMENTWISE, "mul_", lambda a: a.mul_(2.0), y)


def test_a_write_into_a_tensor_of_its_own_phase_is_its_own_buffer():
    c = Chunk()
    x = c.input("x", torch.ones(4, 4))
    with c.phase("P", VEC) as names:
        names["y"] = y = c.mul(x)
        c.op(ELEMENTWISE, "mul_", lambda a: a.mul_(2.0), y)
    g = c.checker.finish({"y": y}, None, {})
    assert [op.name for op in g.phase("P").ops] == ["mul", "mul_"]
    assert [loc.name for loc in g.phase("P").locals] == ["x", "y"]          # no third buffer
    assert torch.equal(y, torch.full((4, 4), 4.0))


def test_phases_are_unique_and_do_not_nest():
    c = Chunk()
    c.checker.begin_phase("P", VEC)
    with pytest.raises(DataflowError, match="^Phase Q opens inside Phase P: phases do not nest$"):
        c.checker.begin_phase("Q", CUBE)
    c.checker.end_phase({})
    with pytest.raises(DataflowError, match="^Phase P appears twice in one chunk: phase names must be unique$"):
        c.checker.begin_phase("P", CUBE)


def test_ops_outside_phases_and_on_the_wrong_unit():
    c = Chunk()
    x, w = c.input("x", torch.ones(4, 8)), c.input("w", torch.ones(8, 2))
    with pytest.raises(DataflowError, match="^mul runs outside any phase"):
        c.mul(x)
    with pytest.raises(DataflowError, match=re.escape("Phase P is a Vec phase but does a matmul on [4, 8] x "
                                                      "[8, 2]: matmuls run on the Cube unit")):
        with c.phase("P", VEC):
            c.matmul(x, w)


def test_the_end_of_the_chunk_checks_what_is_left_open():
    c = Chunk()
    x = c.input("x", torch.ones(4, 4))
    with pytest.raises(DataflowError, match="^program toy has no phases$"):
        c.checker.finish({}, None, {})
    c.checker.begin_phase("P", VEC)
    with pytest.raises(DataflowError, match="^Phase P is still open at the end of the program$"):
        c.checker.finish({}, None, {})
    c.checker.end_phase({})
    with pytest.raises(DataflowError, match="^the program returns x, which no phase computed$"):
        c.checker.finish({"x": x}, None, {})
    c = Chunk()
    x = c.input("x", torch.ones(4, 4))
    with c.phase("P", VEC) as names:
        names["y"] = y = c.mul(x)
    c.checker.sync((y,))
    with pytest.raises(DataflowError, match="^sync ① ends the program: no phase consumes it$"):
        c.checker.finish({"y": y}, None, {})


def test_the_state_is_read_from_the_workspace_and_made_by_its_last_phase():
    c = Chunk(Precision("bf16", state="fp32"))
    x = c.input("x", torch.ones(4, 4), "bf16")
    S = c.input("S", torch.ones(4, 4), "fp32", state=True)
    with c.phase("P", VEC) as names:
        names["y"] = y = c.op(ELEMENTWISE, "add", torch.add, x, S)
    c.checker.sync((y,))
    with c.phase("Q", CUBE) as names:
        names["z"] = z = c.matmul(y, S)
    c.checker.sync((z,))
    with c.phase("U", VEC) as names:
        names["S_new"] = S_new = c.op(ELEMENTWISE, "add", torch.add, S, z)
    g = c.checker.finish({"z": z, "S_new": S_new}, ("S", "S_new"), {})
    st = g.state
    assert (st.input_name, st.output_name, st.producer, st.readers) == ("S", "S_new", "U", ("P", "Q", "U"))
    assert (st.dtype, st.nbytes, st.shape) == ("fp32", 4 * 4 * 4, (4, 4))
    assert g.tensors["S"].placement == "state"
    assert g.phase("P").gm_read_bytes == 4 * 4 * 2                 # x only: the state is not a GM load
    assert g.phase("U").gm_write_bytes == 0                        # the state is not a stored result
    assert g.phase("Q").gm_write_bytes == 4 * 4 * 2                # z, stored in bf16


def test_a_payload_is_held_and_multiplied_at_its_own_type():
    c = Chunk(Precision("fp32", {"y": "bf16"}))
    x, w = c.input("x", torch.ones(16, 8)), c.input("w", torch.ones(8, 8), "bf16")
    y, z = c.vec_then_cube(x, w)
    g = c.checker.finish({"z": z}, None, {})
    assert g.syncs[0].nbytes == 16 * 8 * 2
    assert [(loc.name, loc.nbytes) for loc in g.phase("Q").locals if loc.source == "workspace"] == [("y", 16 * 8 * 2)]
    assert g.phase("Q").ops[0].operand_bytes == 2                   # both operands 16-bit as stored


def test_a_tensor_read_twice_in_a_phase_is_loaded_once():
    c = Chunk()
    x = c.input("x", torch.ones(4, 4))
    with c.phase("P", VEC) as names:
        names["y"] = y = c.mul(x)
        names["u"] = u = c.op(ELEMENTWISE, "add", torch.add, y, x)
    g = c.checker.finish({"u": u}, None, {})
    P = g.phase("P")
    assert P.reads == ("x",) and P.gm_read_bytes == 4 * 4 * 4 and len(P.ops) == 2
    assert [(loc.name, loc.first, loc.last) for loc in P.locals] == [("x", 0, 1), ("y", 0, 1), ("u", 1, 2)]
    # x and y last used by op 1; u is returned: it lives to the end of the phase (step 2)
