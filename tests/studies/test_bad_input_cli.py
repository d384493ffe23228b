"""Every run ends with a report, or with one line and exit status 2; never a traceback, a silently
wrong number, or Infinity in JSON."""
import json

import pytest

from kda.cli.run import main
from kda.programs import DESIGNS

SMALL = ["--dk", "16", "--dv", "16"]


def strict_json(text: str):
    """json.loads that refuses Infinity and NaN, as any parser but Python's does."""
    def refuse(name):
        raise AssertionError(f"{name} in JSON")
    return json.loads(text, parse_constant=refuse)


def one_line_error(capsys, argv, *needles):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    for n in needles:
        assert n in err[0], err[0]
    return err[0]


# 1. unequal lengths in a variable-length batch: every design reports, with the numerics
@pytest.mark.parametrize("version", list(DESIGNS))
def test_every_design_reports_on_unequal_lengths(capsys, version):
    assert main(["--version", version, "--seqlens", "64,130", *SMALL, "--dtype", "fp32", "--json"]) == 0
    d = strict_json(capsys.readouterr().out)
    assert d["seqlens"] == [64, 130] and d["parity"]["rel_rms_err"] < 1e-4    # the numerics are kept
    assert d["layer"]["latency_us"] > 0


def test_unequal_lengths_timing_only_and_all_versions(capsys):
    assert main(["--version", "all", "--seqlens", "64,4096,1", "--no-numerics", *SMALL, "--json"]) == 0
    d = strict_json(capsys.readouterr().out)
    assert [x["version"] for x in d] == list(DESIGNS)


# 2. impossible machines
def test_more_cores_than_the_profile_has_is_refused(capsys):
    one_line_error(capsys, ["--cores", "25", "--no-numerics", "--chunks", "2"], "--cores 25", "24 AI cores")
    assert main(["--cores", "24", "--no-numerics", "--chunks", "2", "--heads", "2"]) == 0


@pytest.mark.parametrize("field, value", [("sync.latency_us", "1e308"), ("core.align_bytes", "1e12"),
                                          ("chip.clock_ghz", "1e9"), ("cube.macs_per_cycle", "1e300")])
def test_absurd_profile_values_are_refused(capsys, field, value):
    one_line_error(capsys, ["--set", f"{field}={value}", "--no-numerics", "--chunks", "2"], field)


@pytest.mark.parametrize("field, value", [("sync.latency_us", "inf"), ("chip.clock_ghz", "inf"),
                                          ("chip.launch_overhead_us", "nan"), ("workspace.slot_kib", "inf")])
def test_non_finite_profile_values_in_a_file_are_refused(capsys, tmp_path, field, value):
    section, name = field.split(".")
    path = tmp_path / "p.toml"
    path.write_text(f'inherits = "ascend-910b2"\n[{section}]\n{name} = {value}\n')
    one_line_error(capsys, ["--profile", str(path), "--no-numerics", "--chunks", "2"], field)


def test_json_never_holds_infinity(capsys):
    # seed-doc has no HBM rate (inf): the roofline ratio has no floor; it must come out as null
    assert main(["--profile", "seed-doc", "--version", "all", "--chunks", "2", *SMALL, "--json"]) == 0
    d = strict_json(capsys.readouterr().out)
    assert all(x["version"] for x in d)


# 5. work this machine cannot do: refused before it starts, saying the limit and how to lift it
@pytest.mark.parametrize("argv", [["--chunk-size", "100000"], ["--chunks", "100000000"],
                                  ["--tokens", "1000000000000"], ["--heads", "10000000", "--no-numerics"],
                                  ["--seqlens", "1,100000000000"], ["--uncertainty", "100000000", "--no-numerics"],
                                  ["--chunks", "1500000", "--no-numerics", "--trace", "t.json"]])
def test_huge_runs_are_refused_before_they_start(capsys, argv):
    one_line_error(capsys, argv, "limit", "NPUSIM_NO_LIMITS=1")


