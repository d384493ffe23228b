"""flash-linear-attention-npu's ChunkKdaFwd as phase programs (kda/kernels/fla_npu.py): the structure read from
the kernel's source at commit 3f80e2e6 (common/kda/chunk_kda_fwd_kernel.hpp, "hpp:" below; the GDN fwd_h's
epilogues), checked against counts taken from that source by hand for C = 64, K = V = 128, fp16, not from the
model's output. Counts are per item (one chunk of one head) and per AIV, where the two AIVs split the rows.

Prepare's AIV code issues 558 Vector instructions an item on AIV0 (the score loop 208, the gate products 24,
the solve input 208, three adds 96, w/v 10, the intermediates 12) and 388 pipe_barrier(PIPE_V) (104, 23, 145,
96, 11, 9) and one WaitFlag<V_S> (after the Selects); Prepare, PostWu and Finalize declare their barriers, so
these walls, not the instructions, are what the chip's per-barrier wait prices (npusim/chip/issue.py)."""
from __future__ import annotations

import pytest

from kda.kernels.registry import _graphs, held_out, model

C, K, V = 64, 128, 128
SHAPE = "B=1;T=8192;H=32;K=128;V=128;C=64"


@pytest.fixture(scope="module")
def graphs():
    from kda.kernels.fla_npu import FLA_NPU
    return {p.name: g for p, g in zip(FLA_NPU.passes, _graphs("kda_fla_npu", C, K, V, "fp16", 0))}


def _ops(graph, name):
    return len(graph.phase(name).ops)


def _casts(phase):
    """The casts a Vector phase pays on its 16-bit loads and stores (npusim/chip/pipes.py): one per tile."""
    narrow = [lo for lo in phase.locals if lo.source == "gm" and lo.nbytes / max(1, _numel(lo)) < 4]
    return len(narrow) + sum(1 for lo in phase.locals if lo.stored)


def _numel(lo):
    n = 1
    for d in lo.shape:
        n *= d
    return n


