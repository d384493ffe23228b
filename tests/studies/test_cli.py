"""python -m kda.run: the main job, its JSON, and one-line errors with exit status 2."""
import json
import subprocess
import sys

import pytest
import torch

from kda.cli.run import main

KEYS = {"schema_version", "version", "chunks", "heads", "chunk_size", "d_k", "d_v", "dtype", "profile", "layer",
        "pipeline", "programs", "parity", "overflow"}


def run_json(capsys, *args):
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_main_job_prints_a_summary(capsys):
    assert main(["--version", "v3", "--chunks", "4"]) == 0
    out = capsys.readouterr().out
    for text in ("KDA v3 on ascend-910b2", "Hand-offs per chunk (6 syncs)", "rides on sync ③", "pipelined",
                 "efficiency", "V (16 KiB) is redundant"):
        assert text in out


def test_json_has_the_documented_keys(capsys):
    d = run_json(capsys, "--version", "v3", "--chunks", "3", "--heads", "2", "--profile", "seed-doc", "--dtype", "bf16")
    assert KEYS <= set(d)
    (prog,) = d["programs"]
    assert d["layer"]["syncs_per_chunk"] == prog["syncs_per_chunk"] == 6
    assert prog["sync_bytes_per_chunk"] == [k * 1024 for k in (80, 8, 8, 56, 24, 48)]
    assert d["layer"]["sync_bytes_per_chunk"] == (80 + 8 + 8 + 56 + 24 + 48) * 1024
    assert prog["redundant_bytes_per_chunk"] == 16 * 1024 and d["heads"] == 2 and d["overflow"] is None
    lat = d["pipeline"]["latency_us"]
    assert set(lat) >= {"serial", "pipelined", "bound", "sync"}
    assert lat["bound"] <= lat["pipelined"] <= lat["serial"]
    assert (d["layer"]["bound_us"], d["layer"]["latency_us"], d["layer"]["serial_us"]) == (
        lat["bound"], lat["pipelined"], lat["serial"])
    assert round(lat["sync"], 2) == 8.29
    assert set(d["pipeline"]["utilization"]) >= {"cube", "vec"} and d["parity"]["pass"] is True
    assert d["pipeline"]["state_handoffs"]["rides_on"] == "③" and d["pipeline"]["state_handoffs"]["total"] == 2 * 2


def test_all_versions_give_a_list_and_a_side_by_side_table(capsys):
    d = run_json(capsys, "--version", "all", "--chunks", "2", "--dk", "32", "--dv", "32")
    from kda.programs import DESIGNS
    assert [x["version"] for x in d] == list(DESIGNS) and list(DESIGNS)[:3] == ["v1", "v2", "v3"]
    assert main(["--version", "all", "--chunks", "2", "--dk", "32", "--dv", "32"]) == 0
    assert "Versions side by side" in capsys.readouterr().out


def test_same_seed_same_numbers(capsys):
    a = run_json(capsys, "--chunks", "3", "--seed", "5")
    b = run_json(capsys, "--chunks", "3", "--seed", "5")
    assert a == b


def test_overflow_is_reported_not_hidden(capsys):
    d = run_json(capsys, "--chunks", "2", "--dtype", "fp16")
    assert d["overflow"]["tensor"] == "K_div" and d["parity"]["pass"] is False
    assert main(["--chunks", "2", "--dtype", "fp16"]) == 0
    assert "overflow: inf/NaN first appears in K_div in sync ① (fp16)" in capsys.readouterr().out
    assert main(["--chunks", "2", "--dtype", "fp16", "--strict"]) == 1


