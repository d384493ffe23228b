"""npusim.record.handoffs, the hand-off events of the data-flow checker, driven by hand: syncs (from the last
phase, from an earlier one, into the next item), kept and spilled tensors, parts of GM tensors, and a
Cube-only state through GM; each error names the sync or call, the tensor and the phase."""
import re

import pytest
import torch

from npusim.errors import DataflowError
from npusim.record.graph import CUBE, VEC
from npusim.record.handoffs import HandOffs
from npusim.record.ops import ELEMENTWISE
from npusim.record.precision import Precision

from tests.npusim.record.hand_checker import Chunk


def test_the_checker_takes_its_hand_offs_from_the_mixin():
    assert isinstance(Chunk().checker, HandOffs)


def _vec_then_cube(c, x, w):
    """P (Vec) makes y = 2 x and t = 3 x; Q (Cube) z = y @ w after sync ① carrying y."""
    with c.phase("P", VEC) as names:
        names["y"] = y = c.mul(x)
        names["t"] = t = c.mul(x, 3.0)
    c.checker.sync((y,))
    with c.phase("Q", CUBE) as names:
        names["z"] = z = c.matmul(y, w)
    return y, t, z


# ----- syncs ------------------------------------------------------------------------------------------
def test_three_phases_two_syncs_with_the_bytes_by_hand():
    c = Chunk(Precision("bf16", {"z": "fp32"}))
    x, w = c.input("x", torch.ones(8, 4), "bf16"), c.input("w", torch.ones(4, 4), "bf16")
    y, t, z = _vec_then_cube(c, x, w)
    rec = c.checker.sync((z,))
    assert rec.number == 2 and rec.producer.name == "Q"
    with c.phase("R", VEC) as names:
        names["o"] = o = c.op(ELEMENTWISE, "add", torch.add, z, x)
    g = c.finish(o=o)
    assert [(s.number, s.producer, s.consumer, s.direction) for s in g.syncs] == [
        (1, "P", "Q", "vec->cube"), (2, "Q", "R", "cube->vec")]
    assert g.sync_bytes == [8 * 4 * 2, 8 * 4 * 4]          # y in bf16; z in fp32, its own type
    assert g.redundant_bytes == 0 and g.unused_bytes == 0
    assert g.tensors["z"].placement == "slot" and g.tensors["t"].placement == "local"


def test_redundant_payloads_say_why():
    c = Chunk()
    x, w = c.input("x", torch.ones(8, 4)), c.input("w", torch.ones(4, 4))
    S = c.input("S", torch.ones(4, 4), state=True)
    y, t, z = _vec_then_cube(c, x, w)
    c.checker.sync((z, y, x, S))
    with c.phase("R", VEC) as names:
        names["o"] = o = c.op(ELEMENTWISE, "add", torch.add, z, y)
        names["S_new"] = S_new = c.mul(S, 0.5)
    g = c.finish(("S", "S_new"), o=o, S_new=S_new)
    assert [(p.name, p.redundant) for p in g.syncs[1].payload] == [
        ("z", None), ("y", "already carried by sync ①"), ("x", "already in GM (an input)"),
        ("S", "the state is already in the workspace")]
    assert g.syncs[1].redundant_bytes == (8 * 4 + 8 * 4 + 4 * 4) * 4


def test_a_payload_no_phase_on_the_other_unit_reads_is_unused():
    c = Chunk()
    x, w = c.input("x", torch.ones(8, 4)), c.input("w", torch.ones(4, 4))
    with c.phase("P", VEC) as names:
        names["y"] = y = c.mul(x)
        names["t"] = t = c.mul(x, 3.0)
    c.checker.sync((y, t))
    with c.phase("Q", CUBE) as names:
        names["z"] = z = c.matmul(y, w)
    g = c.finish(z=z)
    assert [p.unused for p in g.syncs[0].payload] == [False, True] and g.unused_bytes == 8 * 4 * 4


def test_a_sync_from_an_earlier_phase():
    c = Chunk()
    x, w = c.input("x", torch.ones(8, 4)), c.input("w", torch.ones(4, 4))
    y, t, z = _vec_then_cube(c, x, w)
    c.checker.sync((t,), after="P")              # P's t, while the Cube went on with Q
    with c.phase("R", CUBE) as names:
        names["u"] = u = c.matmul(t, w)
    g = c.finish(z=z, u=u)
    assert [(s.producer, s.consumer, s.direction, s.tensors) for s in g.syncs] == [
        ("P", "Q", "vec->cube", ("y",)), ("P", "R", "vec->cube", ("t",))]


