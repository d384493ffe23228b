"""The training ranking of `--backward --version all` counts only the designs known to stay finite on the run's
gates: with numerics by the run's own gradients, without by a probe (each design's forward and backward numerics
on a few chunks); a design that overflows, or that nothing checked, is listed apart with the reason.

No shipped backward design overflows on the gate families (they take exp of non-positive exponents only, as
their forwards do: tests/studies/test_safety.py), so the ranking rule is also checked on a result whose probe
is given an overflow by hand."""
from __future__ import annotations

import json

from kda.cli.run import main
from kda.cli.run_backward import ranking_text
from kda.settings import Settings
from kda.studies.backward_eval import evaluate_backward, probe_backward
from kda.studies.probe import Overflow, Probe

SMALL = ["--backward", "--version", "all", "--chunks", "2", "--no-numerics", "--gates", "kimi"]


def run(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_without_numerics_every_backward_design_is_probed_and_ranked(capsys):
    code, out, _ = run(capsys, *SMALL)
    assert code == 0
    row = next(line for line in out.splitlines() if "finite on gates kimi (probe)" in line)
    assert row.split()[-4:] == ["yes"] * 4
    assert "among the designs that stay finite on gates kimi" in out and "Not ranked" not in out


def test_with_no_probe_nothing_is_ranked(capsys):
    code, out, _ = run(capsys, *SMALL, "--probe-chunks", "0")
    assert code == 0
    assert "none is ranked" in out and "training (forward + backward)" not in out
    assert "Not ranked: v4 (not checked)" in out


def test_the_json_says_safe_and_carries_the_probe(capsys):
    code, out, _ = run(capsys, *SMALL, "--json")
    assert code == 0
    for d in json.loads(out):
        assert d["safe"] is True and d["probe"]["finite"] is True and d["probe"]["chunks"] == 2
        assert d["probe"]["gates"] == "kimi"


def test_the_probe_runs_the_backward_numerics_too():
    s = Settings(chunks=2, gates="kimi", numerics=False)
    p = probe_backward("v6", "recompute", s)
    assert p.checked and p.finite and p.chunks == 2


def test_a_design_that_overflows_is_not_ranked_and_says_where():
    s = Settings(chunks=2, gates="kimi", numerics=False)
    results = [evaluate_backward(v, s) for v in ("v4", "v6")]
    for r in results:
        r.probe = Probe(r.version, 2, 64, "kimi", "bf16")
    bad = Overflow("dA", "bwd_intra: Phase V", None, 1, 0)
    results[1].probe = Probe("v6", 2, 64, "kimi", "bf16", bad)
    text = ranking_text(results)
    assert "training (forward + backward): v4 (the same)" in text
    assert "Not ranked: v6 (overflows in the probe: dA in bwd_intra: Phase V, chunk 1)" in text
    assert results[1].safe is False and results[0].safe is True
