"""The hand-off rules, checked from the data flow of toy programs."""
import pytest
import torch

from npusim import DataflowError, Precision, phase_program
from tests.conftest import randn, record

X, W = randn(1, 16, 8), randn(1, 8, 8, seed=1)


@phase_program("ok", returns=("z",))
def two_phases(npu, x, w):
    with npu.vec("P"):
        y = x * 2.0
    npu.sync(y)
    with npu.cube("Q"):
        z = y @ w
    return z


def test_records_phases_ops_and_sync_bytes():
    g = record(two_phases, x=X, w=W)
    assert [p.name for p in g.phases] == ["P", "Q"]
    assert [s.tensors for s in g.syncs] == [("y",)]
    assert g.syncs[0].nbytes == 16 * 8 * 4 and g.syncs[0].direction == "vec->cube"
    (mul,) = g.phase("P").ops
    assert (mul.kind, mul.name, mul.elements) == ("elementwise", "mul", 128)
    (mm,) = g.phase("Q").ops
    assert (mm.kind, mm.shape, mm.macs) == ("matmul", (16, 8, 8), 16 * 8 * 8)
    assert g.phase("Q").reads == ("y", "w")
    assert g.phase("Q").gm_read_bytes == 8 * 8 * 4     # w is loaded from GM
    assert g.phase("Q").gm_write_bytes == 16 * 8 * 4   # z is stored to GM


def test_bf16_transfer_halves_the_bytes_and_rounds_the_payload():
    g = record(two_phases, precision=Precision("bf16"), x=X, w=W)
    assert g.syncs[0].nbytes == 16 * 8 * 2 and g.syncs[0].payload[0].dtype == "bf16"


@phase_program("missing", returns=("z",))
def missing_sync(npu, x, w):
    with npu.vec("P"):
        y = x * 2.0
    with npu.cube("Q"):
        z = y @ w
    return z


def test_missing_sync_names_phase_tensor_and_producer():
    with pytest.raises(DataflowError) as err:
        record(missing_sync, x=X, w=W)
    assert str(err.value) == ("missing sync: Phase Q (Cube) reads y, made by Phase P (Vec), "
                              "but no sync carried it")


@phase_program("mm_on_vec", returns=("z",))
def matmul_on_vec(npu, x, w):
    with npu.vec("P"):
        z = x @ w
    return z


@phase_program("ew_on_cube", returns=("z",))
def elementwise_on_cube(npu, x, w):
    with npu.cube("Q"):
        z = (x @ w).exp()
    return z


def test_misplaced_ops_are_errors():
    with pytest.raises(DataflowError, match=r"Phase P is a Vec phase but does a matmul on \[1, 16, 8\] x "
                                            r"\[1, 8, 8\]: matmuls run on the Cube unit"):
        record(matmul_on_vec, x=X, w=W)
    with pytest.raises(DataflowError, match=r"Phase Q is a Cube phase but does elementwise math \(exp\)"):
        record(elementwise_on_cube, x=X, w=W)


@phase_program("redundant", returns=("z",))
def redundant_sync(npu, x, w):
    with npu.vec("P"):
        y = x * 2.0
    npu.sync(y, w)               # w is a GM input: the Cube can load it itself
    with npu.cube("Q"):
        z = y @ w
    return z


def test_redundant_bytes_are_reported():
    s = record(redundant_sync, x=X, w=W).syncs[0]
    assert s.nbytes == (16 * 8 + 8 * 8) * 4
    assert s.redundant_bytes == 8 * 8 * 4
    assert [p.redundant for p in s.payload] == [None, "already in GM (an input)"]


@phase_program("unused", returns=("z",))
def unused_payload(npu, x, w):
    with npu.vec("P"):
        y = x * 2.0
        t = x + 1.0
    npu.sync(y, t)
    with npu.cube("Q"):
        z = y @ w
    return z


def test_unused_payload_is_reported():
    s = record(unused_payload, x=X, w=W).syncs[0]
    assert [p.unused for p in s.payload] == [False, True] and s.unused_bytes == 16 * 8 * 4