def test_the_limit_can_be_lifted(capsys, monkeypatch):
    from npusim.model.limits import LimitError, check
    with pytest.raises(LimitError, match="limit of 10"):
        check("x", 11, 10)
    monkeypatch.setenv("NPUSIM_NO_LIMITS", "1")
    check("x", 11, 10)


def test_validate_refuses_a_huge_sample_count(capsys):
    from kda.cli.validate import main as validate
    assert validate(["--samples", "100000000"]) == 2
    assert "--samples" in capsys.readouterr().err


def test_a_huge_sweep_grid_is_refused_before_its_points_are_listed():
    from kda.sweep.spec import SpecError, parse_spec
    axes = {"sync.latency_us": [0.1 * i for i in range(1, 1001)], "seed": list(range(1000)),
            "heads": list(range(1, 1001))}                                  # 1e9 points
    with pytest.raises(SpecError, match="points"):
        parse_spec({"axes": axes, "numerics": False})


# 6. options that contradict each other
@pytest.mark.parametrize("argv, needle", [
    (["--tokens", "100", "--chunks", "5"], "--chunks"), (["--seqlens", "64,130", "--chunks", "3"], "--chunks"),
    (["--states", "store"], "--backward"), (["--inputs", "x.pt", "--dk", "16"], "--dk"),
    (["--inputs", "x.pt", "--heads", "2"], "--heads")])
def test_conflicting_options_are_refused(capsys, argv, needle):
    one_line_error(capsys, argv, needle)


def test_options_that_agree_still_run(capsys):
    assert main(["--tokens", "100", "--no-numerics", *SMALL]) == 0
    assert main(["--chunks", "2", "--no-numerics", *SMALL]) == 0


# 7. the verdict in the exit status under --strict
@pytest.mark.parametrize("argv", [["--slot-kib", "1", *SMALL], ["--profile", "seed-doc", "--dtype", "fp32"]])
def test_a_workspace_plan_that_fails_exits_1_under_strict(capsys, argv):
    argv = [*argv, "--chunks", "2", "--no-numerics"]
    assert main(argv) == 0                                  # the report is printed: the run finished
    assert "workspace" in capsys.readouterr().out
    assert main([*argv, "--strict"]) == 1


def test_one_verdict_per_run(capsys):
    # chunk size 1: single-token chunks have tiny errors relative to nothing; the whole output passes
    assert main(["--chunk-size", "1", "--chunks", "4", *SMALL]) == 0
    out = capsys.readouterr().out
    assert "fails parity" not in out


# 9. smaller ones
@pytest.mark.parametrize("value, needle", [("list", "list"), ("sparse", "sparse")])
def test_inputs_that_are_not_dense_tensors_are_one_line(capsys, tmp_path, value, needle):
    import torch
    from kda.driver.inputs import make_inputs
    x = make_inputs(1, 8, 1, 4, 4, "seed", 0, False)
    data = {"q": x.q, "k": x.k, "v": x.v, "g": x.g, "beta": x.beta}
    data["q"] = x.q.tolist() if value == "list" else x.q.reshape(8, 4).to_sparse()
    path = tmp_path / "x.pt"
    torch.save(data, path)
    one_line_error(capsys, ["--inputs", str(path)], "q must be a dense tensor", needle)


def test_uncertainty_without_ranges_says_there_is_nothing_to_sample(capsys, tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('inherits = "seed-doc"\n')            # seed-doc gives no field a range
    assert main(["--no-numerics", "--chunks", "2", "--uncertainty", "3", "--profile", str(path)]) == 2
    assert "nothing to sample" in capsys.readouterr().err


def test_an_unwritable_trace_names_the_option(capsys, tmp_path):
    (tmp_path / "t.json").mkdir()                          # a directory where the file should go
    assert main(["--no-numerics", "--chunks", "2", *SMALL, "--trace", str(tmp_path / "t.json")]) == 2
    assert "--trace" in capsys.readouterr().err


def test_the_sub_chunk_error_does_not_blame_v4_for_fla(capsys):
    assert main(["--version", "fla", "--chunk-size", "24", "--chunks", "2", *SMALL]) == 2
    err = capsys.readouterr().err
    assert "sub-chunks of 16" in err and "v4" not in err
