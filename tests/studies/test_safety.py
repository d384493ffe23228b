"""No answer counts a design that overflows on the run's gates as a winner: the default design, the overflow row
and the ranking of `--version all`, the win shares of `--uncertainty`, and the sweep tables' best points.

Why v1, v2 and v3 overflow on Kimi's gates, from the gates alone: FLA's gate is g = -5 sigmoid(x) nats per token
and channel, x ~ randn, so a 64-token chunk decays by about 64 x 2.5 = 160 nats on average; these designs divide
by the chunk's cumulative decay (Gamma_inv = exp(+160)), far above the largest fp32 or bf16 number (about
exp(88.7)), in the first chunk. v4, v6, fla, v5 and mform only ever take exp of a non-positive exponent. On the
seed gates (alpha = sigmoid(randn), about -0.8 nats a token on average) a chunk decays by about 50 nats:
exp(50) fits, and every design stays finite."""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch

from kda.cli.run import main
from kda.programs import DESIGNS

UNSAFE_ON_KIMI = {"v1", "v2", "v3"}
SMALL = ["--chunks", "2", "--no-numerics"]


def run(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *args):
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


# ----- the default design ---------------------------------------------------------------------------------
def test_the_api_default_is_v6_and_stays_finite_on_kimi_gates():
    import kda
    from kda.driver.inputs import make_inputs
    x = make_inputs(1, 128, 2, 32, 32, "kimi", 0)
    q, k, v, g, beta = (t.to(torch.float32) for t in (x.q, x.k, x.v, x.g, x.beta))
    o, ht = kda.chunk_kda(q, k, v, g, beta, output_final_state=True)       # no version: the default
    ref_o, ref_ht = kda.recurrent_kda(q, k, v, g, beta, output_final_state=True)
    assert torch.isfinite(o).all() and torch.isfinite(ht).all()
    assert torch.allclose(o, ref_o, atol=5e-2) and torch.allclose(ht, ref_ht, atol=5e-2)
    with pytest.warns(Warning, match="Gamma_inv"):
        v3, _ = kda.chunk_kda(q, k, v, g, beta, version="v3")
    assert not torch.isfinite(v3).all()                  # what the old default gave on the same call


def test_the_cli_default_is_v6_and_passes_on_kimi_gates(capsys):
    d = run_json(capsys, "--chunks", "2", "--gates", "kimi")
    assert d["version"] == "v6" and d["overflow"] is None and d["parity"]["pass"] and d["safe"] is True
    assert run(capsys, "--chunks", "2", "--gates", "kimi", "--strict")[0] == 0


# ----- bad input: v3 on Kimi's gates -----------------------------------------------------------------------
def test_v3_on_kimi_gates_with_numerics_names_the_phase_and_chunk_and_fails(capsys):
    code, out, _ = run(capsys, "--version", "v3", "--chunks", "2", "--gates", "kimi")
    assert code == 0
    assert "overflow: inf/NaN first appears in Gamma_inv in Phase A of chunk 0" in out
    assert "FAIL" in out
    assert run(capsys, "--version", "v3", "--chunks", "2", "--gates", "kimi", "--strict")[0] == 1
    d = run_json(capsys, "--version", "v3", "--chunks", "2", "--gates", "kimi")
    assert (d["overflow"]["where"], d["overflow"]["phase"], d["overflow"]["chunk"]) == ("Phase A", "A", 0)
    assert d["parity"]["pass"] is False and d["safe"] is False and d["probe"] is None


def test_v3_on_kimi_gates_without_numerics_shows_the_probe_not_none(capsys):
    code, out, _ = run(capsys, "--version", "v3", "--gates", "kimi", *SMALL)
    assert code == 0
    assert "overflow (probe: 2 chunks of 64 on gates kimi, transfer bf16): inf/NaN first appears in Gamma_inv " \
           "in Phase A, chunk 0" in out
    assert run(capsys, "--version", "v3", "--gates", "kimi", "--strict", *SMALL)[0] == 1
    d = run_json(capsys, "--version", "v3", "--gates", "kimi", *SMALL)
    assert d["probe"]["finite"] is False and d["probe"]["overflow"]["where"] == "Phase A"
    assert d["probe"]["overflow"]["chunk"] == 0 and d["safe"] is False and d["overflow"] is None