def test_the_score_loop_one_block_of_bc_16_rows_a_round(graphs):
    """PrepareScoreFactorsBulk (hpp:592) per 16-row block b: LoadAsFloatRow of the reference row (one Adds,
    hpp:501); the qw tile (8 rows on each AIV: 2 Casts, 8 row Subs, Muls, Mins, Maxs, Exp, then Mul, Mins, Maxs,
    Cast twice: 22 instructions); the kg tile (cols = 16 (b + 1) rows split in halves: Cast, cols / 2 row Subs,
    Muls, Mins, Maxs, Exp, Mul, Mins, Maxs, Cast). The casts ride on the 16-bit loads and stores."""
    p = graphs["prepare"]
    for b in range(C // 16):
        cols = 16 * (b + 1)
        assert _ops(p, f"ref{b}") == 1
        assert _ops(p, f"qw{b}") == 22 - 4                         # q and k cast in, qg and kw cast out
        assert _ops(p, f"kg{b}") == cols // 2 + 9 - 2              # k cast in, kg cast out
    qw = p.phase("qw0")
    assert qw.gm_read_bytes == 16 * K * 2 * 2 + 16 * K * 4         # q, k rows (fp16), gk rows (fp32)
    assert sum(p.phase(f"kg{b}").gm_read_bytes for b in range(4)) == (16 + 32 + 48 + 64) * K * (2 + 4)
    ready = [s for s in p.syncs if s.consumer.startswith("mma")]
    assert [s.nbytes for s in ready] == [(16 + 16 + cols) * K * 2 for cols in (16, 32, 48, 64)]   # the score scratch
    macs = [p.phase(f"mma{b}").macs for b in range(4)]
    assert macs == [2 * 16 * cols * K for cols in (16, 32, 48, 64)]                              # Aqk and Akk rows


def test_the_gate_products_and_the_solve_input(graphs):
    """PrepareGateProductsBulk (hpp:711, useRef false): 2 Casts, Adds, Muls, Mins, Maxs, Exp, then q e^g and
    k e^g (Mul, Mins, Maxs, Cast each), then Muls -1, Muls, Mins, Maxs, Exp, Mul, Mins, Maxs, Cast: 24
    instructions, 32 rows on each AIV; it stores qg, w and kg (3 x 8 KiB fp16 on each AIV).
    PrepareAqkAkkSolveInputRows (hpp:1160): 3 FillLocalFloat, LoadAsFloatRow (Adds), Brcb, 8 Muls of 8
    lanes x 32 repeats, Duplicate, 2 Selects, Muls, then per row BuildPrefixMask twice (2 Duplicates, or 1 on
    row 0's one-hot), Sub, Add: 3 + 1 + 1 + 8 + 1 + 2 + 1 + 32 x 6 - 1 = 208 on AIV0."""
    p = graphs["prepare"]
    gate = p.phase("gate")
    assert len(gate.ops) + _casts(gate) == 24
    assert gate.gm_write_bytes == 3 * C * K * 2
    solve_in = p.phase("solve_in").ops
    assert len([op for op in solve_in if op.kind != "scalar"]) == 208
    masked = [op for op in p.phase("solve_in").ops if op.repeats]
    assert len(masked) == 8 and all(op.repeats == C // 2 and op.elements == C * 8 for op in masked)
    assert p.phase("solve_in").gm_write_bytes == 3 * C * C * 4     # aqk, L (akk) and X back, fp32


def test_the_solve_is_30_fp32_catlass_calls_on_16_and_32_wide_blocks(graphs):
    """ComputeAkkInverseMchFull (hpp:1478) and ComputeAkkMergeCube (hpp:1443): 4 diagonal squares L_ii L_ii,
    3 rounds of 4 X_ii Y_ii, 2 rounds of 4 Y_ii^2, then merges of 32 (2 blocks x 2 calls of 16^3) and 64
    (2 calls of 32^3); every call (CubeGemmSolveSub, hpp:1245) loads both operands from GM as strided blocks
    (16 or 32 rows of a 64-wide matrix) and writes its result back. The AIVs add each round's result into X's
    diagonal (AddSolveTmpToXDiagRows, hpp:1378: one 16-wide Add per row, 32 on each AIV)."""
    p = graphs["prepare"]
    calls = [ph for ph in p.phases if ph.unit == "cube" and not ph.name.startswith("mma")]
    assert len(calls) == 4 + 3 * 4 + 2 * 4 + 4 + 2 == 30
    assert all(len(ph.ops) == 1 and ph.ops[0].operand_bytes == 4 for ph in calls)          # fp32 operands
    sizes = sorted(ph.ops[0].shape for ph in calls)
    assert sizes == [(16, 16, 16)] * 28 + [(32, 32, 32)] * 2
    loads = [lo for ph in calls for lo in ph.locals if lo.source == "gm"]
    assert len(loads) == 60 and all(lo.segments == lo.shape[-2] for lo in loads)           # strided rows
    assert [_ops(p, f"add{i}") for i in range(3)] == [32, 32, 32]


def test_the_flags_of_an_item(graphs):
    """Cross-core flags modelled per item: 4 ready (the score scratch), the last score free flag, the solve's
    ready, 3 rounds of done / ready, the merge's done (the 3 earlier score free flags gate nothing: the AIVs
    are behind the AIC)."""
    p = graphs["prepare"]
    assert len(p.syncs) == 4 + 1 + 1 + 3 * 2 + 1 + 2
    assert [s.producer for s in p.syncs if s.direction == "vec->cube" and not s.consumer.startswith("mma")] == \
        ["solve_in", "rev0", "add0", "rev1", "add1", "add2"]


def test_the_solve_rounds_reverse_flags(graphs):
    """syncDoneFlag_ is a Catlass CrossCoreFlagWithReverse of depth 1 (KDA_SYNC_REVERSE_DEPTH, hpp:73, 2408):
    CrossCoreSetFlagWithReverse sets the flag, then waits for the reverse one, which
    CrossCoreWaitFlagWithReverse sets as soon as its wait passes. In rounds 0 and 1 of ComputeAkkInverseMchFull
    (hpp:1499-1506) the AIC squares Y after its done flag, so it waits for the AIVs' reverse flag first: an
    empty Vector phase (the AIVs passing their wait) hands the reverse flag to the first Y^2 call. Round 2
    squares nothing: its reverse flag arrives before the AIVs' ready flag, and gates nothing."""
    p = graphs["prepare"]
    for it in (0, 1):
        assert p.phase(f"rev{it}").ops == ()
        (rev,) = [s for s in p.syncs if s.producer == f"rev{it}"]
        assert rev.consumer == f"yy{it}_0" and rev.nbytes == 0
    assert "rev2" not in [ph.name for ph in p.phases]


def test_post_wu_and_finalize_done_flags_reverse_into_the_next_item(graphs):
    """ProcessChunkPostAicTyped (hpp:2170-2180) and ProcessChunkOutAic (hpp:2196-2205) end each item with
    CrossCoreSetFlagWithReverse(syncDoneFlag_), depth 1: the AIC waits for the reverse flag, which the AIVs set
    as their CrossCoreWaitFlagWithReverse passes (hpp:2159, 2192), before it takes its next item: a flag with no
    payload from the AIVs passing their wait into the next item's first matmul."""
    from npusim import load_profile
    from npusim.model.template import build_template
    for name, first in (("post_wu", "w_mm"), ("finalize", "qh")):
        g = graphs[name]
        assert g.phase("passed").ops == ()
        (flag,) = [s for s in g.syncs if s.next_item]
        assert (flag.producer, flag.consumer, flag.direction, flag.nbytes) == ("passed", first, "vec->cube", 0)
        done = [s for s in g.syncs if not s.next_item]
        assert len(done) == 1 and done[0].consumer == "passed"
        nodes = {n.name: n.index for n in build_template(g, load_profile("ascend-910b2")).nodes}
        assert (nodes[flag.name], nodes[first]) in build_template(g, load_profile("ascend-910b2")).war_edges


def _walls(graph, name):
    return sum(op.walls or 0 for op in graph.phase(name).ops)


def test_prepare_walls_are_the_sources_barriers(graphs):
    """pipe_barrier(PIPE_V) counted in the source per AIV (WaitFlag<V_S> counted with them):
    LoadAsFloatRow of an fp32 row (hpp:501): 2 (after the Adds copy, at the end);
    PrepareScoreFactorsBulk's qw tile (hpp:626-664): after the Casts, the row Subs, Muls, Mins, Maxs, Exp, then
    Mul, Mins, Maxs, Cast twice: 14; its kg tile (hpp:678-697): Cast, Subs, Muls, Mins, Maxs, Exp, Mul, Mins,
    Maxs, Cast: 10; PrepareGateProductsBulk (hpp:762-812): 23; PrepareAqkAkkSolveInputRows (hpp:1160): 3
    FillLocalFloat + LoadAsFloatRow 2 + Brcb 1 + 8 column Muls + SelectCausalRows' Duplicate 1, Selects 1 and
    WaitFlag<V_S> 1 + Muls 1 + 32 rows x (BuildPrefixMask twice, Sub, Add) 4 = 146; AddSolveTmpToXDiagRows
    (hpp:1395-1400): one per row, 32; PrepareWuCubeInputs (hpp:1618): LoadAsFloatRow 2, Brcb 1, then for w and
    v a Cast in, two Muls, a Cast out: 11; FinalizePrepareIntermediates (hpp:1676-1690): 9."""
    p = graphs["prepare"]
    for b in range(C // 16):
        assert (_walls(p, f"ref{b}"), _walls(p, f"qw{b}"), _walls(p, f"kg{b}")) == (2, 14, 10)
    assert _walls(p, "gate") == 23
    assert _walls(p, "solve_in") == 146
    assert [_walls(p, f"add{i}") for i in range(3)] == [32, 32, 32]
    assert (_walls(p, "wu"), _walls(p, "fin")) == (11, 9)
    kg3 = [op for op in p.phase("kg3").ops if op.name == "sub"]
    assert [op.walls for op in kg3] == [0] * 31 + [2]     # no barrier inside the row loop; the Cast's and the
                                                          # loop's land after its last Sub


def test_the_causal_masks_scalar_loop_and_the_dups(graphs):
    """BuildCausalSelectMasks (hpp:988): per row of the AIV's 32, two 64-bit stores by the scalar unit (one
    column block of 64, KDA_SOLVE_BT); each AIV writes its own rows' masks. Duplicate: 3 FillLocalFloat, the
    Select zero block, and BuildPrefixMask's (hpp:965) two or one per mask, two masks a row: 4 x 32 - 1 on
    AIV0 (row 0's one-hot has no prefix). Brcb: beta in the solve input and in PrepareWuCubeInputs."""
    p = graphs["prepare"]
    (scalar,) = [op for op in p.phase("solve_in").ops if op.kind == "scalar"]
    assert scalar.steps == 2 * 32 and scalar.elements == 2
    assert len([op for op in p.phase("solve_in").ops if op.name == "dup"]) == 3 + 1 + 4 * 32 - 1
    assert [len([op for op in p.phase(n).ops if op.name == "brcb"]) for n in ("solve_in", "wu")] == [1, 1]


def test_post_wu_and_finalize_walls(graphs):
    """CopyScratchWAndFinalizeKg (hpp:1780): LoadAsFloatRow 2, W's Cast 1, then the kg tile as Prepare's: 10.
    FinalizeOutputRows (hpp:1927): Add, Mins, Maxs, Cast: 4."""
    pw, fin = graphs["post_wu"], graphs["finalize"]
    assert sum(_walls(pw, ph.name) for ph in pw.phases if ph.unit == "vec") == 2 + 1 + 10
    assert _walls(fin, "o") == 4


def test_fwd_h_walls(graphs):
    """The GDN fwd_h's epilogues on the path taken (kGated, no scalar gate, use_exp2, V <= 128, fp16 h), per
    chunk on each AIV: EpilogueGDNFwdHVnew (block_epilogue_gdn_fwdh_vnew.hpp:268-323) Sub, Adds and the two
    Casts down, a barrier after each: 4; EpilogueGDNFwdHUpdate (block_epilogue_gdn_fwdh_update.hpp:237-294)
    before the wait for C2: the Cast of h in, Muls 1.0, the gk row loaded, Muls LN2, Exp, Broadcast, Mul, a
    barrier after each: 7; after it: Add and the Cast down: 2."""
    h = graphs["fwd_h"]
    assert [_walls(h, name) for name in ("v1", "v2_decay", "v2_update")] == [4, 7, 2]


def test_prepare_ends_with_w_v_scaled_and_the_intermediates_cast(graphs):
    """PrepareWuCubeInputs (hpp:1618): LoadAsFloatRow, Brcb, then ScaleRowsByBeta of w and of v (Cast, two
    64-lane Muls, Cast each: one recorded Mul per matrix). FinalizePrepareIntermediates (hpp:1641): Muls,
    Cast, Muls, 6 clamps, 3 Casts; it loads aqk, akk (fp32) and qg (fp16) and stores Aqk, Akk and qg scale."""
    p = graphs["prepare"]
    wu, fin = p.phase("wu"), p.phase("fin")
    assert len(wu.ops) + _casts(wu) == 2 + 2 * 4 - 2
    assert len(fin.ops) + _casts(fin) == 12
    assert wu.gm_write_bytes == C * K * 2 + C * V * 2 and fin.gm_write_bytes == 2 * C * C * 2 + C * K * 2


def test_post_wu_finalize_and_fwd_h(graphs):
    """ComputePostWuCube (hpp:1702): two Catlass calls, each loading Akk (C x C fp16); CopyScratchWAndFinalizeKg
    (hpp:1780): 32 row Subs and 7 more. ComputeOutputCube (hpp:1866): q g h, then Aqk v_new. fwd_h per chunk
    of a stream: C1, V1 (Sub, Adds), C2, V2 (Muls 1.0, Muls LN2, Exp, Broadcast, Mul, then Add after C2)."""
    pw, fin, h = graphs["post_wu"], graphs["finalize"], graphs["fwd_h"]
    assert [ph.gm_read_bytes for ph in pw.phases if ph.unit == "cube"] == [C * C * 2 + C * K * 2, C * C * 2 + C * V * 2]
    assert _ops(pw, "kg") == C // 2 + 7
    assert [ph.ops[0].shape for ph in fin.phases if ph.unit == "cube"] == [(C, V, K), (C, V, C)]
    assert [(ph.name, len(ph.ops)) for ph in h.phases] == [("c1", 1), ("v1", 2), ("c2", 1), ("v2_decay", 5),
                                                           ("v2_update", 1)]
    assert h.state is not None and h.state.nbytes == K * V * 2 and h.state.readers == ("c1",)


def test_items_per_core_and_streams():
    """Prepare, PostWu and Finalize: (chunk, head) items, 128 x 32 = 4096 over 24 cores (171 on the first 16,
    170 on the rest); fwd_h: 32 (sequence, head) streams of 128 chunks, two streams a core interleaved."""
    from npusim import load_profile
    from npusim.model.multipass import simulate_design, templates
    from npusim.model.template import RIDE
    m = model("kda_fla_npu", SHAPE, "fp16")
    profile = load_profile("ascend-910b2")
    graphs = list(_graphs("kda_fla_npu", C, K, V, "fp16", 0))
    run = simulate_design(m.design, templates(m.design, graphs, profile, RIDE), profile,
                          m.shape.chunk_counts(C), trace=False)
    assert [p.items for p in run.passes] == [4096, 4096, 4096, 4096]
    assert run.passes[0].run.cores_used == 24 and run.passes[2].run.interleave == 2


def test_only_the_path_read_is_modelled():
    with pytest.raises(ValueError, match="C = 64, K = 128, V = 128 path"):
        model("kda_fla_npu", "B=1;T=8192;H=32;K=128;V=256;C=64", "fp16")
    with pytest.raises(ValueError, match="has C = 128"):
        model("kda_fla_npu", "B=1;T=8192;H=32;K=128;V=128;C=128", "fp16")


def test_a_measured_kda_kernel_is_held_out_and_a_design_is_not():
    assert held_out("kda_fla_npu") and not held_out("kda_v3") and not held_out("gdn_pto")
