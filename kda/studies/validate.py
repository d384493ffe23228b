"""python -m kda.validate [--samples 50] [--fit [--fields a,b]] [--only IMPLEMENTATION] [--json]

Predicted against published Ascend measurements (kda/validation/measurements.csv; sources in
kda/validation/README.md): each row under the shipped profile, with the 90 % interval of the profile's assumed
ranges (Latin hypercube, npusim/uncertainty.py), and the error.

Then two fits, both on the rows not marked held out, both reported on the held-out rows apart:
- the affine diagnostic (always): per implementation, measured = floor + scale x predicted. A floor is
  time that does not grow with the shape (host dispatch, allocation, synchronisation: what a benchmark of a
  Python function times around the kernels); a scale other than 1 is per-token work the model misses or
  invents. Neither is a profile field: they say where the model is off, not what the chip is.
- `--fit`: the profile's assumed fields fitted within their ranges (npusim/fit.py), with one host floor per
  implementation solved in closed form at every step (npusim/floor.py), so the fields only have to explain
  how time grows with the shape.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from npusim import NpuSimError, load_profile
from npusim.fit.least_squares import fit
from npusim.chip.floor import FloorPredictors, floors
from npusim.fit.measurements import MeasurementError, read_measurements
from npusim.record.precision import itemsize
from npusim.fit.uncertainty import Influence, assumptions, rank_influences, sample_profiles, sample_values

from kda.kernels.registry import resolve

DATA = Path(str(resources.files("kda") / "validation" / "measurements.csv"))     # shipped in the package
YES, NO = ("yes", "true", "1"), ("no", "false", "0", "")


@dataclass
class Row:
    id: str
    implementation: str
    kernel: str
    shape: str
    dtype: str
    measured_us: float
    held_out: bool
    predicted_us: float = math.nan    # under the shipped profile
    p05: float = math.nan             # 90 % interval over the assumed ranges
    p50: float = math.nan
    p95: float = math.nan
    affine_us: float = math.nan       # floor + scale x predicted (the affine diagnostic)
    fitted_us: float = math.nan       # host floor + prediction under the fitted profile (--fit)

    @property
    def key(self) -> tuple:
        return self.kernel, self.shape, itemsize(self.dtype)

    @property
    def error(self) -> float:
        """(predicted - measured) / measured under the shipped profile."""
        return self.predicted_us / self.measured_us - 1

    @property
    def affine_error(self) -> float:
        return self.affine_us / self.measured_us - 1

    @property
    def fitted_error(self) -> float:
        return self.fitted_us / self.measured_us - 1

    @property
    def inside(self) -> bool:
        return self.p05 <= self.measured_us <= self.p95

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d.update(error=self.error, inside_interval=self.inside if not math.isnan(self.p05) else None,
                 affine_error=self.affine_error, fitted_error=self.fitted_error)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}


@dataclass
class Affine:
    """measured = floor_us + scale x predicted, weighted least squares (weights 1/measured: relative errors)."""
    implementation: str
    floor_us: float
    scale: float
    n: int

    def __call__(self, predicted_us: float) -> float:
        return self.floor_us + self.scale * predicted_us


def load(path: Path = DATA) -> tuple[list[Row], dict]:
    """The rows and their models (one model per distinct kernel, shape and element size)."""
    measured = read_measurements(path)
    lines = list(csv.reader(Path(path).read_text(encoding="utf-8-sig").splitlines()))
    header = [h.strip() for h in lines[0]]
    rows, models, ids = [], {}, set()
    for m in measured:
        cells = dict(zip(header, (c.strip() for c in lines[m.row - 1])))
        held = cells.get("held_out", "").lower()
        if held not in YES + NO:
            raise MeasurementError(f"{m.where()}: held_out {cells['held_out']!r} is not yes or no")
        row_id = cells.get("id") or f"row {m.row}"
        if row_id in ids:
            raise MeasurementError(f"{m.where()}: id {row_id!r} is used twice")
        ids.add(row_id)
        row = Row(row_id, cells.get("implementation", ""), m.kernel, m.shape, m.dtype, m.measured_us, held in YES)
        if row.key not in models:
            models[row.key] = resolve(m)
        rows.append(row)
    return rows, models


def affine(rows: list[Row]) -> dict[str, Affine]:
    """The affine diagnostic of each implementation, on its rows not held out (needs two distinct predictions)."""
    out = {}
    for impl in dict.fromkeys(r.implementation for r in rows):
        train = [r for r in rows if r.implementation == impl and not r.held_out]
        x = np.array([r.predicted_us for r in train])
        y = np.array([r.measured_us for r in train])
        if len(set(x.round(6))) < 2:
            continue
        w = 1 / y
        floor, scale = np.linalg.lstsq(np.c_[w, x * w], np.ones_like(y), rcond=None)[0]
        out[impl] = Affine(impl, float(floor), float(scale), len(train))
    return out


def host_floors(rows: list[Row], device: dict) -> dict[str, float]:
    """Per implementation, the host floor (npusim/floor.py) of `rows` given each row's predicted us
    (`device`: a row's key -> us)."""
    return floors([r.implementation for r in rows], [r.measured_us for r in rows], [device[r.key] for r in rows])


def validate(path: Path = DATA, profile_name: str = "ascend-910b2", samples: int = 50, seed: int = 0,
             refit: bool = False, only: str | None = None, fit_fields=None):
    """(rows, affine diagnostics, fit or None, floors under the fitted profile, influences on the largest row)."""
    profile = load_profile(profile_name)
    rows, models = load(path)
    if only is not None:
        rows = [r for r in rows if r.implementation == only]
        if not rows:
            raise MeasurementError(f"{path}: no row has implementation {only!r}")
    keys = list(dict.fromkeys(r.key for r in rows))
    nominal = {k: models[k].predict(profile) for k in keys}
    fields = assumptions(profile)
    chosen = fields
    if fit_fields:
        known = {f.field for f in fields}
        unknown = [f for f in fit_fields if f not in known]
        if unknown:
            raise NpuSimError(f"--fields: {unknown[0]!r} is not a ranged field of {profile.name} "
                              f"(ranged: {', '.join(sorted(known))})")
        chosen = [f for f in fields if f.field in fit_fields]
    spread = {k: [] for k in keys}
    influences: list[Influence] = []
    if samples:
        values = sample_values(fields, samples, seed)
        for p in sample_profiles(profile, fields, values):
            for k in keys:
                spread[k].append(models[k].predict(p))
        largest = max(rows, key=lambda r: nominal[r.key])
        influences = rank_influences(fields, values, spread[largest.key])
    for r in rows:
        r.predicted_us = nominal[r.key]
        if samples:
            r.p05, r.p50, r.p95 = (float(x) for x in np.percentile(spread[r.key], [5, 50, 95]))
    diag = affine(rows)
    for r in rows:
        if r.implementation in diag:
            r.affine_us = diag[r.implementation](r.predicted_us)
    result, floors = None, {}
    if refit:
        train = [r for r in rows if not r.held_out]
        if len(rows) - len(train) < 2:
            raise MeasurementError(f"{path}: --fit needs at least 2 rows marked held_out = yes, to test the fit on")
        fp = FloorPredictors([models[r.key] for r in train], [r.implementation for r in train],
                             [r.measured_us for r in train])
        result = fit(profile, chosen, fp.predictors(), [r.measured_us for r in train])
        device = {k: models[k].predict(result.profile) for k in keys}
        floors = host_floors(train, device)
        for r in rows:
            r.fitted_us = floors.get(r.implementation, 0.0) + device[r.key]
    return rows, diag, result, floors, influences


def summary(rows: list[Row], attr: str = "error") -> dict:
    """Mean and largest |error| (relative) over the rows, all and held out apart."""
    def stats(sel):
        errs = [abs(getattr(r, attr)) for r in sel if not math.isnan(getattr(r, attr))]
        return {"n": len(errs), "mean_abs": float(np.mean(errs)) if errs else None,
                "max_abs": float(np.max(errs)) if errs else None}
    return {"all": stats(rows), "fitted_on": stats([r for r in rows if not r.held_out]),
            "held_out": stats([r for r in rows if r.held_out])}


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0%}"


