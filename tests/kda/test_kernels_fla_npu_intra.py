"""flash-linear-attention-npu's ChunkKdaFwdIntraSubChunk (pull request 244) as phase programs
(kda/kernels/fla_npu_intra*.py): the counts below are taken from the kernel's source by hand (the commit of
each build), not from the model's output."""
from __future__ import annotations

import pytest

from kda.kernels.registry import LAID_OUT, _graphs, model

SHAPE = "B=1;T=8192;H=32;K=128;V=128;C=64"
BUILDS = ("b0", "b1", "b2", "p1", "c1", "va", "vc", "shipped")


def _name(step):
    return "kda_fla_npu_intra" if step == "shipped" else f"kda_fla_npu_intra_{step}"


@pytest.fixture(scope="module")
def graphs():
    return {step: _graphs(_name(step), 64, 128, 128, "bf16", 0)[0] for step in BUILDS}


def _phase(graph, name):
    return next(p for p in graph.phases if p.name == name)


def _walls(phase):
    return sum(op.walls or 0 for op in phase.ops)


def _ops(phase, name):
    return [op for op in phase.ops if op.name == name]


# Prep: the casts, the 16 row Subs, the two Muls, the four clamps, the two Exps, three Mul + cast pairs.
# Before V-A (bce0e7a .. cd9dd85): LoadMidRow's barrier 1, casts 1, Sub 1, Muls 2, ClampExp Mins/Maxs 2 x 2,
# Exp 1, Mul + cast 3 x 2 = 16. V-A (5a0327f) drops the barrier after each ClampExp and adds one after both: 15.
# V-C (081be05) casts g_ref with q, k, g: 14.
PREP_WALLS = {"b0": 16, "b1": 16, "b2": 16, "p1": 16, "c1": 16, "va": 15, "vc": 14, "shipped": 14}
# Post: the tril before V-A: beta's Dup 1, cast 1, scale 1, Brcb 1, two column-tile Muls 1 each, zero Dup 1,
# the Selects 1, the negation 1 = 9; from V-A the scale shares the Brcb's and the tiles one: 7. The forward
# substitution a row i = 2 .. 15: B0 none (scalar), B1 4 + 2i (copy, Dup, Muls and Add for each p < i, Add,
# copy), B2 .. V-C 11 (copy, Brcb, the 32 copies, Mul, 4 folds, copy, Add, copy), shipped 10 (copy, Brcb,
# the two tiles, 4 folds, copy, Add, copy); the cast of Aqk 1.
SUBST = {"b0": 0, "b1": sum(4 + 2 * i for i in range(2, 16)), "b2": 154, "p1": 154, "c1": 154, "va": 154,
         "vc": 154, "shipped": 140}
TRIL = {"b0": 9, "b1": 9, "b2": 9, "p1": 9, "c1": 9, "va": 7, "vc": 7, "shipped": 7}


@pytest.mark.parametrize("step", BUILDS)
def test_barrier_walls_per_window_as_the_source_counts_them(graphs, step):
    g = graphs[step]
    assert _walls(_phase(g, "prep")) == PREP_WALLS[step]
    assert _walls(_phase(g, "post")) == TRIL[step] + SUBST[step] + 1


def test_scalar_accesses(graphs):
    """B0's substitution: for i = 2 .. 15, (i + 16) + i (2 + 2i) + (i + 16) GetValue / SetValue = 3402; every
    build's masks (16 rows x 2 stores) and diagonal (16 GetValue + 16 SetValue); B1's one GetValue per term."""
    def accesses(step):
        post = _phase(graphs[step], "post")
        return sum(op.steps * op.elements for op in post.ops if op.kind == "scalar")
    assert accesses("b0") == 3402 + 32 + 32
    assert accesses("b1") == sum(range(2, 16)) + 32 + 32
    assert accesses("shipped") == 2 * (32 + 32)         # two heads, each AIV its own loops


