"""kda.validate's data and report: the shipped MegaGDN-PTO rows against their quoted JSON figures and the held-out
rule, the loader and the per-implementation, per-stage report on a tiny CSV whose errors are worked out by hand
(a fake resolver stands in for the kernel models), the plot, and bad --data files."""
import csv
import fnmatch
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

import kda.studies.validate as study
from kda.cli.validate import main
from kda.studies.validate import DATA, KDA, MEGAGDN, SHIPPED, STAGES, load, validate
from npusim import load_profile
from npusim.fit.measurements import MeasurementError, read_measurements

BASE = load_profile("ascend-910b2")
ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------------------------
# the shipped MegaGDN-PTO rows

SUFFIX = {"pto": ("gdn_pto", "128", "fp16", "megagdn-pto"), "triton64": ("gdn_triton64", "64", "bf16",
          "vllm-ascend-triton"), "triton128": ("gdn_triton128", "128", "bf16", "vllm-ascend-triton")}


def _megagdn():
    return list(csv.DictReader(MEGAGDN.open()))


def test_megagdn_rows_are_their_quoted_json_figures():
    """Each row quotes its JSON file, head count, key and value; the row's kernel, stage, chunk, dtype,
    implementation and time follow from the key (ms -> us), and T and H from the file and head count."""
    rows = _megagdn()
    assert list(rows[0]) == ["id", "kernel", "stage", "shape", "dtype", "measured_us", "implementation", "timed",
                             "quoted", "held_out"]
    for r in rows:
        L, H, key, value = re.fullmatch(r"kernel_bench_L(\d+)\.json H=(\d+): (\w+) = ([\d.e-]+)", r["quoted"]).groups()
        if key == "mega_ms":
            kernel, C, dtype, impl, stage = "gdn_pto_fused", "128", "fp16", "megagdn-pto-fused", ""
        else:
            stage, tag = re.fullmatch(r"(\w+?)_(pto|triton64|triton128)_ms", key).groups()
            kernel, C, dtype, impl = SUFFIX[tag]
        assert (r["kernel"], r["stage"], r["dtype"], r["implementation"]) == (kernel, stage, dtype, impl), r["id"]
        assert r["shape"] == f"B=16;T={L};H={H};Hg=16;K=128;V=128;C={C}"
        assert float(r["measured_us"]) == pytest.approx(float(value) * 1000, abs=5e-4)
        assert r["timed"]
    assert len({r["id"] for r in rows}) == len(rows)


def test_megagdn_row_counts_follow_from_the_nulls_the_notes_list():
    """10 (L, H) runs (L4096: H 16, 32; L8192 and L16384: H 16, 32, 48, 64), 6 stages each for PTO, Triton 64 and
    Triton 128, and one mega. Nulls: Triton 128 kkt, solve_tril, chunk_o always (30); Triton 128 cumsum at
    H >= 32 (7 runs); Triton 64 solve_tril at L8192 H >= 32 and all of L16384 (3 + 4); Triton 64 chunk_h and
    chunk_o at H = 64 (2 runs x 2)."""
    count = {}
    for r in _megagdn():
        count[r["kernel"]] = count.get(r["kernel"], 0) + 1
    assert count == {"gdn_pto": 60, "gdn_pto_fused": 10, "gdn_triton64": 60 - 7 - 4, "gdn_triton128": 60 - 30 - 7}
    assert {r["stage"] for r in _megagdn()} == set(STAGES) | {""}


def test_held_out_rule_recomputed_from_each_rows_shape():
    """Held out: every row with L = 16384 and every row with H = 48; the others are not."""
    held = 0
    for r in _megagdn():
        shape = dict(item.split("=") for item in r["shape"].split(";"))
        want = shape["T"] == "16384" or shape["H"] == "48"
        assert r["held_out"] == ("yes" if want else "no"), r["id"]
        held += want
    # L16384: 24 PTO + 4 mega + 18 Triton 64 + 9 Triton 128; L8192 H48: 6 PTO + 1 mega + 5 Triton 64 + 2 Triton 128
    assert held == 55 + 14


def test_the_reader_gives_each_row_its_stage_and_old_files_none():
    stages = [m.stage for m in read_measurements(MEGAGDN)]
    assert stages[:7] == ["cumsum", "kkt", "solve_tril", "wy_fast", "chunk_h", "chunk_o", "cumsum"]
    assert {m.stage for m in read_measurements(DATA)} == {""}