def test_the_probe_runs_at_the_runs_sizes_and_gates():
    from kda.settings import Settings
    from kda.studies.probe import probe_settings
    s = Settings(batch=3, heads=4, tokens=5000, chunk_size=32, d_k=64, d_v=32, gates="strong", dtype="fp16",
                 numerics=False, interleave=2, probe_chunks=3, payload_dtypes={"M": "fp32"}, seed=7)
    p = probe_settings(s)
    assert (p.batch, p.heads, p.T, p.numerics, p.interleave) == (1, 1, 3 * 32, True, 1)
    assert (p.chunk_size, p.d_k, p.d_v, p.gates, p.dtype, p.seed, p.payload_dtypes) == \
           (32, 64, 32, "strong", "fp16", 7, {"M": "fp32"})


# ----- --version all: the overflow row and the ranking --------------------------------------------------------
def _cells(out: str, label: str) -> list[str]:
    line = next(x for x in out.splitlines() if x.strip().startswith(label))
    return re.split(r"\s{2,}", line.strip())[1:]


def test_without_numerics_the_overflow_row_never_says_none(capsys):
    _, out, _ = run(capsys, "--version", "all", "--gates", "kimi", *SMALL)
    cells = _cells(out, "overflow")
    assert len(cells) == len(DESIGNS) and "none" not in cells
    by = dict(zip(DESIGNS, cells))
    assert all(by[v].endswith("(probe)") and "chunk 0" in by[v] for v in UNSAFE_ON_KIMI)
    assert all(by[v] == "finite (probe)" for v in DESIGNS if v not in UNSAFE_ON_KIMI)
    _, out, _ = run(capsys, "--version", "all", "--probe-chunks", "0", *SMALL)
    assert _cells(out, "overflow") == ["not checked"] * len(DESIGNS)
    assert "none is ranked" in out and "Fastest design" not in out


def test_the_winner_of_version_all_is_the_fastest_safe_design(capsys):
    data = run_json(capsys, "--version", "all", "--gates", "kimi", *SMALL)
    safe = {d["version"]: d["layer"]["latency_us"] for d in data if d["safe"]}
    unsafe = {d["version"]: d["layer"]["latency_us"] for d in data if d["safe"] is False}
    assert set(unsafe) == UNSAFE_ON_KIMI and set(safe) == set(DESIGNS) - UNSAFE_ON_KIMI
    assert min(unsafe.values()) < max(safe.values())     # an unsafe design would outrank some safe one
    best = min(safe, key=safe.get)
    _, out, _ = run(capsys, "--version", "all", "--gates", "kimi", *SMALL)
    head = next(x for x in out.splitlines() if x.startswith("Fastest design that stays finite"))
    assert head.split(": ")[1].startswith(f"{best}, {safe[best]:,.1f} µs")
    ranked = next(x for x in out.splitlines() if x.startswith("Ranked"))
    assert [p.split()[0] for p in ranked.split(": ")[1].split(" < ")] == sorted(safe, key=safe.get)
    apart = next(x for x in out.splitlines() if x.startswith("Not ranked"))
    for v, phase in (("v1", "Phase Vec1"), ("v2", "Phase Vec1"), ("v3", "Phase A")):
        assert f"{v} (overflows in the probe: Gamma_inv in {phase}, chunk 0)" in apart


def test_on_the_seed_gates_every_design_is_ranked(capsys):
    data = run_json(capsys, "--version", "all", *SMALL)
    assert all(d["safe"] is True and d["probe"]["finite"] for d in data)
    _, out, _ = run(capsys, "--version", "all", *SMALL)
    assert "Not ranked" not in out


def test_ns_per_token_head_is_the_latency_over_token_heads(capsys):
    d = run_json(capsys, "--version", "v6", "--tokens", "300", "--batch", "2", "--heads", "3", "--no-numerics")
    _, out, _ = run(capsys, "--version", "all", "--tokens", "300", "--batch", "2", "--heads", "3", "--no-numerics")
    v6 = _cells(out, "ns per token-head")[list(DESIGNS).index("v6")]
    assert float(v6) == pytest.approx(d["layer"]["latency_us"] * 1e3 / (2 * 300 * 3), abs=0.006)


def test_probe_chunks_needs_a_timing_only_run(capsys):
    code, _, err = run(capsys, "--probe-chunks", "3", "--chunks", "2")
    assert code == 2 and err.count("\n") == 1 and "--probe-chunks checks a timing-only run" in err
    code, _, err = run(capsys, "--probe-chunks", "-1", *SMALL)
    assert code == 2 and "--probe-chunks must be >= 0, got -1" in err