def test_narrow_tiles_issue_a_repeat_per_row(graphs):
    """A 16 x 8 column tile of fp32 is 512 B, two repeats by bytes; the kernel issues it with mask 8 and 16
    repeats on each AIV, one a row. The Selects: mask 16, 16 repeats."""
    post = _phase(graphs["shipped"], "post")
    rowwise = [op for op in post.ops if op.repeats]
    assert len(rowwise) == 2 + 2 + 14 * 2                # beta tiles, two Selects, the substitution's tiles
    assert {op.repeats for op in rowwise} == {16}


def test_ub_copies_and_brcb(graphs):
    """Shipped: three copies of a 16-float row a substitution row; B2 .. V-C also the 32 copies of 8 floats."""
    assert len(_ops(_phase(graphs["shipped"], "post"), "ub_copy")) == 3 * 14
    assert len(_ops(_phase(graphs["vc"], "post"), "ub_copy")) == (3 + 32) * 14
    assert len(_ops(_phase(graphs["shipped"], "post"), "brcb")) == 1 + 14


def test_window_bytes(graphs):
    """Two heads a window: q, k, g 16 x 128 bf16 each and g_ref 128 bf16 a head in; Aqk's 16 x 16 bf16 and
    Akkd's 16 x 16 fp32 a head out; Qg, W, Kg (bf16) to the Cube, Aqk_raw and Akk_raw (fp32) back."""
    g = graphs["shipped"]
    assert _phase(g, "prep").gm_read_bytes == 2 * (3 * 16 * 128 * 2 + 128 * 2)
    assert _phase(g, "post").gm_write_bytes == 2 * (16 * 16 * 2 + 16 * 16 * 4)
    assert [s.nbytes for s in g.syncs] == [2 * 3 * 16 * 128 * 2, 2 * 2 * 16 * 16 * 4]
    assert _phase(g, "score").macs == 2 * 2 * 16 * 16 * 128


def test_items_per_core():
    """T = 8192 at BT = 64 is 128 chunks over 24 cores: the busiest core takes 6 (chunks c, c + 24, ...).
    Vec2Win: 4 sub-chunks x 16 head pairs = 64 windows a task; lockstep: a task a (head, chunk), 128 x 32 = 4096
    tasks, 171 on the busiest core, 4 sub-chunks each."""
    shipped, b0 = LAID_OUT["kda_fla_npu_intra"], LAID_OUT["kda_fla_npu_intra_b0"]
    tasks = shipped.items(1, (8192,), 32, 64)
    assert len(tasks) == 128 and set(tasks) == {64} and sum(tasks[0::24]) == 6 * 64
    tasks = b0.items(1, (8192,), 32, 64)
    assert len(tasks) == 4096 and set(tasks) == {4} and len(tasks[0::24]) == 171


def test_the_builds_are_kernels_of_the_registry():
    for step in BUILDS:
        m = model(_name(step), SHAPE, "bf16")
        assert m.design.passes[0].vec_units == (1 if step in ("b0", "b1", "b2") else 2)


@pytest.mark.parametrize("shape", ["B=1;T=8192;H=32;K=64;V=64;C=64", "B=1;T=8192;H=32;K=128;V=128;C=16",
                                   "B=1;T=8192;H=32;Hg=16;K=128;V=128;C=64"])
def test_shapes_the_kernel_refuses_are_refused_in_one_line(shape):
    with pytest.raises(ValueError, match="takes K = 128, chunk 32, 64 or 128"):
        model("kda_fla_npu_intra", shape, "bf16")


@pytest.mark.parametrize("step", ["b0", "shipped"])
def test_sampled_profiles_time_the_kernel_as_laid_out(step):
    """predict_many (kda.validate's intervals and nominal figures) walks the kernel's own tasks, as predict
    does: the same figure for the shipped profile and for one with a slower barrier wall."""
    from npusim import load_profile
    base = load_profile("ascend-910b2")
    slow = base.replace(isa__vec_dependent_cycles=2 * base.isa.vec_dependent_cycles)
    m = model(_name(step), SHAPE, "bf16")
    assert m.predict_many([base, slow]) == pytest.approx([m.predict(base), m.predict(slow)], rel=1e-9)