def test_every_shipped_file_is_package_data():
    """The wheel takes kda/validation/ files by pyproject's package-data globs: every .csv and .md there (and in
    predictions/) matches."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["kda"]
    shipped = [p.relative_to(ROOT / "kda").as_posix() for p in (ROOT / "kda" / "validation").rglob("*")
               if p.is_file()]
    assert {"validation/measurements.csv", "validation/megagdn.csv", "validation/README.md"} <= set(shipped)
    for name in shipped:
        assert any(fnmatch.fnmatch(name, g) for g in globs), name
    assert set(SHIPPED) == {DATA, MEGAGDN} | ({KDA} if KDA.is_file() else set())


# ---------------------------------------------------------------------------------------------------------------
# a tiny CSV, a fake resolver: predicted = the number below x (sync latency / its shipped value)

@dataclass(frozen=True)
class Fake:
    us: float

    def predict(self, profile):
        return self.us * profile.value("sync.latency_us") / BASE.value("sync.latency_us")

    def predict_many(self, profiles):             # kda.validate times a kernel's samples at once
        return [self.predict(p) for p in profiles]


TINY = """id,kernel,stage,shape,dtype,measured_us,implementation,timed,quoted,held_out
a3,kx,chunk_h,S1,fp16,400,impA,t,q,no
a1,kx,kkt,S1,fp16,100,impA,t,q,no
a2,kx,kkt,S2,fp16,200,impA,t,q,no
a4,kx,kkt,S3,fp16,300,impA,t,q,yes
a5,kx,chunk_h,S3,fp16,1000,impA,t,q,yes
b1,ky,,S1,bf16,50,impB,t,q,no
b2,ky,,S2,bf16,80,impB,t,q,yes
"""
PREDICTED = {("kx", "chunk_h", "S1"): 460, ("kx", "kkt", "S1"): 110, ("kx", "kkt", "S2"): 150,
             ("kx", "kkt", "S3"): 330, ("kx", "chunk_h", "S3"): 400, ("ky", "", "S1"): 100, ("ky", "", "S2"): 60}


def _fake(m):
    try:
        return Fake(PREDICTED[m.kernel, m.stage, m.shape])
    except KeyError:
        raise MeasurementError(f"{m.where()}: no fake model") from None


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    monkeypatch.setattr(study, "resolve", _fake)
    path = tmp_path / "tiny.csv"
    path.write_text(TINY)
    return path


def test_errors_and_summaries_per_implementation_and_stage_by_hand(tiny, capsys):
    """impA fitted on: errors +10 %, -25 %, +15 % -> median 15 %, max 25 %; held out +10 %, -60 % -> median
    35 %, max 60 %. Per stage: kkt fitted on 10 % and 25 % (median 17.5 %), held out 10 %; chunk_h 15 % and
    60 %. impB: +100 % fitted on, -25 % held out."""
    assert main(["--data", str(tiny), "--samples", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    err = {r["id"]: r["error"] for r in out["rows"]}
    assert err == pytest.approx({"a3": 0.15, "a1": 0.10, "a2": -0.25, "a4": 0.10, "a5": -0.60, "b1": 1.0,
                                 "b2": -0.25})
    a, b = out["by_implementation"]["impA"], out["by_implementation"]["impB"]
    assert (a["fitted_on"]["median_abs"], a["fitted_on"]["max_abs"], a["fitted_on"]["n"]) == pytest.approx(
        (0.15, 0.25, 3))
    assert (a["held_out"]["median_abs"], a["held_out"]["max_abs"], a["held_out"]["n"]) == pytest.approx((0.35, 0.60, 2))
    assert list(a["stages"]) == ["kkt", "chunk_h"]                       # the forward's order, not the file's
    assert a["stages"]["kkt"]["fitted_on"]["median_abs"] == pytest.approx(0.175)
    assert a["stages"]["kkt"]["held_out"]["max_abs"] == pytest.approx(0.10)
    assert a["stages"]["chunk_h"]["held_out"]["median_abs"] == pytest.approx(0.60)
    assert b["fitted_on"]["median_abs"] == pytest.approx(1.0) and b["held_out"]["median_abs"] == pytest.approx(0.25)
    assert list(b["stages"]) == [""]
    assert {r["id"]: r["stage"] for r in out["rows"]}["b1"] == ""


def test_the_table_puts_held_out_rows_apart_and_stages_in_order(tiny, capsys):
    assert main(["--data", str(tiny), "--samples", "0"]) == 0
    text = capsys.readouterr().out
    fitted_a, held_a = text.index("impA: rows fitted on, 3 rows"), text.index("impA: held out")
    fitted_b, held_b = text.index("impB: rows fitted on, 1 rows"), text.index("impB: held out")
    assert fitted_a < fitted_b < held_a < held_b
    fitted_table = text[fitted_a:fitted_b]
    assert fitted_table.index("kkt") < fitted_table.index("chunk_h")       # kkt before chunk_h, as the forward
    assert "-60%" in text[held_a:held_b] and "-60%" not in text[:held_a]
    line = next(x for x in text.splitlines() if x.startswith("impA:") and "median" in x)
    assert "median |error| 15%, max 25% on the 3 rows fitted on" in line
    assert "median |error| 35%, max 60% on the 2 held out" in line


def test_the_interval_samples_the_ranges(tiny):
    """The fake scales with sync latency, so the interval is the prediction times the sampled sync range."""
    rows, *_ = validate(tiny, samples=20, seed=0)
    lo, hi = BASE.ranges["sync.latency_us"]
    nominal = BASE.value("sync.latency_us")
    for r in rows:
        assert r.predicted_us * lo / nominal <= r.p05 <= r.p50 <= r.p95 <= r.predicted_us * hi / nominal
        assert r.p05 < r.p95


def test_default_reads_the_three_shipped_files(monkeypatch, capsys):
    """24 whole forwards, 142 MegaGDN rows, and of kda.csv's 45 rows the five A2 rows of ChunkKdaFwd and the
    eight builds of pull request 244's kernel timed with msprof (the other 32 are reported, not predicted);
    every KDA row held out."""
    monkeypatch.setattr(study, "resolve", lambda m: Fake(1000.0))
    assert main(["--samples", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["files"] == [str(DATA), str(MEGAGDN), str(KDA)]
    assert len(out["rows"]) == 24 + 142 + 5 + 8
    assert len(out["reported"]) == 31 + 1
    assert out["summary"]["held_out"]["n"] == 4 + 69 + 5 + 8
    assert set(out["by_implementation"]) == {"flaggems", "vllm-ascend", "megagdn-pto", "vllm-ascend-triton",
                                             "megagdn-pto-fused", "flash-linear-attention-npu",
                                             "flash-linear-attention-npu-pr244"}


def test_plot_writes_a_png_and_a_bad_name_fails_before_any_work(tiny, tmp_path, capsys, monkeypatch):
    out = tmp_path / "fidelity.png"
    assert main(["--data", str(tiny), "--samples", "4", "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    monkeypatch.setattr(study, "resolve", lambda m: pytest.fail("validated before checking --plot"))
    assert main(["--data", str(tiny), "--plot", str(tmp_path / "fidelity.txt")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--plot" in err and "must end in .png" in err and len(err.splitlines()) == 1


# ---------------------------------------------------------------------------------------------------------------
# bad --data files: one line naming the file and row, exit 2 (the real kernel models)

GOOD = "id,kernel,stage,shape,dtype,measured_us,implementation,held_out\n"


@pytest.mark.parametrize("text, message", [
    (None, "no such file"),
    ("id,kernel,stage,shape,dtype,implementation\n", "missing column 'measured_us'"),
    (GOOD + "x,gdn_fla,,1x128x4x64x64,bf16,1O0,me,no\n", "row 2: measured_us '1O0' is not a number"),
    (GOOD + "x,gdn_fla,,1x128x4x64x64,bf16,100,me,no\n"
            "y,gdn_fla,,1x128x4x64x64,bf16\n", "row 3: 5 fields, the header has 8"),
    (GOOD + "x,gdn_nope,kkt,B=16;T=4096;H=16;Hg=16;K=128;V=128;C=128,fp16,100,me,no\n",
     "row 2: unknown kernel 'gdn_nope'"),
    (GOOD + "x,gdn_fla,,1x128x4x64x64,bf16,100,me,no\n"
            "y,gdn_fla,,B=16;T=many;H=16;K=128;V=128,bf16,100,me,no\n", "row 3: shape 'B=16;T=many;H=16;K=128;V=128'"),
    (GOOD + "x,gdn_fla,,1x128x4x64x64,bf16,100,me,perhaps\n", "row 2: held_out 'perhaps' is not yes or no"),
])
def test_bad_data_file_is_one_line_naming_file_and_row(tmp_path, capsys, text, message):
    path = tmp_path / "mine.csv"
    if text is not None:
        path.write_text(text)
    assert main(["--data", str(path), "--samples", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and str(path) in err and len(err.splitlines()) == 1


def test_an_id_used_in_two_files_names_both(tmp_path, capsys):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(GOOD + "x,gdn_fla,,1x128x4x64x64,bf16,100,me,no\n")
    b.write_text(GOOD + "w,gdn_fla,,1x128x4x64x64,bf16,100,me,no\nx,gdn_fla,,1x128x4x64x64,bf16,90,me,no\n")
    assert main(["--data", str(a), "--data", str(b), "--samples", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{b} row 3: id 'x' is used twice (first at {a} row 2)" in err and len(err.splitlines()) == 1
    rows, _ = load([a])                                # each file alone is fine
    assert [r.id for r in rows] == ["x"] and rows[0].source == str(a)


def test_a_tables_title_holds_the_shape_fields_its_rows_share():
    from kda.studies.validate import Row
    from kda.views.render_validate import split_shapes
    rows = [Row("a", "i", "k", s, "fp16", 1.0, False) for s in
            ("B=16;T=4096;H=16;Hg=16;C=128", "B=16;T=8192;H=16;Hg=16;C=64", "B=16;T=8192;H=16;Hg=16;C=128")]
    assert split_shapes(rows) == ("B=16 H=16 Hg=16", ["T=4096 C=128", "T=8192 C=64", "T=8192 C=128"])
    mixed = rows[:1] + [Row("b", "i", "k", "1x128x4x64x64", "fp16", 1.0, False)]
    assert split_shapes(mixed) == ("", ["B=16;T=4096;H=16;Hg=16;C=128", "1x128x4x64x64"])