# ----- --uncertainty: win shares among the safe designs --------------------------------------------------------
def test_win_shares_leave_out_the_designs_set_apart():
    from kda.studies.uncertainty import Uncertainty
    lat = {"a": {"pipelined": np.array([1.0, 5.0, 2.0, 3.0])}, "b": {"pipelined": np.array([2.0, 4.0, 2.0, 1.0])},
           "c": {"pipelined": np.array([0.5, 0.5, 0.5, 0.5])}}
    u = Uncertainty(4, 0, [], np.zeros((4, 0)), ["a", "b", "c"], lat, {}, apart={"c": "overflows"})
    # without c: a wins sample 0 and half of sample 2's tie, b samples 1 and 3 and the other half
    assert u.win_shares() == {"a": pytest.approx(0.375), "b": pytest.approx(0.625)}


def test_uncertainty_counts_no_unsafe_design_as_a_winner(capsys):
    data = run_json(capsys, "--version", "all", "--gates", "kimi", "--uncertainty", "6", *SMALL)
    unc = data[0]["uncertainty"]
    assert set(unc["wins"]) == set(DESIGNS) - UNSAFE_ON_KIMI
    assert sum(unc["wins"].values()) == pytest.approx(1.0)
    assert set(unc["not_counted"]) == UNSAFE_ON_KIMI
    assert all(w.startswith("overflows in the probe: Gamma_inv") for w in unc["not_counted"].values())
    _, out, _ = run(capsys, "--version", "all", "--gates", "kimi", "--uncertainty", "6", *SMALL)
    shares = next(x for x in out.splitlines() if x.startswith("Samples in which each design is fastest"))
    assert not any(f" {v} " in shares for v in UNSAFE_ON_KIMI)
    assert next(x for x in out.splitlines() if x.startswith("Not counted")).count("overflows") == 3


# ----- sweeps: the best point per shape ----------------------------------------------------------------------
def test_a_sweeps_best_point_is_a_safe_design(tmp_path, capsys):
    from kda.sweep.__main__ import main as sweep
    from kda.sweep.plot import best_per_shape, heatmap_table
    from kda.sweep.table import read_table
    spec = tmp_path / "s.toml"
    spec.write_text('numerics = false\n[axes]\nversion = ["v3", "v6"]\n"sync.latency_us" = [0.5, 1.0]\n'
                    '[fixed]\nchunks = 2\ngates = "kimi"\n')
    out = tmp_path / "r.csv"
    assert sweep([str(spec), "--workers", "0", "-o", str(out), "--quiet", "--no-cache"]) == 0
    df = read_table(out)
    assert df.groupby("version")["safe"].agg(lambda s: set(s)).to_dict() == {"v3": {False}, "v6": {True}}
    assert set(df[df["version"] == "v3"]["probe.overflow.where"]) == {"Phase A"}
    fastest = df.loc[df["layer.latency_us"].idxmin()]
    assert fastest["version"] == "v3"                    # the table's fastest point overflows on these gates
    best = best_per_shape(df)
    assert list(best["version"]) == ["v6"] and bool(best["safe"][0])
    assert best["sync.latency_us"][0] == 0.5
    heat = heatmap_table(df, "version", "sync.latency_us")
    assert list(heat.columns) == ["v6"]                   # no cell is v3's
    capsys.readouterr()
    assert sweep(["plot", str(out), "--outdir", str(tmp_path / "p")]) == 0
    table = capsys.readouterr().out
    assert "v6" in table and "v3" not in table


def test_a_sweep_of_one_unsafe_design_has_no_best_point(tmp_path):
    from kda.sweep.plot import PlotError, best_per_shape
    from kda.sweep.runner import run_sweep
    from kda.sweep.spec import load_spec
    spec = tmp_path / "s.toml"
    spec.write_text('numerics = false\n[axes]\nversion = ["v1", "v2"]\n[fixed]\nchunks = 2\ngates = "strong"\n')
    import pandas as pd
    df = pd.DataFrame(run_sweep(load_spec(spec), workers=0).rows)
    assert not df["safe"].any() and set(df["status"]) == {"ok"}
    with pytest.raises(PlotError, match="stayed finite on its gates"):
        best_per_shape(df)
    assert math.isfinite(df["layer.latency_us"].min())
