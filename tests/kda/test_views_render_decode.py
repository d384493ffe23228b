"""The decode report: the header names the step, the JSON row carries the unique bytes worked from the shapes,
a batch sweep gets one crossover line per design and a token sweep one winner per T, with the Cube's
16-row fractals as full as T rows make them."""
import io
import re

import pytest
from rich.console import Console

from kda.decode.study import DecodeSettings, evaluate
from kda.views.render_decode import gbps, header, parity_lines, print_results, summary, to_json, verdict

ONE = DecodeSettings(designs=("step",), batches=(2,), heads=2, tokens=(1,), d_k=32, d_v=32, prefill=0)
SWEEP = DecodeSettings(designs=("step", "chunked"), batches=(1, 2), heads=2, tokens=(1, 2), d_k=32, d_v=32,
                       numerics=False, prefill=0)


@pytest.fixture(scope="module")
def one():
    return evaluate(ONE)[0]


@pytest.fixture(scope="module")
def sweep():
    return evaluate(SWEEP)


def test_the_header_names_design_profile_shape_and_types(one):
    first = header(one, ONE).splitlines()[0]
    assert first == "KDA decode · step on ascend-910b2 · B=2 T=1 H=2 K=32 V=32 · q/k/v bf16, state fp32"


def test_the_json_row_has_the_unique_bytes_of_the_step(one):
    row = to_json(one)
    assert (row["design"], row["batch"], row["tokens"], row["heads"], row["d_k"], row["d_v"]) == \
        ("step", 2, 1, 2, 32, 32)
    # per sequence: the fp32 state in and out 2 x 2 heads x 32 x 32 x 4 = 16,384 B; one token's q and k
    # 2 x 2 x 32 x 2 = 256 B; per value head v and o 2 x 32 x 2 = 128, the fp32 gate 32 x 4 = 128 and beta 4:
    # 2 x 260 = 520 B. Two sequences: 2 x (16,384 + 256 + 520) = 34,320 B
    assert row["floor_bytes"] == 34_320
    assert row["achieved_gbps"] == pytest.approx(34_320 / (row["latency_us"] * 1e3)) == pytest.approx(gbps(one))
    assert row["most_items_per_worker"] == max(one.run.counts)
    assert row["parity"]["sequences_checked"] == 2


def test_a_small_step_passes_parity_on_every_sequence(one):
    assert verdict(one) == "pass"
    lines = parity_lines(one)
    assert lines[0].startswith("Parity against the fp64 recurrence") and "on the first" not in lines[0]
    assert re.match(r"  this step +output rel RMS \S+ +state \S+ +pass$", lines[1])


def test_without_numerics_there_is_no_verdict(sweep):
    assert {verdict(r) for r in sweep} == {"-"} and parity_lines(sweep[0]) == []


def test_a_batch_sweep_says_where_each_design_stops_being_launch_bound(sweep):
    lines = summary(sweep, SWEEP)
    for design in ("step", "chunked"):
        for T in (1, 2):
            assert sum(line.startswith(f"{design} (T={T}, state fp32): ") for line in lines) == 1


def test_a_token_sweep_names_the_fastest_design_per_point(sweep):
    lines = [line for line in summary(sweep, SWEEP) if line.startswith("T=")]
    assert len(lines) == 4                                   # (B, T) in {1, 2} x {1, 2}
    for line in lines:
        B, T = map(int, re.match(r"T=(\d) \(B=(\d)", line).groups()[::-1])
        best = min((r for r in sweep if (r.batch, r.tokens) == (B, T)), key=lambda r: r.run.latency_us)
        assert f": {best.design.name} fastest, " in line
        # T rows of the Cube's 16-row fractals: 1/16 = 6.25 % -> "6%", 2/16 = 12.5 % -> "12%" (half to even)
        assert line.endswith({1: "fractals 6% full", 2: "fractals 12% full"}[T])


def test_several_steps_print_as_one_table(sweep):
    console = Console(record=True, width=200, file=io.StringIO())
    print_results(sweep, SWEEP, console)
    out = console.export_text()
    assert "KDA decode on ascend-910b2 · H=2 K=32 V=32 · q/k/v bf16" in out
    assert sum(1 for line in out.splitlines() if re.match(r"\s*(step|chunked)\s+[12]\s+[12]\s+fp32\s", line)) == 8
