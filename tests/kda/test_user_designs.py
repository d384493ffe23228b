"""A design from the user's file (docs/examples/my_design.py, the example of docs/how-to/write-a-design.md) runs
in every tool: kda.run, kda.sweep, kda.validate, the API and kda.simulate; bad input is one line, exit 2 or
KdaInputError; an installed package's entry point (group kda.designs) loads when its name is asked for."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import kda
from kda.cli.run import main as run_main
from kda.cli.validate import main as validate_main
from kda.settings import Settings
from kda.studies.evaluate import evaluate

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLE = "docs/examples/my_design.py:kda_chunk_late"
KIB = 1024


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)          # the example is named by its path from the repository root, as the docs do


def _run_json(capsys, *args):
    assert run_main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_kda_run_runs_the_example_by_its_path(capsys):
    d = _run_json(capsys, "--version", EXAMPLE, "--chunks", "3")
    assert d["version"] == "late" and d["parity"]["pass"] is True
    (prog,) = d["programs"]
    # bf16, C = 64, d_k = d_v = 128: a [64, 128] tile is 16 KiB, [64, 64] 8 KiB, the state [128, 128] 32 KiB.
    # v3's [80, 8, 8, 56, 24, 48] with K_decay moved from sync 1 to sync 5
    assert prog["sync_bytes_per_chunk"] == [k * KIB for k in (64, 8, 8, 56, 40, 48)]
    assert d["layer"]["syncs_per_chunk"] == 6


def test_version_all_runs_the_file_s_design_beside_the_built_ins(capsys):
    from kda.programs import DESIGNS
    d = _run_json(capsys, "--version", f"all,{EXAMPLE}", "--chunks", "2", "--no-numerics")
    assert [r["version"] for r in d] == [*DESIGNS, "late"]
    # a list of names runs each once, in order; a list with --backward, or an empty name, is one line
    d = _run_json(capsys, "--version", f"{EXAMPLE},v3,late", "--chunks", "2", "--no-numerics")
    assert [r["version"] for r in d] == ["late", "v3"]
    for bad in ([f"all,{EXAMPLE}", "--backward"], ["v3,,v6"], ["v3,nope.py:x"]):
        assert run_main(["--version", *bad[:1], *bad[1:], "--chunks", "2", "--no-numerics"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and ("--version" in err or "nope.py" in err)


def test_kda_sweep_takes_the_path_on_its_version_axis(tmp_path, capsys):
    pytest.importorskip("pandas")
    from kda.sweep import read_table
    from kda.sweep.__main__ import main
    spec = tmp_path / "s.toml"
    spec.write_text(f'numerics = false\n[axes]\nversion = ["v3", "{EXAMPLE}"]\n[fixed]\nchunks = 4\n')
    out = tmp_path / "r.csv"
    assert main([str(spec), "--workers", "0", "-o", str(out)]) == 0
    df = read_table(out)
    assert list(df["version"]) == ["v3", EXAMPLE] and set(df["status"]) == {"ok"}
    alone = _run_json(capsys, "--version", EXAMPLE, "--chunks", "4", "--no-numerics")
    assert df["layer.latency_us"][1] == pytest.approx(alone["layer"]["latency_us"], rel=1e-12)


def test_a_sweep_spec_with_a_bad_design_file_is_one_line(tmp_path, capsys):
    from kda.sweep.__main__ import main
    spec = tmp_path / "s.toml"
    spec.write_text('numerics = false\n[axes]\nversion = ["v3", "docs/examples/nope.py:x"]\n')
    assert main([str(spec), "--workers", "0", "-o", str(tmp_path / "r.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "docs/examples/nope.py: no such file" in err


def test_kda_validate_predicts_rows_naming_the_design_s_kernel(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_text("id,kernel,shape,dtype,measured_us,implementation,held_out\n"
                    "a,kda_late,1x256x2x128x128,bf16,100,mine,no\nb,kda_late,1x512x2x128x128,bf16,150,mine,yes\n")
    assert validate_main(["--version", EXAMPLE, "--data", str(rows), "--samples", "0", "--json"]) == 0
    got = {r["id"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    # the same design timed by kda.run: one sequence of 256 tokens x 2 heads (2 cores), launch included
    alone = _run_json(capsys, "--version", EXAMPLE, "--tokens", "256", "--heads", "2", "--no-numerics")
    assert got["a"]["predicted_us"] == pytest.approx(alone["layer"]["latency_us"], rel=1e-9)
    assert got["b"]["held_out"] is True and got["b"]["predicted_us"] > got["a"]["predicted_us"]


def test_kda_validate_without_the_file_does_not_know_the_kernel(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_text("id,kernel,shape,dtype,measured_us,implementation,held_out\n"
                    "a,kda_nobody,1x256x2x128x128,bf16,100,mine,no\n")
    assert validate_main(["--data", str(rows), "--samples", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "unknown kernel 'kda_nobody'" in err and "--version path.py:NAME" in err
    assert validate_main(["--version", "v3", "--data", str(rows)]) == 2
    assert "name a design in a file" in capsys.readouterr().err


def test_the_api_runs_the_example_as_v3_computes():
    torch.manual_seed(0)
    B, T, H, K, V = 1, 150, 2, 32, 32
    q, v = torch.randn(B, T, H, K), torch.randn(B, T, H, V)
    k = torch.nn.functional.normalize(torch.randn(B, T, H, K), dim=-1)
    g, beta = -0.1 * torch.rand(B, T, H, K), torch.rand(B, T, H)
    o, s = kda.chunk_kda(q, k, v, g, beta, version=EXAMPLE, output_final_state=True)
    o3, s3 = kda.chunk_kda(q, k, v, g, beta, version="v3", output_final_state=True)
    # the same products in the same order, K_decay made two phases later: the same numbers in fp32
    torch.testing.assert_close((o, s), (o3, s3), rtol=0, atol=0)
    ref, ref_s = kda.recurrent_kda(q.double(), k.double(), v.double(), g.double(), beta.double(),
                                   output_final_state=True)
    torch.testing.assert_close(o.double(), ref, rtol=1e-4, atol=1e-4)


def test_evaluate_takes_an_unregistered_program_under_any_name():
    import importlib.util
    spec = importlib.util.spec_from_file_location("example_copy", ROOT / "docs/examples/my_design.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for numerics in (False, True):
        r = evaluate("not-registered", Settings(chunks=2, numerics=numerics), program=module.kda_chunk_late)
        assert r.version == "not-registered" and r.passed and r.to_json()["layer"]["syncs_per_chunk"] == 6


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


BAD = [
    ("missing.py", None, "x", "missing.py: no such file"),
    ("raises.py", "raise RuntimeError('broken here')\n", "x", "raises.py: does not import: RuntimeError: broken here"),
    ("syntax.py", "def (\n", "x", "syntax.py: does not import: SyntaxError"),
    ("empty.py", "X = 1\n", "nope", "empty.py: has no 'nope'"),
    ("number.py", "X = 1\n", "X", "number.py:X is a int, not a per-chunk phase program"),
    ("clash.py", "from kda.programs.v3 import kda_chunk_v3 as P\n", "P", "its name 'v3' is a built-in design's"),
]


@pytest.mark.parametrize("name,text,attr,message", BAD, ids=[b[0] for b in BAD])
def test_bad_design_files_are_one_line_in_every_tool(tmp_path, capsys, name, text, attr, message):
    path = tmp_path / name if text is None else _write(tmp_path, name, text)
    spec = f"{path}:{attr}"
    assert run_main(["--version", spec, "--chunks", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and message in err and "Traceback" not in err
    q = torch.randn(1, 64, 1, 16)
    with pytest.raises(kda.KdaInputError, match=message.split(":")[-1].strip()[:20]):
        kda.chunk_kda(q, q, q, -torch.rand(1, 64, 1, 16), torch.rand(1, 64, 1), version=spec)
    with pytest.raises(kda.KdaInputError):
        kda.simulate(q, q, q, q, q[..., 0], version=spec)
    assert validate_main(["--version", spec]) == 2
    assert message in capsys.readouterr().err


def test_a_design_named_by_two_files_is_refused(tmp_path, capsys):
    body = "from npusim.model.schedule import Design, Pass\nfrom kda.programs.v3 import kda_chunk_v3\n" \
           "D = Design('twice', (Pass('only', kda_chunk_v3),))\n"
    first, second = _write(tmp_path, "first.py", body), _write(tmp_path, "second.py", body)
    assert run_main(["--version", f"{first}:D", "--chunks", "2", "--no-numerics"]) == 0
    capsys.readouterr()
    assert run_main(["--version", f"{second}:D", "--chunks", "2", "--no-numerics"]) == 2
    assert "its name 'twice' is already the design of" in capsys.readouterr().err


def test_an_installed_package_s_entry_point_loads_when_its_name_is_asked(tmp_path, monkeypatch, capsys):
    _write(tmp_path, "ep_designs.py", """\
        from npusim.model.schedule import Design, Pass, SEQUENTIAL
        from kda.programs.v3 import kda_chunk_v3
        EP = Design("from_ep", (Pass("v3", kda_chunk_v3, SEQUENTIAL),))
        """)
    info = tmp_path / "ep_designs-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-designs\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[kda.designs]\nfrom_ep = ep_designs:EP\nmisnamed = ep_designs:EP\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "ep_designs" not in sys.modules            # lazily: nothing loaded before the name is asked for
    d = _run_json(capsys, "--version", "from_ep", "--chunks", "2", "--no-numerics")
    assert d["version"] == "from_ep" and d["layer"]["syncs_per_chunk"] == 6
    assert run_main(["--version", "misnamed", "--chunks", "2"]) == 2
    assert "the entry point's name must be the design's" in capsys.readouterr().err


def test_simulate_is_kda_run_json_for_the_same_call():
    meta = dict(device="meta", dtype=torch.bfloat16)
    B, T, H, HV, K, V = 1, 300, 2, 4, 128, 128
    q, v = torch.empty(B, T, H, K, **meta), torch.empty(B, T, HV, V, **meta)
    g, beta = torch.empty(B, T, HV, K, **meta), torch.empty(B, T, HV, **meta)
    rep = kda.simulate(q, q, v, g, beta, version="v6", profile="ascend-910b2")
    cmd = [sys.executable, "-m", "kda.run", "--version", "v6", "--profile", "ascend-910b2", "--tokens", str(T),
           "--heads", str(H), "--value-heads", str(HV), "--no-numerics", "--json"]
    cli = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    ours = json.loads(json.dumps(rep.to_json()))
    assert rep.latency_us == cli["layer"]["latency_us"] and rep.bound_us == cli["layer"]["bound_us"]
    assert rep.syncs_per_chunk == cli["layer"]["syncs_per_chunk"] and rep.passes == cli["layer"]["passes"]
    assert (ours["layer"], ours["pipeline"], ours["programs"]) == (cli["layer"], cli["pipeline"], cli["programs"])
    assert ours == cli


def test_simulate_reads_cu_seqlens_and_the_dtype():
    q = torch.empty(1, 300, 1, 64, dtype=torch.float16)
    rep = kda.simulate(q, q, q, q, q[..., 0], cu_seqlens=torch.tensor([0, 100, 300]), version=EXAMPLE)
    d = rep.to_json()
    assert (d["seqlens"], d["dtype"], d["version"], d["batch"]) == ([100, 200], "fp16", "late", 1)
    with pytest.raises(kda.KdaInputError, match="cu_seqlens"):
        kda.simulate(q, q, q, q, q[..., 0], cu_seqlens=[0, 100])
    with pytest.raises(kda.KdaInputError, match="unknown option 'interleav'"):
        kda.simulate(q, q, q, q, q[..., 0], interleav=2)
    with pytest.raises(kda.KdaInputError, match="float64"):
        kda.simulate(q.double(), q, q, q, q[..., 0])
    # one sequence on one core: it cannot alternate two (kda.run --interleave 2 refuses the same call)
    with pytest.raises(kda.KdaInputError, match="--interleave 2: a core holds at most 1 sequence"):
        kda.simulate(q, q, q, q, q[..., 0], interleave=2)


def test_a_file_design_runs_in_the_stability_grid(capsys):
    from kda.cli.stability import main as stability_main
    assert stability_main(["--versions", f"v6,{EXAMPLE}", "--chunks", "1", "--no-thresholds", "--json"]) == 0
    grid = json.loads(capsys.readouterr().out)["grid"]
    assert {c["version"] for c in grid} == {"v6", "late"} and len(grid) == 2 * 3 * 4   # 3 types x 4 gate families
    assert stability_main(["--versions", "v6,nope.py:x", "--no-thresholds"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "nope.py" in err


def test_a_file_design_runs_in_the_attribution(capsys):
    from kda.cli.attribution import main as attribution_main
    assert attribution_main(["--version", EXAMPLE, "--chunks", "1"]) == 0
    assert "late, bf16, gates seed, 1 chunks" in capsys.readouterr().out
    assert attribution_main(["--version", "fla"]) == 2          # six passes: no one per-chunk program
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not one per-chunk program" in err
