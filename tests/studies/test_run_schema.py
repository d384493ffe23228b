"""kda-run --json: one shape for every design (kda/schema/run.schema.json), one pass or six."""
import json

import pytest

from kda.cli.run import main
from kda.programs import DESIGNS
from kda.studies.run_json import SCHEMA_VERSION, schema

jsonschema = pytest.importorskip("jsonschema")
SMALL = ["--chunks", "2", "--dk", "32", "--dv", "32"]


def _run(capsys, *args):
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _check(item):
    jsonschema.Draft202012Validator(schema()).validate(item)


def test_the_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(schema())
    assert schema()["properties"]["schema_version"]["const"] == SCHEMA_VERSION


@pytest.mark.parametrize("numerics", [True, False])
def test_every_design_matches_the_schema(capsys, numerics):
    items = _run(capsys, "--version", "all", *SMALL, *([] if numerics else ["--no-numerics"]))
    assert [d["version"] for d in items] == list(DESIGNS)
    for d in items:
        _check(d)
        layer = d["layer"]
        # one meaning of syncs per chunk: the passes' hand-offs, the programs' syncs, summed
        assert layer["syncs_per_chunk"] == sum(p["syncs_per_item"] for p in layer["passes"]) \
            == sum(p["syncs_per_chunk"] for p in d["programs"])
        assert layer["bound_us"] <= layer["latency_us"] * (1 + 1e-9)
        assert layer["efficiency"] == pytest.approx(layer["bound_us"] / layer["latency_us"])
        assert (d["pipeline"] is None) == (len(layer["passes"]) > 1)
    by = {d["version"]: d for d in items}
    # the design document's counts for one-pass designs; fla's six kernels hand off 0 + 2 + 1 + 1 + 4 + 1
    assert by["v3"]["layer"]["syncs_per_chunk"] == 6 and len(by["fla"]["layer"]["passes"]) == 6
    assert [p["syncs_per_item"] for p in by["fla"]["layer"]["passes"]] == [0, 2, 1, 1, 4, 1]
    assert by["v3"]["layer"]["latency_us"] == by["v3"]["pipeline"]["latency_us"]["pipelined"]


def test_a_run_without_timing_and_one_with_uncertainty_match_the_schema(capsys):
    d = _run(capsys, "--profile", "seed-doc", "--chunks", "4", "--resident", "none")   # sync ② overflows the slot
    _check(d)
    assert d["workspace_error"] and d["layer"] is None and d["pipeline"] is None
    d = _run(capsys, "--version", "v5", "--no-numerics", "--chunks", "2", "--uncertainty", "2")
    _check(d)
    assert d["uncertainty"]["samples"] == 2


def test_the_backward_layer_has_the_forward_layer_keys(capsys):
    d = _run(capsys, "--backward", "--version", "v4", *SMALL, "--chunk-size", "32", "--dtype", "fp32")
    layer_keys = set(schema()["properties"]["layer"]["properties"])
    assert d["schema_version"] == SCHEMA_VERSION and set(d["backward"]) == layer_keys


def test_the_json_says_what_profile_produced_it(capsys, tmp_path):
    """The name alone is not the chip: --set and a file inheriting from it are recorded. The digest is the
    content's: a file that inherits ascend-910b2 and changes nothing gives the same digest; one --set
    field, another; the overrides as given."""
    plain = _run(capsys, "--version", "v3", *SMALL, "--no-numerics")
    child = tmp_path / "child.toml"
    child.write_text('inherits = "ascend-910b2"\n')
    same = _run(capsys, "--version", "v3", *SMALL, "--no-numerics", "--profile", str(child))
    moved = _run(capsys, "--version", "v3", *SMALL, "--no-numerics", "--set", "sync.latency_us=0.5")
    assert plain["profile_overrides"] == {} and moved["profile_overrides"] == {"sync.latency_us": 0.5}
    assert same["profile_digest"] == plain["profile_digest"] != moved["profile_digest"]
    for item in (plain, same, moved):
        _check(item)


def test_the_list_of_version_all_matches_the_schema_as_printed(capsys):
    items = _run(capsys, "--version", "all", *SMALL, "--no-numerics")
    _check(items)                                       # the list itself, as --json prints it
    with pytest.raises(jsonschema.ValidationError):
        _check([items])                                 # a list of lists is not a report
    with pytest.raises(jsonschema.ValidationError):
        _check([])
