"""kda.studies.validate: the published measurements as written, the affine diagnostic and the host floor against
hand-made data, the fit with a floor on data the simulator made from a known profile, bad input."""
import csv
import json
import re

import pytest

from kda.kernels.registry import model
from kda.cli.validate import main
from kda.studies.validate import DATA, Row, affine, host_floors, load, validate
from npusim import load_profile

BASE = load_profile("ascend-910b2")


def test_the_published_rows_match_their_quoted_figures_and_shapes():
    """Every row's time is its quoted figure (ms -> us), T sums to the quoted seq_len, B=1, H=32, K=V=128,
    and at least two rows are held out of every fit."""
    rows = list(csv.DictReader(DATA.open()))
    assert len(rows) == 24
    for r in rows:
        seq_len, ms = re.fullmatch(r"seq_len (\d+): (?:bf16|fp16) (?:Gems|Torch) ([\d.]+) ms", r["quoted"]).groups()
        assert float(r["measured_us"]) == pytest.approx(float(ms) * 1000, abs=0.5), r["id"]
        b, t, h, k, v = r["shape"].split("x")
        assert (b, h, k, v) == ("1", "32", "128", "128") and sum(map(int, t.split("+"))) == int(seq_len)
        assert r["dtype"] in r["quoted"] and r["implementation"] in ("flaggems", "vllm-ascend")
    assert sum(r["held_out"] == "yes" for r in rows) >= 2
    loaded, models = load(DATA)
    assert len(loaded) == 24 and len(models) == 6          # six shapes, bf16 and fp16 share one model


def _rows(points, impl="a", held=()):
    return [Row(f"r{i}", impl, "k", "s", "bf16", m, i in held, predicted_us=p) for i, (p, m) in enumerate(points)]


def test_affine_diagnostic_recovers_a_hand_made_floor_and_scale_and_ignores_held_out_rows():
    # measured = 500 + 1.5 x predicted exactly; a held-out row far off the line must not move it
    rows = _rows([(100, 650), (1000, 2000), (4000, 6500), (300, 99999)], held=(3,))
    a = affine(rows)["a"]
    assert a.floor_us == pytest.approx(500, rel=1e-9) and a.scale == pytest.approx(1.5, rel=1e-9) and a.n == 3
    assert a(2000) == pytest.approx(3500)
    assert affine(_rows([(100, 200), (100, 300)])) == {}       # one distinct prediction: no line


def test_host_floor_is_the_relative_least_squares_gap_and_never_negative():
    rows = _rows([(100, 400), (1000, 1300)]) + _rows([(100, 50), (200, 150)], impl="b")
    for r in rows:
        r.shape = r.id + r.implementation                # one model per row
    floors = host_floors(rows, {r.key: r.predicted_us for r in rows})
    assert floors["a"] == pytest.approx(300)      # both rows sit exactly 300 us above the prediction
    assert floors["b"] == 0.0                     # measured below predicted: no negative host time
    # weights 1/measured^2: gaps 100 (measured 200) and 400 (measured 1000)
    mixed = _rows([(100, 200), (600, 1000)], impl="c")
    for r in mixed:
        r.shape = r.id
    want = (100 / 200 ** 2 + 400 / 1000 ** 2) / (1 / 200 ** 2 + 1 / 1000 ** 2)
    assert host_floors(mixed, {r.key: r.predicted_us for r in mixed})["c"] == pytest.approx(want)


SYNC = 2 * BASE.value("sync.latency_us")     # the truth of the synthetic rows: twice the shipped sync latency
SHAPES = ["1x128x4x64x64", "1x1024x4x64x64", "1x64+448x8x64x64", "1x2048x2x64x64", "1x512x4x64x64"]


def _synthetic(tmp_path, sync_us=SYNC, floor_us=400.0, held=(3, 4)):
    truth = BASE.replace(sync__latency_us=sync_us)
    lines = ["id,kernel,shape,dtype,measured_us,implementation,held_out"]
    for i, s in enumerate(SHAPES):
        t = floor_us + model("gdn_fla", s, "bf16").predict(truth)
        lines.append(f"p{i},gdn_fla,{s},bf16,{t:.4f},bench,{'yes' if i in held else 'no'}")
    path = tmp_path / "m.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_fit_with_a_host_floor_recovers_the_field_and_the_floor_and_predicts_the_held_out_rows(tmp_path):
    """Made by the simulator under twice the shipped sync latency (inside its range) plus a 400 us host floor; the fit of sync latency
    alone (the floor solved at every step) finds both to 1 %, and the two held-out rows within 1 %."""
    path = _synthetic(tmp_path)
    rows, diag, result, floors, _ = validate(path, samples=0, refit=True, fit_fields=["sync.latency_us"])
    (f,) = result.fields
    assert BASE.ranges["sync.latency_us"][0] < SYNC < BASE.ranges["sync.latency_us"][1]
    assert f.determined and f.value == pytest.approx(SYNC, rel=0.01)
    assert floors["bench"] == pytest.approx(400, rel=0.01)
    assert all(abs(r.fitted_error) < 0.01 for r in rows)
    assert [r.id for r in rows if r.held_out] == ["p3", "p4"]
    # under the shipped profile the model is too fast on every row: no floor, a lower sync latency
    assert all(r.error < 0 for r in rows)