@phase_program("local", returns=("z",))
def vec_local_reuse(npu, x, w):
    with npu.vec("P"):
        y = x * 2.0
    npu.sync(y)
    with npu.cube("Q"):
        z = y @ w
    npu.sync(z)
    with npu.vec("R"):
        out = z + y              # y is P's local tensor: it must be kept or read back from the workspace
    return out


@phase_program("kept", returns=("out",))
def vec_kept(npu, x, w):
    with npu.vec("P"):
        y = x * 2.0
        s = x.sum(-1, keepdim=True)
    npu.keep(s)
    npu.sync(y)
    with npu.cube("Q"):
        z = y @ w
    npu.sync(z)
    with npu.vec("R"):
        out = z * s
    return out


def test_same_unit_reads_need_keep_or_workspace():
    g = record(vec_local_reuse, x=X, w=W)            # y was synced: readable from the workspace
    assert g.tensors["y"].readers == ("Q", "R")
    g = record(vec_kept, x=X, w=W)
    assert g.kept == ("s",) and g.tensors["s"].placement == "kept"

    @phase_program("bad", returns=("out",))
    def not_kept(npu, x, w):
        with npu.vec("P"):
            y = x * 2.0
            s = x.sum(-1, keepdim=True)
        npu.sync(y)
        with npu.cube("Q"):
            z = y @ w
        npu.sync(z)
        with npu.vec("R"):
            out = z * s
        return out
    with pytest.raises(DataflowError, match="Phase R \\(Vec\\) reads s, made by Phase P on the same unit, "
                                            "but it was neither kept there"):
        record(not_kept, x=X, w=W)


def test_structural_errors():
    @phase_program("outside", returns=("y",))
    def outside(npu, x, w):
        y = x * 2.0
        return y
    with pytest.raises(DataflowError, match="mul runs outside any phase"):
        record(outside, x=X, w=W)

    @phase_program("twice", returns=("z",))
    def back_to_back(npu, x, w):
        with npu.vec("P"):
            y = x * 2.0
        npu.sync(y)
        npu.sync()
        with npu.cube("Q"):
            z = y @ w
        return z
    with pytest.raises(DataflowError, match="follows sync ① with no phase between"):
        record(back_to_back, x=X, w=W)

    @phase_program("same", returns=("z",))
    def same_unit(npu, x, w):
        with npu.vec("P"):
            y = x * 2.0
        npu.sync(y)
        with npu.vec("R"):
            z = y + 1.0
        return z
    with pytest.raises(DataflowError, match="both on Vec: a sync hands data to the other unit"):
        record(same_unit, x=X, w=W)

    @phase_program("host", returns=("y",))
    def host_read(npu, x, w):
        with npu.vec("P"):
            y = x * 2.0 if float(x.max()) > 0 else x
        return y
    with pytest.raises(DataflowError, match="reads a tensor value back to the host"):
        record(host_read, x=X, w=W)

    @phase_program("unknown", returns=("y",))
    def unknown_op(npu, x, w):
        with npu.vec("P"):
            y = torch.linalg.inv(x[..., :8, :])
        return y
    with pytest.raises(DataflowError, match="calls torch.linalg.inv, which the cost model does not know"):
        record(unknown_op, x=X, w=W)


def test_state_spec_and_forward_substitution():
    @phase_program("st", returns=("o", "S_new"), state=("S", "S_new"))
    def stateful(npu, a, S):
        with npu.vec("P"):
            R = npu.forward_substitution(a)
        npu.sync(R)
        with npu.cube("Q"):
            o = R @ S
        npu.sync(o)
        with npu.vec("U"):
            S_new = S * 0.5
        return o, S_new
    g = record(stateful, state=randn(1, 8, 8), a=randn(1, 8, 8, seed=2))
    (fs,) = g.phase("P").ops
    assert (fs.kind, fs.steps, fs.elements) == ("sequential", 7, 7 * 8 * 9 // 6)
    assert g.state.producer == "U" and g.state.readers == ("Q", "U")
    assert g.state.nbytes == 8 * 8 * 4
