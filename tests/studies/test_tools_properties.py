"""Every entry point on random options and random files (hypothesis): kda.sweep (and its plot), kda.validate,
npusim.calibrate, kda.attribution, kda.stability, and kda.run's --inputs with tensor files of every dtype and
layout. The property is the project's promise: a report (exit 0 or 1), or one line on stderr and exit 2,
within a bounded time (hypothesis' deadline); never a traceback. Small shapes, so each example is quick."""
from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BOUND_S = 60                                  # a case past this is a hang, whatever the machine's load
SETTINGS = dict(deadline=timedelta(seconds=BOUND_S), derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def promise(capsys, main, argv):
    """Run `main(argv)` and check the promise; returns (code, out)."""
    t0 = time.monotonic()
    try:
        code = main(argv)
    except SystemExit as exit_:                  # argparse's own refusals
        code = exit_.code
    out, err = capsys.readouterr()
    assert time.monotonic() - t0 < BOUND_S, argv
    assert "Traceback" not in err, (argv, err)
    assert code in (0, 1, 2), (argv, code, err)
    if code == 2:
        errors = [x for x in err.splitlines() if x.startswith("error:")]
        assert errors, (argv, err)
        if not out.strip():
            assert len(errors) == 1, (argv, err)
    return code, out


# ---- files ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def place(tmp_path_factory):
    d = tmp_path_factory.mktemp("props")
    (d / "dir").mkdir()
    if Path("/dev/full").exists():
        (d / "full.png").symlink_to("/dev/full")
    return d


TARGETS = st.sampled_from(["dir", "proc", "full", "nodir", "ok"])


def target(place: Path, kind: str, name: str) -> str:
    return {"dir": str(place / "dir"), "proc": f"/proc/kda_{name}", "full": str(place / "full.png"),
            "nodir": str(place / "no" / name), "ok": str(place / name)}[kind]


# ---- kda.sweep and its plot -----------------------------------------------------------------------------
AXES = {"version": ['"v3"', '"v2"', '"v9"', "3"], "chunks": ["1", "2", "0", "-1", "1e9", '"a"'],
        "chunk-size": ["16", "64", "0", "7"], "dtype": ['"bf16"', '"fp9"'], "heads": ["1", "2", "100000000"],
        "interleave": ["1", "2", "1000000"], "sync.latency_us": ["0.5", "-1.0", "inf", "nan"],
        "isa.enabled": ["0", "1", "0.5"], "seed": ["0", "-1"], "profile": ['"seed-doc"', '"nope"'],
        "value-heads": ["2", "100000"], "colour": ["1"]}


@st.composite
def specs(draw):
    names = draw(st.lists(st.sampled_from(sorted(AXES)), min_size=0, max_size=3, unique=True))
    lines = [f"numerics = {draw(st.sampled_from(['false', 'false', 'true', '1']))}"]
    if draw(st.booleans()):
        lines.append(draw(st.sampled_from(['metrics = ["layer.latency_us"]', "metrics = 3", 'metrics = [""]'])))
    lines.append("[axes]")
    for n in names:
        values = draw(st.lists(st.sampled_from(AXES[n]), min_size=0, max_size=2))
        key = f'"{n}"' if "." in n else n
        lines.append(f"{key} = [{', '.join(values)}]")
    lines += ["[fixed]", "dk = 16", "dv = 16"]
    if "chunks" not in names:
        lines.append(draw(st.sampled_from(["chunks = 2", "tokens = 70", "chunks = 2\ntokens = 70"])))
    return "\n".join(lines) + "\n"


@settings(max_examples=25, **SETTINGS)
@given(spec=specs(), out=TARGETS, cache=st.sampled_from(["none", "garbage", "dir", "ok"]))
def test_sweep_specs_and_targets(capsys, place, spec, out, cache):
    from kda.sweep.__main__ import main
    path = place / "s.toml"
    path.write_text(spec)
    (place / "garbage.jsonl").write_bytes(bytes(range(256)) * 4 + b"\n{}\n")
    argv = [str(path), "--workers", "0", "--quiet", "-o", target(place, out, "r.csv")]
    argv += {"none": ["--no-cache"], "garbage": ["--cache", str(place / "garbage.jsonl")],
             "dir": ["--cache", str(place / "dir")], "ok": ["--cache", str(place / "c.jsonl")]}[cache]
    promise(capsys, main, argv)


@pytest.fixture(scope="module")
def table(place):
    from kda.sweep import parse_spec, run_sweep
    from kda.sweep.table import write_table
    spec = parse_spec({"numerics": False, "axes": {"version": ["v2", "v3"], "chunks": [1, 2]},
                       "fixed": {"dk": 16, "dv": 16}})
    return write_table(run_sweep(spec).rows, place / "table.csv")


@settings(max_examples=15, **SETTINGS)
@given(which=st.sampled_from(["table", "garbage", "other", "missing"]),
       metric=st.sampled_from([None, "version", "layer.latency_us", "nope", "status"]),
       heatmap=st.sampled_from([None, "version,chunks", "a", "version,nope", "a,b,c"]), out=TARGETS)
def test_sweep_plot_options(capsys, place, table, which, metric, heatmap, out):
    from kda.sweep.__main__ import main
    (place / "garbage.csv").write_bytes(bytes(range(256)) * 4)
    (place / "other.csv").write_text("a,b\n1,2\n")
    path = {"table": table, "garbage": place / "garbage.csv", "other": place / "other.csv",
            "missing": place / "none.csv"}[which]
    argv = ["plot", str(path), "--outdir", target(place, out, "plots")]
    argv += ["--metric", metric] if metric else []
    argv += ["--heatmap", heatmap] if heatmap else []
    promise(capsys, main, argv)


# ---- measurement files: kda.validate and npusim.calibrate ---------------------------------------------------
CELLS = {"kernel": ["kda_v3", "gdn_pto", "flash", "", "v3"],
         "shape": ["1x64x1x16x16", "1x128x2x16x16", "64x16", "0x64x1x16x16", '"B=1;T=64;H=1;K=16;V=16;C=1000000"',
                   "100000000x64x1x16x16", '"B=1;T=64;H=3;Hg=2;K=16;V=16"', "1x6.4x1x16x16"],
         "dtype": ["bf16", "fp16", "fp32", "int8", ""], "measured_us": ["30", "0", "-3", "nan", "inf", "fast", "1e300"],
         "held_out": ["no", "yes", "maybe", ""], "stage": ["", "kkt", "chunk_h"]}


@st.composite
def rows(draw, columns):
    n = draw(st.integers(0, 4))
    body = []
    for i in range(n):
        cells = [f"r{i}" if c == "id" else draw(st.sampled_from(CELLS.get(c, ["x"]))) for c in columns]
        if draw(st.integers(0, 9)) == 0:
            cells = cells[:draw(st.integers(0, len(cells)))]          # a row cut short
        body.append(",".join(cells))
    header = ",".join(columns) if draw(st.integers(0, 9)) else ",".join(columns[:-1])
    return "\n".join([header, *body]) + "\n"


VALIDATE_COLUMNS = ["id", "kernel", "stage", "shape", "dtype", "measured_us", "implementation", "held_out"]


@settings(max_examples=25, **SETTINGS)
@given(text=rows(VALIDATE_COLUMNS), fit=st.booleans(), plot=st.sampled_from([None, "dir", "ok", "proc"]),
       binary=st.integers(0, 9))
def test_validate_on_random_rows(capsys, place, text, fit, plot, binary):
    from kda.cli.validate import main
    path = place / "v.csv"
    path.write_bytes(bytes(range(256)) if binary == 0 else text.encode())
    argv = ["--data", str(path), "--samples", "0"] + (["--fit", "--fields", "sync.latency_us"] if fit else [])
    argv += ["--plot", target(place, plot, "v.png")] if plot else []
    promise(capsys, main, argv)


@settings(max_examples=25, **SETTINGS)
@given(text=rows(["kernel", "shape", "dtype", "measured_us"]), out=st.sampled_from([None, "dir", "ok", "proc"]),
       kernels=st.sampled_from(["kda", "pwn", ".registry", ""]), host_floor=st.booleans())
def test_calibrate_on_random_rows(capsys, place, text, out, kernels, host_floor):
    from npusim.fit.calibrate import main
    path = place / "c.csv"
    path.write_text(text)
    argv = [str(path), "--fields", "sync.latency_us", "--kernels", kernels] + (["--host-floor"] if host_floor else [])
    argv += ["--out", target(place, out, "f.toml")] if out else []
    promise(capsys, main, argv)


# ---- kda.attribution, kda.stability -------------------------------------------------------------------------
INTS = st.sampled_from(["1", "2", "0", "-1", "abc", "1000000000"])


@settings(max_examples=15, **SETTINGS)
@given(chunks=INTS, heads=st.sampled_from(["1", "0", "100000000"]),
       target_=st.sampled_from([None, "0.0025", "nan", "-1", "0", "inf"]),
       precision=st.sampled_from([None, "x", "A_raw=fp32", "nope=fp32"]))
def test_attribution_options(capsys, chunks, heads, target_, precision):
    from kda.cli.attribution import main
    argv = ["--chunks", chunks, "--heads", heads]
    argv += ["--target", target_] if target_ else []
    argv += ["--precision", precision] if precision else []
    code, _ = promise(capsys, main, argv)
    assert code == 2 or (chunks in ("1", "2") and heads == "1" and target_ not in ("nan", "-1", "0", "inf"))


@settings(max_examples=10, **SETTINGS)
@given(chunks=INTS, versions=st.sampled_from(["v3", "v9", "", ",", "v3,v4"]), as_json=st.booleans())
def test_stability_options(capsys, chunks, versions, as_json):
    from kda.cli.stability import main
    argv = ["--chunks", chunks, "--versions", versions, "--no-thresholds"] + (["--json"] if as_json else [])
    promise(capsys, main, argv)


# ---- kda.run --inputs: tensor files of every dtype and layout ----------------------------------------------
DTYPES = ["float32", "float64", "float16", "bfloat16", "float8_e4m3fn", "int32", "bool", "complex64"]
LAYOUTS = ["dense", "meta", "sparse", "nested", "noncontiguous", "q3d", "q5d", "list", "zero_tokens", "nan",
           "missing_beta", "not_a_dict", "garbage"]


def _inputs_file(path: Path, dtype: str, layout: str) -> None:
    if layout == "garbage":
        path.write_bytes(bytes(range(256)))
        return
    gen = torch.Generator().manual_seed(0)
    B, T, H, K = 1, 40, 2, 8
    x = {"q": torch.randn(B, T, H, K, generator=gen), "k": torch.randn(B, T, H, K, generator=gen),
         "v": torch.randn(B, T, H, K, generator=gen), "g": -torch.rand(B, T, H, K, generator=gen),
         "beta": torch.rand(B, T, H, generator=gen)}
    x = {n: t.to(getattr(torch, dtype)) for n, t in x.items()}
    if layout == "meta":
        x = {n: t.to("meta") for n, t in x.items()}
    elif layout == "sparse":
        x["q"] = x["q"].reshape(T * H, K).to_sparse() if dtype not in ("bool",) else x["q"]
    elif layout == "nested":
        x["q"] = torch.nested.nested_tensor([x["q"][0, :, 0].float(), x["q"][0, :20, 0].float()])
    elif layout == "noncontiguous":
        x = {n: t.transpose(0, 1).contiguous().transpose(0, 1) for n, t in x.items()}
    elif layout == "q3d":
        x["q"] = x["q"][0]
    elif layout == "q5d":
        x["q"] = x["q"][None]
    elif layout == "list":
        x["q"] = x["q"].float().tolist()
    elif layout == "zero_tokens":
        x = {n: t[:, :0] for n, t in x.items()}
    elif layout == "nan" and x["q"].is_floating_point():
        x["q"][0, 0, 0, 0] = float("nan")
    elif layout == "missing_beta":
        del x["beta"]
    torch.save([1, 2] if layout == "not_a_dict" else x, path)


@settings(max_examples=40, **SETTINGS)
@given(dtype=st.sampled_from(DTYPES), layout=st.sampled_from(LAYOUTS), as_json=st.booleans())
def test_inputs_files_of_every_dtype_and_layout(capsys, tmp_path, dtype, layout, as_json):
    import warnings
    from kda.cli.run import main
    path = tmp_path / "x.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")               # nested tensors are a prototype: torch says so
        _inputs_file(path, dtype, layout)
    code, _ = promise(capsys, main, ["--inputs", str(path), "--chunk-size", "16"] + (["--json"] if as_json else []))
    if layout not in ("dense", "noncontiguous") or dtype not in ("float32", "float64", "float16", "bfloat16"):
        assert code == 2, (dtype, layout)