def test_cli_table_json_and_interval(tmp_path, capsys):
    path = _synthetic(tmp_path)
    assert main(["--data", str(path), "--samples", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in out["rows"]] == [f"p{i}" for i in range(5)]
    for r, s in zip(out["rows"], SHAPES):
        pred = model("gdn_fla", s, "bf16").predict(BASE)
        assert r["predicted_us"] == pytest.approx(pred) and r["error"] == pytest.approx(pred / r["measured_us"] - 1)
        assert r["p05"] <= r["p50"] <= r["p95"]
        assert r["inside_interval"] == (r["p05"] <= r["measured_us"] <= r["p95"])
    assert out["summary"]["held_out"]["n"] == 2 and out["fit"] is None
    assert {i["field"] for i in out["influence"]} == set(BASE.ranges)
    assert main(["--data", str(path), "--samples", "0"]) == 0
    text = capsys.readouterr().out
    assert "affine diagnostic" in text and "bench: held out" in text and "bench: rows fitted on" in text


@pytest.mark.parametrize("edit, args, message", [
    (lambda t: t.replace(",yes\n", ",maybe\n", 1), [], "row 5: held_out 'maybe' is not yes or no"),
    (lambda t: t.replace("p1,", "p0,"), [], "row 3: id 'p0' is used twice"),
    (lambda t: t.replace(",yes", ",no"), ["--fit"], "--fit needs at least 2 rows marked held_out = yes"),
    (lambda t: t, ["--fit", "--fields", "sync.nope"], "--fields: 'sync.nope' is not a ranged field"),
    (lambda t: t, ["--only", "nobody"], "no row has implementation 'nobody'"),
    (lambda t: t, ["--samples", "1"], "--samples must be 0 or >= 2"),
    (lambda t: t.replace("gdn_fla", "gdn_nope", 1), [], "row 2: unknown kernel 'gdn_nope'"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, edit, args, message):
    path = _synthetic(tmp_path)
    path.write_text(edit(path.read_text()))
    assert main(["--data", str(path), "--samples", "0", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_worker_processes_give_the_same_numbers(tmp_path, capsys):
    path = _synthetic(tmp_path)
    outs = []
    for jobs in ("1", "2"):
        assert main(["--data", str(path), "--samples", "3", "--json", "--jobs", jobs]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0] == outs[1]
    assert main(["--data", str(path), "--jobs", "0"]) == 2
    assert "--jobs must be >= 1" in capsys.readouterr().err


def test_calibrate_fits_the_same_with_the_kernels_timed_in_batches(tmp_path, monkeypatch):
    """npusim.calibrate's Jacobian times each kernel under its points at once (predict_many); the fit is the
    one the kernels timed one profile at a time give."""
    from npusim import load_profile
    from npusim.fit import calibrate as cal
    from npusim.fit import least_squares
    data = tmp_path / "rows.csv"
    data.write_text("kernel,shape,dtype,measured_us\nkda_v3,1x64x1x16x16,bf16,30\nkda_v3,1x128x1x16x16,bf16,50\n"
                    "kda_v3,1x256x1x16x16,bf16,90\nkda_v3,1x512x2x16x16,bf16,170\n", encoding="utf-8")
    profile = load_profile("ascend-910b2")
    fields = ["sync.latency_us", "isa.gm_burst_cycles"]
    batched, _, _ = cal.calibrate(data, profile, fields=fields)
    real_fit = least_squares.fit
    monkeypatch.setattr(cal, "fit", lambda *a, many=None, **k: real_fit(*a, **k))   # one profile at a time
    alone, _, _ = cal.calibrate(data, profile, fields=fields)
    assert [f.field for f in batched.fields] == [f.field for f in alone.fields]
    for b, a in zip(batched.fields, alone.fields):
        assert b.value == pytest.approx(a.value, rel=1e-9) and b.determined == a.determined
    assert list(batched.after) == pytest.approx(list(alone.after), rel=1e-9)
