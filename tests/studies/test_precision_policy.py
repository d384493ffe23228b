"""The precision policy (a type per payload, the state's type, the Cube's accumulation) from the API and
the CLI, its bytes, and error attribution (one hand-off rounded at a time, the rest exact)."""
import json
import math

import pytest

from kda.studies.attribution import find_policy
from kda.settings import Settings
from kda.studies.evaluate import evaluate
from kda.settings.inputs import make_settings_inputs
from kda.programs import get_program
from kda.cli.run import main
from npusim import Precision

KIB = 1024
# found by `python -m kda.attribution --version v3 --target 0.0025 [--fp32-only]` (greedy on the ranking)
V3_FP32_POLICY = {"K_div": "fp32", "M": "fp32", "O_intra": "fp32", "U": "fp32", "V_pseudo": "fp32"}
V3_MIXED_POLICY = {"K_div": "fp32", "M": "fp16", "O_intra": "fp16", "U": "fp16", "V_pseudo": "fp16"}


def test_payload_and_state_types_set_the_bytes():
    g = evaluate("v3", Settings(chunks=1, payload_dtypes={"A_raw": "fp32"}, state_dtype="fp32"),
                 timing=False).execution.graph
    assert [b / KIB for b in g.sync_bytes] == [80, 16, 8, 56, 24, 48]      # ② doubles, nothing else moves
    assert g.state.dtype == "fp32" and g.state.nbytes == 64 * KIB
    assert next(p for s in g.syncs for p in s.payload if p.name == "A_raw").dtype == "fp32"


@pytest.mark.parametrize("policy, extra_kib", [(V3_FP32_POLICY, 72), (V3_MIXED_POLICY, 16)])
def test_v3_policies_pass_bf16_with_margin(policy, extra_kib):
    base = evaluate("v3", Settings(chunks=16), timing=False)
    r = evaluate("v3", Settings(chunks=16, payload_dtypes=policy), timing=False)
    assert base.parity_o.rel_rms_err > 0.0035                          # uniform bf16: ~4.0e-3
    assert max(r.parity_o.rel_rms_err, r.parity_state.rel_rms_err) <= 0.0025 and r.execution.nonfinite is None
    extra = sum(r.execution.graph.sync_bytes) - sum(base.execution.graph.sync_bytes)
    assert extra == extra_kib * KIB          # fp32: M 8 + four 16 KiB tensors; mixed: K_div only (fp16 is 2 bytes)


def test_policy_search_gives_fp16_only_to_tensors_whose_range_allows_it():
    s = Settings(chunks=4)
    search = find_policy(make_settings_inputs(s), get_program("v3"), Precision("bf16"), target=0.0025)
    assert search.met and search.steps[-1].err <= 0.0025 < search.steps[0].err
    types = search.policy.overrides
    assert "fp16" in types.values()
    assert types.get("K_div", "fp32") == "fp32" and types.get("Q_scaled", "fp32") == "fp32"   # e^+50, e^-50
    only32 = find_policy(make_settings_inputs(s), get_program("v3"), Precision("bf16"), 0.0025, fp32_only=True)
    assert only32.met and set(only32.policy.overrides.values()) == {"fp32"}
    assert only32.extra_bytes > search.extra_bytes


def test_narrow_accumulation_hurts_v3_not_v4():
    # v3's A_qk_raw = Q_scaled K_div^T sums products of e^-50 and e^+50 factors; v4's factors are <= 1
    v3 = evaluate("v3", Settings(chunks=16, accumulate_dtype="bf16"), timing=False)
    v4 = evaluate("v4", Settings(chunks=16, accumulate_dtype="bf16"), timing=False)
    assert not v3.parity_o.passed and v4.passed
    assert v3.execution.precision.describe().endswith("accumulate bf16")
    fp32 = evaluate("v3", Settings(chunks=2, accumulate_dtype="fp32"), timing=False)
    assert fp32.parity_o.rel_rms_err == evaluate("v3", Settings(chunks=2), timing=False).parity_o.rel_rms_err


