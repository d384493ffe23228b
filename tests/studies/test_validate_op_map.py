"""kda.validate and npusim.calibrate read an msprof op summary through an op map: each mapped row predicted as the
kernel and stage it names (the same prediction as the shipped row of that kernel, stage and shape), grouped
under its OP Type; the other operators skipped; a bad map one line, exit 2."""
from __future__ import annotations

import json
from pathlib import Path

from npusim.fit.calibrate import main as calibrate_main

from kda.cli.validate import main as validate_main

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = ROOT / "tests" / "data" / "op_summary_mapped.csv"
EXAMPLE = ROOT / "docs" / "examples" / "op_map.toml"
SHIPPED = ROOT / "kda" / "validation" / "kda.csv"


def _rows(capsys, *data):
    assert validate_main([*data, "--samples", "0", "--json"]) == 0
    return json.loads(capsys.readouterr().out)["rows"]


def test_mapped_rows_predict_as_the_shipped_rows_of_the_same_stage(capsys):
    mapped = _rows(capsys, "--data", str(SUMMARY), "--ops", str(EXAMPLE))
    shipped = {r["id"]: r for r in _rows(capsys, "--data", str(SHIPPED))}
    assert [(r["implementation"], r["stage"], r["measured_us"], r["held_out"]) for r in mapped] == [
        ("ChunkKdaFwdPrepare", "prepare", 9604.0, True), ("ChunkKdaFwdPostWu", "post_wu", 722.0, True)]
    assert mapped[0]["predicted_us"] == shipped["fla-npu-a2-prepare"]["predicted_us"]
    assert mapped[1]["predicted_us"] == shipped["fla-npu-a2-post_wu"]["predicted_us"]


def test_a_bad_map_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "ops.toml"
    bad.write_text('[ops.ChunkKdaFwdPrepare]\nkernal = "kda_fla_npu"\n', encoding="utf-8")
    assert validate_main(["--data", str(SUMMARY), "--ops", str(bad), "--samples", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown key 'kernal'" in err and str(bad) in err


def test_calibrate_fits_no_held_out_row_of_a_map(tmp_path, capsys):
    code = calibrate_main([str(SUMMARY), "--ops", str(EXAMPLE), "--out", str(tmp_path / "fit.toml")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0     # every mapped row is held out: nothing is left to fit on
    assert err.endswith("op_summary_mapped.csv: every row it could use is held out (validation only)")


def test_the_json_matches_its_schema(capsys):
    from importlib.resources import files

    import pytest
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(files("kda").joinpath("schema/validate.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    for data in (["--data", str(SUMMARY), "--ops", str(EXAMPLE)], ["--data", str(SHIPPED)]):
        assert validate_main([*data, "--samples", "0", "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        jsonschema.Draft202012Validator(schema).validate(d)
        assert d["rows"] and all(r["held_out"] for r in d["rows"])
    bad = {**d, "rows": [{**d["rows"][0], "dtype": "int8"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(bad)