def test_sync_errors_name_the_sync_and_the_tensor():
    c = Chunk()
    x = c.input("x", torch.ones(8, 4))
    with pytest.raises(DataflowError, match="^sync ① comes before any phase: a sync hands over what a phase made$"):
        c.checker.sync(())
    with c.phase("P", VEC) as names:
        names["y"] = y = c.mul(x)
        with pytest.raises(DataflowError, match="^sync ① is inside Phase P: syncs go between phases$"):
            c.checker.sync((y,))
        unnamed = c.mul(x, 5.0)
    with pytest.raises(DataflowError, match="^sync ① comes after Phase X, which no phase of the program is$"):
        c.checker.sync((y,), after="X")
    with pytest.raises(DataflowError, match="^sync ① carries y twice$"):
        c.checker.sync((y, y))
    with pytest.raises(DataflowError, match="^sync ① carries float, not a tensor$"):
        c.checker.sync((y, 1.0))
    with pytest.raises(DataflowError, match=re.escape("sync ① carries an unnamed [8, 4] tensor: bind it to a "
                                                      "variable inside its phase")):
        c.checker.sync((unnamed,))
    c.checker.sync((y,))
    with pytest.raises(DataflowError, match="^sync ② follows sync ① with no phase between: put both payloads in "
                                            "one sync$"):
        c.checker.sync(())


def test_a_sync_carries_only_what_its_producers_unit_made():
    c = Chunk()
    x, w = c.input("x", torch.ones(8, 4)), c.input("w", torch.ones(4, 4))
    y, t, z = _vec_then_cube(c, x, w)
    with pytest.raises(DataflowError, match="^sync ② goes vec->cube but carries z, made on Cube by Phase Q$"):
        c.checker.sync((z,), after="P")


def test_a_flag_into_the_next_item():
    c = Chunk()
    x, w = c.input("x", torch.ones(8, 4)), c.input("w", torch.ones(4, 4))
    y, t, z = _vec_then_cube(c, x, w)
    with pytest.raises(DataflowError, match="^sync ② into the next item carries tensors: it is a flag"):
        c.checker.sync((z,), next_item=True)
    c.checker.sync((), next_item=True)
    g = c.finish(z=z)
    flag = g.syncs[1]
    assert (flag.producer, flag.consumer, flag.direction, flag.next_item, flag.nbytes) == (
        "Q", "P", "cube->vec", True, 0)                     # the next item's first Vec phase waits for it
    c = Chunk()
    x = c.input("x", torch.ones(8, 4))
    with c.phase("P", VEC) as names:
        names["y"] = c.mul(x)
    with pytest.raises(DataflowError, match="^sync ① into the next item: the program has no Cube phase to wait "
                                            "for it$"):
        c.checker.sync((), next_item=True)


# ----- kept and spilled tensors -----------------------------------------------------------------------
def test_keep_lists_a_tensor_once_and_only_a_phases_tensor():
    c = Chunk()
    x, w = c.input("x", torch.ones(8, 4)), c.input("w", torch.ones(4, 4))
    y, t, z = _vec_then_cube(c, x, w)
    c.checker.keep((t,))
    c.checker.keep((t,))
    with pytest.raises(DataflowError, match=r"^npu.keep\(x\): only tensors made in a phase can be kept$"):
        c.checker.keep((x,))
    c.checker.sync((z,))
    with c.phase("R", VEC) as names:
        names["o"] = o = c.op(ELEMENTWISE, "add", torch.add, z, t)      # t kept on the Vec: readable
    g = c.finish(o=o)
    assert g.kept == ("t",) and g.tensors["t"].placement == "kept" and g.tensors["t"].readers == ("R",)
    assert [loc.source for loc in g.phase("R").locals if loc.name == "t"] == ["kept"]


def test_a_spilled_tensor_is_stored_once_and_loaded_by_later_phases():
    c = Chunk(Precision("fp32", {"h": "bf16"}))
    x, w = c.input("x", torch.ones(8, 4)), c.input("w", torch.ones(4, 4))
    with c.phase("P", VEC) as names:
        names["h"] = h = c.mul(x)
    c.checker.spill((h,))
    c.checker.spill((h,))                         # twice: stored once
    with c.phase("R", VEC) as names:              # the same unit, no keep, no sync: from GM
        names["o"] = o = c.op(ELEMENTWISE, "add", torch.add, h, x)
    with c.phase("Q", CUBE) as names:             # the other unit, no sync: from GM
        names["z"] = z = c.matmul(h, w)
    g = c.finish(o=o, z=z)
    assert g.syncs == ()
    assert g.phase("P").gm_write_bytes == 8 * 4 * 2                 # h, in its stored type bf16
    assert g.phase("R").gm_read_bytes == 8 * 4 * 2 + 8 * 4 * 4      # h in bf16, x in fp32
    assert g.phase("Q").gm_read_bytes == 8 * 4 * 2 + 4 * 4 * 4      # h in bf16, w in fp32
    assert [(loc.source, loc.stored) for loc in g.phase("P").locals if loc.name == "h"] == [("made", True)]


