"""Held-out rows never touch a fit: the shipped profile's chip and host fits (benchmarks/calibrate_910b2.py)
and `kda.validate --fit`, each run for real on the shipped rows with every held-out row's measurement made
a thousand times larger. Were one let in, the fit would train on it: its rows would hold the absurd time
and its residuals would be out by a factor of a thousand. The rows a fit may use are picked here from the
shapes (L and H), as the profile's sources state them, not from the `held_out` column the code reads."""
from __future__ import annotations

import csv
import functools
import importlib.util
import math
from pathlib import Path

import pytest

from kda.studies import validate as validate_mod
from npusim import load_profile
from npusim.fit import least_squares

ROOT = Path(__file__).resolve().parents[2]
MEGAGDN = ROOT / "kda" / "validation" / "megagdn.csv"
MEASUREMENTS = ROOT / "kda" / "validation" / "measurements.csv"


def _calibrate_910b2():
    spec = importlib.util.spec_from_file_location("calibrate_910b2", ROOT / "benchmarks" / "calibrate_910b2.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _poisoned(src: Path, dst: Path) -> Path:
    """A copy of `src` whose held-out rows measure 1000 times longer."""
    with open(src, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if r["held_out"] == "yes":
            r["measured_us"] = str(float(r["measured_us"]) * 1000)
    with open(dst, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return dst


def _dims(shape: str) -> dict:
    return dict(item.split("=") for item in shape.split(";"))


def _spy(monkeypatch, module, name: str, seen: list, **fixed):
    """Replace module.name by a wrapper that records the measured times it is given and calls the real one."""
    real = getattr(module, name)

    @functools.wraps(real)
    def spy(*args, **kwargs):
        seen.append(sorted(float(x) for x in (kwargs.get("measured") if "measured" in kwargs else args[3])))
        return real(*args, **{**kwargs, **fixed})
    monkeypatch.setattr(module, name, spy)


def test_the_chip_fit_trains_on_the_30_stage_rows_at_l_4096_and_8192_only(tmp_path, monkeypatch):
    cal = _calibrate_910b2()
    with open(MEGAGDN, encoding="utf-8") as f:
        want = sorted(float(r["measured_us"]) for r in csv.DictReader(f) if r["kernel"] == "gdn_pto"
                      and _dims(r["shape"])["T"] in ("4096", "8192") and _dims(r["shape"])["H"] in ("16", "32", "64"))
    assert len(want) == 30                  # as the profile's FITTED sources say
    monkeypatch.setattr(cal, "DATA", _poisoned(MEGAGDN, tmp_path / "megagdn.csv"))
    shipped = load_profile("ascend-910b2")
    grid, fits, results = [], [], []

    def grid_start(base, priors, models, measured, points=4):       # the grid's choice: not re-run here
        grid.append(sorted(measured))
        return {k: shipped.value(k) for k in priors}
    monkeypatch.setattr(cal, "grid_start", grid_start)
    real_fit = least_squares.fit

    def fit(base, fields, predictors, measured, max_iter=40, many=None):
        fits.append(sorted(measured))
        results.append(real_fit(base, fields, predictors, measured, max_iter=2, many=many))   # the real fit, briefly
        return results[-1]
    monkeypatch.setattr(cal, "fit", fit)
    cal.fit_chip(False)
    assert grid == [want] and fits == [want]
    assert results[0].rms_after < 0.2               # 0.13 on these rows: no row off by a factor of 1000


def _with_held_out_partners(path: Path) -> Path:
    """`path` with a held-out L = 4096 row beside each held-out Triton row at L = 8192 (the same kernel, stage
    and H, measured as poisoned): held-out pairs of the kind the host fit takes, were it to let them in."""
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    partners = [{**r, "id": r["id"] + "-partner", "shape": r["shape"].replace("T=8192", "T=4096")} for r in rows
                if r["kernel"].startswith("gdn_triton") and r["held_out"] == "yes" and ";T=8192;" in r["shape"]]
    assert partners
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows + partners)
    return path


def test_the_host_fit_trains_on_the_triton_rows_not_held_out(tmp_path, monkeypatch):
    cal = _calibrate_910b2()
    monkeypatch.setattr(cal, "DATA", _with_held_out_partners(_poisoned(MEGAGDN, tmp_path / "megagdn.csv")))
    fits = []
    _spy(monkeypatch, cal, "fit", fits)
    cal.fit_host(False)
    with open(MEGAGDN, encoding="utf-8") as f:
        triton = [r for r in csv.DictReader(f) if r["kernel"].startswith("gdn_triton") and r["held_out"] == "no"]
    times = {r["id"]: float(r["measured_us"]) for r in triton}
    # every pair is (L = 4096, L = 8192) of one kernel, stage and H, both not held out: 2 m(4096) - m(8192);
    # a field the rows cannot determine is kept and the others fitted again, on the same rows
    assert fits and all(f == fits[0] for f in fits) and len(fits[0]) == 16
    allowed = {round(2 * a - b, 6) for a in times.values() for b in times.values()}
    assert all(round(x, 6) in allowed for x in fits[0])
    assert max(fits[0]) < 5000                       # a held-out row would put a million-us figure here


def test_validate_fit_trains_on_rows_not_held_out(tmp_path, monkeypatch):
    data = _poisoned(MEASUREMENTS, tmp_path / "m.csv")
    with open(MEASUREMENTS, encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["implementation"] == "vllm-ascend"]
    want = sorted(float(r["measured_us"]) for r in rows if r["held_out"] == "no")
    assert len(want) == 10 and len(rows) == 12
    fits = []
    _spy(monkeypatch, validate_mod, "fit", fits)
    out, _, result, floors, _ = validate_mod.validate([data], samples=0, refit=True, only="vllm-ascend",
                                                      fit_fields=["sync.latency_us"])
    assert fits == [want]
    # the host floor is solved on the rows fitted on: every one of them within a factor of two
    assert all(math.isfinite(v) for v in floors.values())
    assert all(abs(r.fitted_error) < 1 for r in out if not r.held_out)


@pytest.mark.parametrize("held, train, message", [(0, 5, "at least 2 rows marked held_out"),
                                                  (1, 5, "at least 2 rows marked held_out"),
                                                  (4, 0, "at least 2 rows not held out")])
def test_validate_fit_needs_rows_on_both_sides(tmp_path, capsys, held, train, message):
    lines = MEASUREMENTS.read_text(encoding="utf-8").splitlines()
    body = [x for x in lines[1:] if x.endswith(",no")][:train] + [x for x in lines[1:] if x.endswith(",yes")][:held]
    path = tmp_path / "few.csv"
    path.write_text("\n".join([lines[0], *body]) + "\n", encoding="utf-8")
    from kda.cli.validate import main
    assert main(["--data", str(path), "--samples", "0", "--fit"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_the_affine_diagnostic_fits_only_the_rows_not_held_out():
    """Three rows on measured = 10 + 2 x predicted, and a held-out row far off it: the diagnostic's floor and
    scale are the line's (solved by hand: any two of the three rows give it), from three rows."""
    def row(i, predicted, measured, held):
        r = validate_mod.Row(id=f"r{i}", implementation="impl", kernel="k", shape=f"T={i}", dtype="bf16",
                             measured_us=measured, held_out=held)
        r.predicted_us = predicted
        return r
    rows = [row(0, 5.0, 20.0, False), row(1, 20.0, 50.0, False), row(2, 45.0, 100.0, False),
            row(3, 30.0, 7000.0, True)]
    fit = validate_mod.affine(rows)["impl"]
    assert fit.n == 3
    assert fit.floor_us == pytest.approx(10.0, rel=1e-9) and fit.scale == pytest.approx(2.0, rel=1e-9)
