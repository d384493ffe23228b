"""MegaGDN-PTO's stages as phase programs (kda/kernels/pto.py): the structure read from the kernels' source,
checked against counts taken from that source by hand, not from the model's output."""
from __future__ import annotations

import pytest

from kda.kernels.registry import _graphs

C = D = 128


@pytest.fixture(scope="module")
def graphs():
    from kda.kernels.pto import GDN_PTO
    return {p.name: g for p, g in zip(GDN_PTO.passes, _graphs("gdn_pto", C, D, D, "fp16", 16))}


def _phase(graph, name):
    return next(p for p in graph.phases if p.name == name)


def test_row_expands_are_one_dependent_op_per_row_pair(graphs):
    """pto-isa's TROWEXPAND of a [64, 1] column into [64, 128] is a V -> S -> V round trip per row on each
    AIV: 64 recorded ops (row i of AIV0 with row 64 + i of AIV1), each after a scalar read of the row's value. kkt's gate has one (scaled_dot_kkt.cpp:
    566), chunk_h's decay one (chunk_h.cpp:695), chunk_o one in its gate and one in its sum (chunk_o.cpp:830,
    917)."""
    def row_ops(phase):
        return sum(1 for op in phase.ops if op.name == "__setitem__")
    def reads(phase):           # the scalar read of each row's value, one on each AIV
        return sum(op.steps * op.elements for op in phase.ops if op.kind == "scalar")
    assert reads(_phase(graphs["kkt"], "gate")) == C and reads(_phase(graphs["chunk_o"], "sum")) == C
    assert row_ops(_phase(graphs["kkt"], "gate")) == C // 2
    assert row_ops(_phase(graphs["chunk_h"], "decay")) == C // 2
    assert row_ops(_phase(graphs["chunk_o"], "gate")) == C // 2
    assert row_ops(_phase(graphs["chunk_o"], "sum")) == C // 2
    assert row_ops(_phase(graphs["wy_fast"], "a2")) == 0          # wy_fast broadcasts beta along columns only


def test_inputs_loaded_before_the_wait(graphs):
    """wy_fast's Cube loads K and V (two fp16 [128, 128] tiles) before it waits for A2 (wy_fast.cpp:762-780),
    so its matmul phases load nothing from GM themselves; chunk_h's Vector loads U with K and g before it
    waits for W S (chunk_h.cpp:653-701)."""
    wy = graphs["wy_fast"]
    assert _phase(wy, "kv_in").gm_read_bytes == 2 * C * D * 2
    assert _phase(wy, "u").gm_read_bytes == 0 and _phase(wy, "w").gm_read_bytes == 0
    h = graphs["chunk_h"]
    assert _phase(h, "decay").gm_read_bytes >= 2 * C * D * 2 and _phase(h, "v_new").gm_read_bytes == 0