def test_attribution_ranks_the_overflowing_payload_first_then_the_underflowing_one():
    # fp16: K_div = K exp(-gc) reaches ~e^50 > 65504 (inf); Q_scaled = Q exp(gc) ~ e^-50 flushes late rows
    # to zero, and A_qk_raw = Q_scaled K_div^T (K_div exact) loses them: O(1) output error
    r = evaluate("v3", Settings(chunks=2, dtype="fp16", attribution=True), timing=False)
    a = r.attribution
    assert a.ranking[:2] == ["K_div", "Q_scaled"]
    worst = a.payloads[0]
    assert math.isinf(worst.o_err) and worst.where == "sync ①" and worst.overflow.startswith("K_div in sync ① (fp16)")
    assert a.payloads[1].o_err > 0.1 and a.payloads[1].overflow is None
    assert a.exact.o_err < 1e-5 and a.syncs[0].name == "sync ①"
    # a tensor that holds inf only where the program masks it (A_qk_raw above the diagonal) ranks by its error
    masked = next(i for i in a.payloads if i.name == "A_qk_raw")
    assert masked.overflow is not None and masked.o_err < 1e-3


def test_attribution_follows_the_policy():
    r = evaluate("v3", Settings(chunks=2, payload_dtypes={"K_div": "fp32", "M": "fp32"}, state_dtype="fp32",
                                attribution=True), timing=False)
    names = set(r.attribution.ranking)
    assert "K_div" not in names and "M" not in names and "state" not in names and "A_raw" in names
    assert all(i.dtype == "bf16" for i in r.attribution.payloads)
    # independent roundings add roughly in quadrature
    assert 0.5 < r.attribution.quadrature / r.attribution.full.o_err < 2


def test_cli_policy_flags_and_json(capsys):
    assert main(["--version", "v3", "--chunks", "2", "--precision", "A_raw=fp32, M=fp32", "--state-dtype", "fp32",
                 "--accumulate", "fp32", "--attribution", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    p = d["precision"]
    assert p["payloads"]["A_raw"] == "fp32" and p["payloads"]["U"] == "bf16" and p["state"] == "fp32"
    assert p["bytes_per_chunk"] == {"syncs": 240 * KIB, "state": 64 * KIB, "uniform_transfer": 256 * KIB}
    assert d["errors"]["o"] == d["parity"]["rel_rms_err"] and len(d["errors"]["o_per_chunk"]) == 2
    tensors = d["programs"][0]["sync_tensors"]
    assert d["attribution"]["payloads"][0]["name"] in tensors[0] + tensors[3] + tensors[4] + tensors[5]
    assert main(["--version", "v3", "--chunks", "2", "--precision", "M=fp32", "--attribution"]) == 0
    out = capsys.readouterr().out
    assert "Error attribution" in out and "M (fp32)" in out and "+8 KiB" in out


def test_cli_all_versions_take_names_any_of_them_hands_over(capsys):
    assert main(["--version", "all", "--chunks", "1", "--dk", "32", "--dv", "32", "--precision", "K_div=fp32",
                 "--json"]) == 0
    d = {x["version"]: x for x in json.loads(capsys.readouterr().out)}
    assert d["v3"]["precision"]["payloads"]["K_div"] == "fp32" and "K_div" not in d["v4"]["precision"]["payloads"]
    assert d["v4"]["precision"]["state"] == "fp32" and d["v3"]["precision"]["state"] == "bf16"


@pytest.mark.parametrize("args, message", [
    (["--precision", "A_raw:fp32"], "'A_raw:fp32' is not NAME=TYPE"),
    (["--precision", "A_raw=fp8"], "'A_raw=fp8' is not NAME=TYPE"),
    (["--version", "v3", "--precision", "A_rw=fp32"], "v3 hands over no tensor named 'A_rw'"),
    (["--version", "all", "--precision", "A_rw=fp32"], "no version hands over a tensor named 'A_rw'"),
    (["--state-dtype", "fp64"], "invalid choice"),
])
def test_bad_policy_is_one_line_and_exit_2(capsys, args, message):
    with pytest.raises(SystemExit) as exit_:
        raise SystemExit(main(["--chunks", "1", "--dk", "16", "--dv", "16", *args]))
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