@pytest.mark.parametrize("args, message", [
    (["--version", "v9"], "unknown version 'v9'"),
    (["--chunks", "0"], "--chunks must be >= 1, got 0"),
    (["--profile", "nope"], "unknown profile 'nope'"),
    (["--profile", "missing.toml"], "profile file missing.toml does not exist"),
    (["--dtype", "int8"], "argument --dtype: invalid choice"),
    (["--version", "v1", "--dk", "16", "--dv", "8"], "needs d_k == d_v"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, args, message):
    with pytest.raises(SystemExit) as exit_:
        code = main(args)
        raise SystemExit(code)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


def _inputs(tmp_path, **change):
    from kda.driver.inputs import make_inputs
    x = make_inputs(tokens=70, heads=2, d_k=16, d_v=16)
    data = {"q": x.q, "k": x.k, "v": x.v, "alpha": x.g.exp(), "beta": x.beta, **change}
    path = tmp_path / "in.pt"
    torch.save(data, path)
    return path


def test_user_inputs_from_a_file(tmp_path, capsys):
    d = run_json(capsys, "--inputs", str(_inputs(tmp_path)), "--dtype", "fp32")
    assert (d["tokens"], d["heads"], d["d_k"], d["chunks"]) == (70, 2, 16, 2) and d["parity"]["pass"]


@pytest.mark.parametrize("change, message", [
    ({"alpha": torch.full((1, 70, 2, 16), 1.5)}, "decay alpha must lie in (0, 1]"),
    ({"alpha": torch.zeros(1, 70, 2, 16)}, "decay alpha must lie in (0, 1]"),
    ({"v": torch.full((1, 70, 2, 16), float("nan"))}, "v contains NaN or inf"),
    ({"k": torch.zeros(1, 70, 2, 8)}, "k must have shape [1, 70, 2, 16]"),
])
def test_bad_user_inputs(tmp_path, capsys, change, message):
    assert main(["--inputs", str(_inputs(tmp_path, **change))]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_the_module_runs_as_a_program_without_tracebacks():
    ok = subprocess.run([sys.executable, "-m", "kda.cli.run", "--chunks", "2", "--json"], capture_output=True, text=True)
    assert ok.returncode == 0 and json.loads(ok.stdout)["version"] == "v3"
    bad = subprocess.run([sys.executable, "-m", "kda.cli.run", "--chunks", "-3"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --chunks must be >= 1, got -3"


def test_workspace_plan_from_the_command_line(capsys):
    d = run_json(capsys, "--profile", "seed-doc", "--chunks", "4", "--resident", "none", "--slot-kib", "96")
    assert d["workspace_error"] is None and d["layer"]["efficiency"] == pytest.approx(1.0)
    d = run_json(capsys, "--profile", "seed-doc", "--chunks", "4", "--resident", "none")
    assert d["workspace_error"].startswith("v3: sync ② needs 88 KiB live in a 64 KiB ping/pong slot")
    assert d["layer"] is None and d["pipeline"] is None


def test_a_version_the_input_does_not_suit_loses_nothing_else(capsys):
    # v1's defect needs d_k == d_v: its error is reported, the other versions are still computed and shown
    assert main(["--version", "all", "--chunks", "2", "--dk", "16", "--dv", "8", "--json"]) == 2
    out, err = capsys.readouterr()
    from kda.programs import DESIGNS
    assert [d["version"] for d in json.loads(out)] == [v for v in DESIGNS if v != "v1"]
    assert err.strip() == ("error: v1: v1's defect decays the value axis with the key-axis factors: "
                           "it needs d_k == d_v")


def test_policy_names_are_checked_without_numerics_too(capsys):
    assert main(["--no-numerics", "--chunks", "2", "--precision", "Nope=fp32"]) == 2
    err = capsys.readouterr().err.strip()
    assert "precision policy: v3 hands over no tensor named 'Nope'" in err and "\n" not in err


def test_set_overrides_a_profile_field(tmp_path):
    """--set sync.latency_us=2 adds (2 - the profile's latency) us per sync per chunk: with 6 syncs over
    4 chunks serial latency grows by exactly 6 x 4 x that."""
    import json
    from npusim import load_profile
    extra_us = 2.0 - load_profile("ascend-910b2").sync.latency_us
    from kda.cli.run import main
    import contextlib, io
    outs = []
    for extra in ([], ["--set", "sync.latency_us=2"]):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(["--no-numerics", "--chunks", "4", "--json", *extra]) == 0
        outs.append(json.loads(buf.getvalue())["layer"]["serial_us"])
    assert abs((outs[1] - outs[0]) - 6 * 4 * extra_us) < 1e-6


def test_set_rejects_unknown_field_and_non_numbers(capsys):
    from kda.cli.run import main
    assert main(["--no-numerics", "--set", "sync.nope=2"]) == 2
    assert "no field sync.nope" in capsys.readouterr().err
    assert main(["--no-numerics", "--set", "sync.latency_us=x"]) == 2
    assert "not a number" in capsys.readouterr().err
