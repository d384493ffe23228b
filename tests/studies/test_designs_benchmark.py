"""benchmarks/designs.py's bookkeeping (no simulation): the token-heads a shape holds and the measured rows
its per-token-head comparison sums. Expectations from the shapes and from kda/validation/megagdn.csv by hand."""
from __future__ import annotations


import pytest



def test_token_heads_of_each_shape(bench):
    designs, _ = bench
    shapes = {name: s for name, (s, _) in designs.SHAPES.items()}
    assert designs.token_heads(shapes[designs.KIMI]) == 131072 * 32
    assert designs.token_heads(shapes["batch 64 x 4096 (32 heads)"]) == 64 * 4096 * 32
    # 65536 + 32768 + 16384 + 8192 + 2 x 4096 + 2048 + 1024 + 512 + 256 = 134912 tokens
    assert designs.token_heads(shapes["mixed lengths (32 heads)"]) == 134912 * 32
    assert designs.token_heads(shapes["MegaGDN's measured shape (16 x 8192, 32 heads)"]) == 16 * 8192 * 32


def test_measured_groups_sum_the_right_rows(bench):
    _, why = bench
    found = why._kernel_groups(why._measured())
    groups = {label.split(",")[0]: (label, rows) for label, rows, _ in found}
    fused = [(label, rows) for label, rows, _ in found if label.startswith("MegaGDN fused")]
    assert [label for label, _ in fused] == ["MegaGDN fused, 16 x 8192 x 32", "MegaGDN fused, 16 x 16384 x 32"]
    assert [[r["id"] for r in rows] for _, rows in fused] == [["mega-L8192-H32"], ["mega-L16384-H32"]]
    assert [float(rows[0]["measured_us"]) for _, rows in fused] == pytest.approx([54256.966, 109114.223])
    # the staged PTO kernels: all six stages exist at L = 16384, H = 32 (held out); their sum by hand
    label, rows = groups["MegaGDN staged PTO (chunk 128)"]
    assert "16 x 16384 x 32" in label
    assert sorted(r["stage"] for r in rows) == sorted(["cumsum", "kkt", "solve_tril", "wy_fast", "chunk_h", "chunk_o"])
    assert sum(float(r["measured_us"]) for r in rows) == pytest.approx(
        344.519 + 9416.964 + 31820.996 + 13090.013 + 20459.303 + 21959.176)
    # vllm-ascend's Triton: L = 8192 has no solve_tril row, so the largest complete set is L = 4096
    label, rows = groups["vllm-ascend Triton (chunk 64)"]
    assert "16 x 4096 x 32" in label and len(rows) == 6
    assert all(r["kernel"] == "gdn_triton64" for r in rows)


class _Sampled:
    """Just what per_token_head reads of an uncertainty result: two designs, the faster one set apart."""
    versions = ["v3", "v6"]
    apart = {"v3": "overflows in the probe: Gamma_inv in Phase A, chunk 0"}
    latencies = {"v3": {"pipelined": [1.0, 1.0]}, "v6": {"pipelined": [2.0, 2.0]}}
    nominal = {"v3": {"pipelined": 1.0}, "v6": {"pipelined": 2.0}}

    def interval(self, v):
        from types import SimpleNamespace
        return SimpleNamespace(median=self.nominal[v]["pipelined"])


def test_per_token_head_lists_the_safe_designs_first_and_marks_the_others(bench):
    import numpy as np
    _, why = bench
    u = _Sampled()
    u.latencies = {v: {"pipelined": np.array(x["pipelined"])} for v, x in u.latencies.items()}
    kernels = dict(rows=[], fused_ns=np.array([5.0, 5.0]), best=(4.0, "a measured kernel"))
    text = "\n".join(why.per_token_head(kernels, u, 1000, None, None, 2))
    table = [line for line in text.splitlines() if line.startswith("| v")]
    assert [line.split("|")[1].strip() for line in table] == ["v6", "v3"]       # v3 is faster, but overflows
    assert "| yes " in table[0] and "no: overflows in the probe: Gamma_inv in Phase A" in table[1]
    assert "The fastest KDA design that stays finite on the Kimi layer, v6, predicts 2.00 ns" in text
