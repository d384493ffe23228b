"""The readable report of kda.run: the header names the run's settings, the one-pass tables carry the
hand-offs' bytes worked from the shapes and the design document's figures beside them, and several designs are
ranked fastest first among those that stay finite."""
import io
import re

import pytest
from rich.console import Console

from kda.settings import Settings
from kda.studies.evaluate import evaluate
from kda.views import render_pass
from kda.views.render import _err, header, make_console, ns_per_token_head, parity_table, print_results, ranking

SMALL = dict(chunks=4, profile="ascend-910b2", chunk_size=16, d_k=32, d_v=32)


def text_of(*parts, width: int = 240) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    for p in parts:
        console.print(p)
    return console.export_text()


@pytest.fixture(scope="module")
def v3():
    return evaluate("v3", Settings(**SMALL))


@pytest.fixture(scope="module")
def v2():
    return evaluate("v2", Settings(**SMALL))


def test_the_header_names_the_settings(v3):
    assert header(v3).plain == ("KDA v3 on ascend-910b2 · 4 chunks of 16 × 1 sequence(s) (batch 1 × heads 1) · "
                                "d_k=32 d_v=32 · transfer bf16 · gates seed · seed 0")
    assert header(v3, "v2, v3").plain.startswith("KDA v2, v3 on ")


def test_errors_print_short_or_as_inf_nan():
    assert _err(0.00123) == "1.23e-03"
    assert _err(float("nan")) == "inf/NaN" and _err(float("inf")) == "inf/NaN"


def test_parity_off_says_so():
    r = evaluate("v3", Settings(**SMALL, numerics=False))
    assert "Numerics off (--no-numerics)" in parity_table(r).plain


def test_parity_on_passes_on_small_shapes(v3):
    out = text_of(parity_table(v3))
    assert "Parity against the fp64 recurrence" in out
    assert re.search(r"verdict\s+pass\s+pass", out)


def test_the_hand_off_table_has_the_bytes_of_each_sync_worked_from_the_shapes(v3):
    out = text_of(render_pass.sync_table(v3))
    assert "Hand-offs per chunk (6 syncs)" in out
    # bf16, chunk 16, d_k = d_v = 32: a [16, 32] tile is 1 KiB, a [16, 16] one 0.5 KiB, the [32, 32] state 2 KiB
    # ① K_scaled, K_div, Q_scaled, K_decay, V: 5 KiB   ② A_raw: 0.5   ③ M: 0.5
    # ④ U, WS, O_inter (1 KiB each), A_qk_raw (0.5): 3.5   ⑤ A_qk, V_pseudo: 1.5   ⑥ O_intra 1 + S_delta 2: 3
    kib = [float(m) for m in re.findall(r"^\s*\S+\s+(?:Vec→Cube|Cube→Vec)\s+.*?\s([\d.]+)\s+\d+\s+[\d.]+\s*$",
                                         out, flags=re.M)][:6]
    assert kib == [5, 0.5, 0.5, 3.5, 1.5, 3]
    assert re.search(r"total\s+14\s+224\s", out)          # 14 KiB here, the document's 224 KB beside it


def test_the_work_table_counts_the_cube_macs_from_the_shapes(v3):
    out = text_of(render_pass.work_table(v3))
    # phase B is K·Kᵀ of one chunk: 16 x 16 x d_k = 8,192 MACs; the document's 524,000 is at its own shapes
    assert re.search(r"^\s*B\s+Cube\s+8,192\s+524,000\s", out, flags=re.M)


def test_the_latency_table_puts_the_document_beside_the_model(v3):
    out = text_of(render_pass.latency_table(v3))
    assert "(4 chunks, 1 AI core(s)," in out
    assert "doc: 11.7 µs per chunk" in out and "doc: 8.2 µs" in out


def test_a_one_pass_run_shows_its_tables_and_one_sequence_no_chip_table(v3):
    assert not render_pass.many_sequences(v3)
    titles = [t.title for t in render_pass.pass_parts(v3) if getattr(t, "title", None)]
    assert titles[0] == "Hand-offs per chunk (6 syncs)"
    assert any(t.startswith("Latency on ascend-910b2") for t in titles)


def test_ns_per_token_head_is_the_latency_over_every_token(v3):
    # 4 chunks x 16 tokens = 64 tokens, one head
    assert ns_per_token_head(v3) == pytest.approx(v3.design_report.latency_us * 1e3 / 64)


def test_designs_are_ranked_fastest_first(v2, v3):
    lines = [t.plain for t in ranking([v2, v3])]
    fast, slow = sorted((v2, v3), key=lambda r: r.design_report.latency_us)
    assert lines[0].startswith("Fastest design that stays finite on gates seed, transfer bf16")
    assert f": {fast.version}, " in lines[0]
    assert re.match(rf"Ranked \(layer latency µs\): {fast.version} [\d.,]+ < {slow.version} [\d.,]+$", lines[1])


def test_several_results_print_side_by_side(v2, v3):
    console = Console(record=True, width=300, file=io.StringIO())
    print_results([v2, v3], console=console)
    out = console.export_text()
    assert "KDA v2, v3 on ascend-910b2" in out
    assert "Designs on the chip" in out          # the title wraps at the table's width
    assert re.search(r"layer latency µs\s+[\d.,]+\s+[\d.,]+", out)        # one column per design


def test_a_console_on_a_pipe_is_wide_unless_columns_say(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert make_console().width == 400
    monkeypatch.setenv("COLUMNS", "100")
    assert make_console().width == 100