def test_spill_errors():
    c = Chunk()
    x = c.input("x", torch.ones(8, 4))
    with c.phase("P", VEC) as names:
        names["h"] = h = c.mul(x)
        with pytest.raises(DataflowError, match="^npu.spill is inside Phase P: call it after the phase"):
            c.checker.spill((h,))
        unnamed = c.mul(x, 3.0)
    with pytest.raises(DataflowError, match=r"^npu.spill\(x\): only tensors made in a phase go to GM$"):
        c.checker.spill((x,))
    with pytest.raises(DataflowError, match=re.escape("npu.spill of an unnamed [8, 4] tensor: bind it to a "
                                                      "variable")):
        c.checker.spill((unnamed,))


# ----- parts of GM tensors ----------------------------------------------------------------------------
def _load_parts(head_major):
    c = Chunk(head_major=head_major)
    x = c.input("x", torch.ones(16, 8), "bf16")
    with c.phase("P", VEC) as names:
        rows = x[:4]                              # 4 whole rows
        c.checker.load(rows, x)
        names["a"] = a = c.mul(rows)
        tile = x[:, :2]                           # 16 rows, 2 of their 8 columns
        c.checker.load(tile, x)
        names["b"] = b = c.mul(tile)
    g = c.finish(a=a, b=b)
    parts = [(loc.name, loc.shape, loc.nbytes, loc.segments) for loc in g.phase("P").locals if loc.source == "gm"]
    return g, parts


def test_a_load_of_part_of_a_gm_tensor_is_one_datacopy_of_its_rows():
    g, parts = _load_parts(head_major=False)
    # token-major GM: every row is a run of its own; the narrow tile's 16 rows are strided
    assert parts == [("x[part]", (4, 8), 4 * 8 * 2, 4), ("x[part]", (16, 2), 16 * 2 * 2, 16)]
    assert g.phase("P").reads == ("x[part]", "x[part]")
    assert g.phase("P").gm_read_bytes == 4 * 8 * 2 + 16 * 2 * 2     # each part, once, in bf16
    _, parts = _load_parts(head_major=True)
    # head by head: whole rows follow each other (one run); the narrow tile's rows stay strided
    assert [p[3] for p in parts] == [1, 16]


def test_load_errors():
    c = Chunk()
    x = c.input("x", torch.ones(8, 4))
    with pytest.raises(DataflowError, match="^npu.load runs outside any phase"):
        c.checker.load(x[:2], x)
    with c.phase("P", VEC) as names:
        names["y"] = y = c.mul(x)
    with pytest.raises(DataflowError, match=r"^npu.load in Phase R: y is not in GM \(an input or a tensor stored "
                                            r"with npu.spill\)$"):
        with c.phase("R", VEC):
            c.checker.load(y[:2], y)


# ----- a state on the Cube alone ----------------------------------------------------------------------
def _state_chunk(vec_reads_state):
    """A (Cube) o = x @ S; B (Vec) p = 2 o (and q = 2 S where asked); C (Cube) S_new = S @ w."""
    c = Chunk()
    x, w = c.input("x", torch.ones(8, 4)), c.input("w", torch.ones(4, 4))
    S = c.input("S", torch.ones(4, 4), state=True)
    with c.phase("A", CUBE) as names:
        names["o"] = o = c.matmul(x, S)
    c.checker.sync((o,))
    returns = {}
    with c.phase("B", VEC) as names:
        names["p"] = returns["p"] = p = c.mul(o)
        if vec_reads_state:
            names["q"] = returns["q"] = c.mul(S)
    c.checker.sync((p,))
    with c.phase("C", CUBE) as names:
        names["S_new"] = returns["S_new"] = c.matmul(S, w)
    return c.finish(("S", "S_new"), **returns)


def test_a_state_made_and_read_on_the_cube_alone_goes_through_gm():
    g = _state_chunk(vec_reads_state=False)
    assert g.state.readers == ("A", "C") and g.state.nbytes == 4 * 4 * 4
    assert g.phase("A").gm_read_bytes == 8 * 4 * 4 + 4 * 4 * 4         # x, and the state from GM
    assert g.phase("C").gm_read_bytes == 4 * 4 * 4 + 4 * 4 * 4         # w, and the state from GM
    assert [loc.source for loc in g.phase("A").locals if loc.name == "S"] == ["gm"]
    g = _state_chunk(vec_reads_state=True)       # a Vec phase reads it too: it stays in the workspace
    assert g.state.readers == ("A", "B", "C")
    assert g.phase("A").gm_read_bytes == 8 * 4 * 4
    assert [loc.source for loc in g.phase("A").locals if loc.name == "S"] == ["state"]