def lines(rows, diag, result, floors, influences) -> list[str]:
    """What the table of the rows (kda/views/render_validate.py) leaves out: the summaries, the affine
    diagnostic, the fit."""
    out = []
    s = summary(rows)
    out.append(f"shipped profile: mean |error| {_pct(s['all']['mean_abs'])} over {s['all']['n']} rows "
               f"(largest {_pct(s['all']['max_abs'])}); held out: {_pct(s['held_out']['mean_abs'])}"
               + (f"; {sum(r.inside for r in rows)} of {len(rows)} inside the 90 % interval"
                  if not math.isnan(rows[0].p05) else ""))
    if influences:
        out.append("what decides the spread of the largest row (Spearman rho^2): " +
                   ", ".join(f"{i.field} {i.share:.0%}" for i in influences[:4]))
    for impl, a in diag.items():
        sel = [r for r in rows if r.implementation == impl]
        s = summary(sel, "affine_error")
        out.append(f"affine diagnostic, {impl}: measured = {a.floor_us / 1000:.2f} ms + {a.scale:.2f} x predicted "
                   f"(fitted on {a.n} rows): mean |error| {_pct(s['fitted_on']['mean_abs'])} on them, "
                   f"{_pct(s['held_out']['mean_abs'])} on the {s['held_out']['n']} held out")
    if result:
        f = summary(rows, "fitted_error")
        out.append(f"--fit (fields within their ranges + a host floor per implementation; {result.rms_before:.0%} -> "
                   f"{result.rms_after:.0%} rms on the {f['fitted_on']['n']} rows fitted): mean |error| "
                   f"{_pct(f['fitted_on']['mean_abs'])} on them, {_pct(f['held_out']['mean_abs'])} on the "
                   f"{f['held_out']['n']} held out (largest {_pct(f['held_out']['max_abs'])})")
        out.append("  host floors: " + ", ".join(f"{k} {v / 1000:.2f} ms" for k, v in floors.items()))
        for ff in result.fields:
            out.append(f"  {ff.field}: " + (f"{ff.prior:g} -> {ff.value:.4g}" + (" (at a bound)" if ff.at_bound else "")
                                           if ff.determined else f"not determined ({ff.why})"))
    return out
