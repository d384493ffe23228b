"""kda/kernels/triton.py: vllm-ascend's Triton GDN stages as their programs run. Each expectation is read off the
kernels' source (vllm-ascend v0.18.0rc1 vllm_ascend/ops/triton/fla, vendored by MegaGDN-PTO at 20b1b7c) by hand:
which loop a pass walks, how many tl.dot a head or chunk makes, their sizes and operand types, and what a
stage stores. No timings."""
import contextlib

import pytest
import torch

from kda.kernels import triton as tk
from kda.kernels.registry import KERNELS, _graphs
from npusim.model.schedule import CHUNKS, SEQUENTIAL
from npusim.record.ops import MATMUL

D = 128


@pytest.fixture(scope="module", params=[64, 128])
def graphs(request):
    C = request.param
    design = tk.GDN_TRITON
    return C, dict(zip((p.name for p in design.passes), _graphs("gdn_triton64", C, D, D, "bf16", 16)))


def _dots(graph):
    return [op for ph in graph.phases for op in ph.ops if op.kind == MATMUL]


def test_registry_resolves_the_triton_kernels_to_these_programs():
    assert KERNELS["gdn_triton64"][0] is tk.GDN_TRITON and KERNELS["gdn_triton128"][0] is tk.GDN_TRITON
    assert [p.program.name.split(".")[0] for p in tk.GDN_TRITON.passes] == ["triton"] * 7
    # MegaGDN's six stages; solve_tril is two launches (solve_tril_16x16_kernel, merge_16x16_to_64x64)
    assert [p.name for p in tk.GDN_TRITON.passes] == ["cumsum", "kkt", "solve_tril:k1", "solve_tril:k2",
                                                      "wy_fast", "chunk_h", "chunk_o"]


def test_loops_as_the_kernels_walk_them():
    passes = {p.name: p for p in tk.GDN_TRITON.passes}
    # cumsum: a [BT, H] tile of every head; kkt, wy_fast: grid over chunks, heads looped inside (a chunk-head
    # item each); chunk_h, chunk_o: one program per (sequence, head) walking its chunks in order
    assert passes["cumsum"].all_heads and passes["cumsum"].layout == CHUNKS
    assert passes["kkt"].layout == passes["wy_fast"].layout == CHUNKS
    # solve_tril: two launches, K1 then K2, each over chunk-head items
    assert passes["solve_tril:k1"].layout == passes["solve_tril:k2"].layout == CHUNKS
    assert passes["chunk_h"].layout == passes["chunk_o"].layout == SEQUENTIAL
    assert passes["chunk_h"].program.state == ("S_prev", "S_new")
    assert passes["chunk_o"].program.state is None
    assert not any(p.all_heads for name, p in passes.items() if name != "cumsum")


def test_kkt_one_bf16_dot_per_head_and_an_fp32_A(graphs):
    C, g = graphs
    dots = _dots(g["kkt"])
    assert [(op.shape, op.operand_bytes) for op in dots] == [((C, C, D), 2)]     # tl.dot(b_k, tl.trans(b_k))
    assert g["kkt"].phase("gate").gm_write_bytes == C * C * 4                    # output_dtype=torch.float32


def test_wy_fast_four_fp32_dots_per_head(graphs):
    C, g = graphs
    dots = _dots(g["wy_fast"])
    # for i_v in range(V // 64) and for i_k in range(K // 64): tl.dot(b_A [BT, BT], [BT, 64]), fp32 operands
    assert [(op.shape, op.operand_bytes) for op in dots] == [((C, 64, C), 4)] * 4
    assert sum(op.macs for op in dots) == 4 * C * C * 64
    # the four hand-offs carry fp32 operands: A once, then one [BT, 64] tile each
    assert [s.nbytes for s in g["wy_fast"].syncs] == [C * C * 4 + C * 64 * 4] + [C * 64 * 4] * 3


