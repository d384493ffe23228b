"""The stability study: the grid's verdicts and v3's failure thresholds in nats per chunk.
(tests/kda/test_parity.py pins where v3 overflows; here: how the study classifies and bisects it.)"""
import json
from dataclasses import replace


from kda.cli.stability import main
from kda.studies.stability import FAIL, GRID_SETTINGS, OVERFLOW, PASS, grid, threshold

SMALL = replace(GRID_SETTINGS, chunks=2)


def test_grid_marks_v3s_overflows_and_v4_passing_everywhere():
    cells = {(c.version, c.dtype, c.gates): c for c in
             grid(["v3", "v4"], ["fp32", "bf16", "fp16"], ["seed", "kimi", "strong"], base=SMALL)}
    fp16 = cells["v3", "fp16", "seed"]
    assert fp16.status == OVERFLOW and fp16.where.startswith("K_div in sync ① (fp16)") and fp16.o_err is None
    assert cells["v3", "fp32", "kimi"].where.startswith("Gamma_inv in Phase A")
    assert cells["v3", "bf16", "seed"].status == PASS and 0.003 < cells["v3", "bf16", "seed"].err < 0.005
    assert all(c.status == PASS for (v, *_), c in cells.items() if v == "v4")
    # fp16 carries 3 more mantissa bits than bf16: once nothing overflows, it is the more accurate transfer
    assert cells["v4", "fp16", "seed"].err < cells["v4", "bf16", "seed"].err / 4
    assert cells["v4", "bf16", "seed"].policy == "transfer bf16; state fp32"


def test_v3_fp32_threshold_is_where_exp_overflows():
    th = threshold("v3", "fp32", kind=OVERFLOW, tol=0.05)
    assert 88.6 < th.nats < 88.8 and th.where.startswith("Gamma_inv in Phase A")   # log(fp32 max) = 88.72


def test_v3_fp16_fails_by_underflow_before_it_overflows():
    fail = threshold("v3", "fp16", kind=FAIL, tol=0.05)
    over = threshold("v3", "fp16", kind=OVERFLOW, tol=0.05)
    assert fail.status == FAIL and 8.5 < fail.nats < 10.0      # Q_scaled = Q e^-N in fp16's subnormals
    assert 11.5 < over.nats < 13.5 and over.where.startswith("K_div in sync ① (fp16)")   # |k| e^N > 65504


def test_v4_has_no_threshold():
    th = threshold("v4", "fp16", kind=FAIL, max_nats=1024)
    assert th.nats is None and th.last_pass == 1024


def test_cli_json_and_bad_input(capsys):
    assert main(["--versions", "v4", "--chunks", "1", "--no-thresholds", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert len(d["grid"]) == 12 and {c["status"] for c in d["grid"]} == {PASS} and d["thresholds"] == []
    assert main(["--versions", "v4", "--chunks", "1", "--no-thresholds"]) == 0
    assert "Stability grid" in capsys.readouterr().out
    assert main(["--versions", "v9"]) == 2
    assert "unknown version 'v9'" in capsys.readouterr().err