def test_chunk_h_two_state_halves_four_dots_per_chunk(graphs):
    C, g = graphs
    shapes = sorted(op.shape for op in _dots(g["chunk_h"]))
    # per half: tl.dot(w [BT, 128], h [128, 64]) and tl.dot(k^T [128, BT], v_new [BT, 64])
    assert shapes == sorted([(C, 64, D)] * 2 + [(D, 64, C)] * 2)
    assert all(op.operand_bytes == 2 for op in _dots(g["chunk_h"]))              # h and v_new cast to bf16
    assert len(g["chunk_h"].syncs) == 6        # h0 in; W h0 out; v_new0 + h1 in; K^T v_new0 + W h1 out; v_new1 in; K^T v_new1 out


def test_chunk_o_three_bf16_dots_per_chunk(graphs):
    C, g = graphs
    dots = _dots(g["chunk_o"])
    # q h [BT, 128] x [128, 128], q k^T [BT, 128] x [128, BT], A v [BT, BT] x [BT, 128]
    assert sorted(op.shape for op in dots) == sorted([(C, D, D), (C, C, D), (C, D, C)])
    assert all(op.operand_bytes == 2 for op in dots)


def test_solve_tril_k1_on_the_vector_and_k2_fp32_dots():
    g = dict(zip((p.name for p in tk.GDN_TRITON.passes), _graphs("gdn_triton64", 64, D, D, "bf16", 16)))
    k1, k2 = g["solve_tril:k1"], g["solve_tril:k2"]
    assert [ph.unit for ph in k1.phases] == ["vec"] and k1.macs == 0 and not k1.syncs
    # for i in range(1, 16): one tl.sum over the block's rows per step (15 dependent row steps)
    assert sum(op.name == "sum" for op in k1.phases[0].ops) == 15
    assert k1.phases[0].gm_write_bytes == 64 * 16 * 4              # Ad: [BT, 16] fp32 rows of [T, H, 16]
    dots = _dots(k2)
    # K2 at BT = 64: Ai_21, Ai_43 by two 16^3 dots each, then the 32 x 32 merge by two 32^3 dots; "ieee" (fp32)
    assert sorted(op.shape for op in dots) == [(16, 16, 16)] * 4 + [(32, 32, 32)] * 2
    assert all(op.operand_bytes == 4 for op in dots)


def test_a_stage_of_two_launches_is_named_by_its_stage_alone():
    from kda.kernels.registry import model
    m = model("gdn_triton64", "B=1;T=64;H=1;K=128;V=128;C=64", "bf16", stage="solve_tril")
    with pytest.raises(ValueError, match="no stage 'solve_tril:k1'"):
        model("gdn_triton64", "B=1;T=64;H=1;K=128;V=128;C=64", "bf16", stage="solve_tril:k1")
    assert m.stage == "solve_tril"


class _Plain:
    """An npu that only runs the math."""
    def vec(self, name):
        return contextlib.nullcontext()
    cube = vec

    def sync(self, *tensors):
        pass
    keep = sync


def test_solve_tril_is_the_inverse_of_i_plus_a():
    gen = torch.Generator().manual_seed(1)
    A = (torch.randn(3, 64, 64, generator=gen, dtype=torch.float64) * 0.3).tril(-1)
    got = tk.solve_tril_k2.fn(_Plain(), A, tk.solve_tril_k1.fn(_Plain(), A))
    want = torch.linalg.inv(torch.eye(64, dtype=torch.float64) + A)
    assert torch.allclose(got, want, atol=1e-10)


def test_chunk_h_matches_the_recurrence_on_two_halves():
    gen = torch.Generator().manual_seed(2)
    C = 64
    K, W, U = (torch.randn(1, C, D, generator=gen, dtype=torch.float64) for _ in range(3))
    gc = -torch.rand(1, C, 1, generator=gen, dtype=torch.float64).cumsum(-2)
    S = torch.randn(1, D, D, generator=gen, dtype=torch.float64)
    H, V_new, S_new = tk.chunk_h.fn(_Plain(), K, W, U, gc, S)
    v_new = U - W @ S                                             # v - w h, the whole state at once
    decay = (gc[:, -1:] - gc).exp()
    want = S * gc[:, -1:].exp() + K.mT @ (v_new * decay)
    assert torch.allclose(H, S) and torch.allclose(V_new, v_new) and torch.allclose(S_new, want)
