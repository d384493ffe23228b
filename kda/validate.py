"""python -m kda.validate [--samples 50] [--fit] [--json]

Predicted against published Ascend measurements (validation/measurements.csv; sources in
validation/README.md): each row under the shipped profile, with the 90 % interval of the profile's assumed
ranges (Latin hypercube, npusim/uncertainty.py), and the error. With `--fit`, the assumed fields are fitted
to the rows not marked held out (npusim/fit.py) and every row is predicted again; the held-out rows are
reported apart, as the test of the fit.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from npusim import NpuSimError, load_profile
from npusim.fit import Fit, fit
from npusim.measurements import read_measurements
from npusim.precision import itemsize
from npusim.uncertainty import assumptions, sample_profiles, sample_values

from .kernels import resolve

DATA = Path(__file__).resolve().parents[1] / "validation" / "measurements.csv"


@dataclass
class Row:
    id: str
    implementation: str
    kernel: str
    shape: str
    dtype: str
    measured_us: float
    held_out: bool
    predicted_us: float = math.nan
    p05: float = math.nan
    p50: float = math.nan
    p95: float = math.nan
    fitted_us: float = math.nan       # under the fitted profile (--fit)

    @property
    def error(self) -> float:
        """(predicted - measured) / measured under the shipped profile."""
        return self.predicted_us / self.measured_us - 1

    @property
    def fitted_error(self) -> float:
        return self.fitted_us / self.measured_us - 1

    @property
    def inside(self) -> bool:
        return self.p05 <= self.measured_us <= self.p95

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d.update(error=self.error, inside_interval=self.inside,
                 fitted_error=None if math.isnan(self.fitted_us) else self.fitted_error)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}


def load(path: Path = DATA):
    """The rows and their models (one model per distinct kernel, shape and element size)."""
    measured = read_measurements(path)
    extra = list(csv.DictReader(path.read_text(encoding="utf-8-sig").splitlines()))
    rows, models = [], {}
    for m, e in zip(measured, extra):
        key = (m.kernel, m.shape, itemsize(m.dtype))
        if key not in models:
            models[key] = resolve(m)
        rows.append(Row(e.get("id") or f"row {m.row}", e.get("implementation", ""), m.kernel, m.shape, m.dtype,
                        m.measured_us, (e.get("held_out", "").strip().lower() in ("yes", "true", "1"))))
    return rows, models


def validate(path: Path = DATA, profile_name: str = "ascend-910b2", samples: int = 50, seed: int = 0,
             refit: bool = False) -> tuple[list[Row], Fit | None]:
    profile = load_profile(profile_name)
    rows, models = load(path)
    keys = [(r.kernel, r.shape, itemsize(r.dtype)) for r in rows]
    nominal = {k: m.predict(profile) for k, m in models.items()}
    spread = {k: [] for k in models}
    fields = assumptions(profile)
    if samples:
        for p in sample_profiles(profile, fields, sample_values(fields, samples, seed)):
            for k, m in models.items():
                spread[k].append(m.predict(p))
    for r, k in zip(rows, keys):
        r.predicted_us = nominal[k]
        if samples:
            r.p05, r.p50, r.p95 = (float(x) for x in np.percentile(spread[k], [5, 50, 95]))
    result = None
    if refit:
        train = [(r, k) for r, k in zip(rows, keys) if not r.held_out]
        result = fit(profile, fields, [models[k].predict for _, k in train], [r.measured_us for r, _ in train])
        for r, k in zip(rows, keys):
            r.fitted_us = models[k].predict(result.profile)
    return rows, result


def summary(rows: list[Row], attr: str = "error") -> dict:
    """Mean and largest |error| (relative) over the rows, all and held out apart."""
    def stats(sel):
        errs = [abs(getattr(r, attr)) for r in sel if not math.isnan(getattr(r, attr))]
        return {"n": len(errs), "mean_abs": float(np.mean(errs)) if errs else None,
                "max_abs": float(np.max(errs)) if errs else None}
    return {"all": stats(rows), "fitted_on": stats([r for r in rows if not r.held_out]),
            "held_out": stats([r for r in rows if r.held_out])}


def lines(rows: list[Row], result: Fit | None) -> list[str]:
    out = [f"{'id':24} {'measured':>10} {'predicted':>10} {'error':>7}  {'90 % interval (assumed ranges)':>30} "
           f"{'in':>3}" + (f" {'fitted':>10} {'error':>7}" if result else "") + "  held out"]
    for r in rows:
        iv = f"[{r.p05 / 1000:.2f}, {r.p95 / 1000:.2f}] ms" if not math.isnan(r.p05) else "-"
        line = (f"{r.id:24} {r.measured_us / 1000:8.3f}ms {r.predicted_us / 1000:8.3f}ms {r.error:+7.0%}  {iv:>30} "
                f"{'yes' if r.inside else 'no':>3}")
        if result:
            line += f" {r.fitted_us / 1000:8.3f}ms {r.fitted_error:+7.0%}"
        out.append(line + ("  held out" if r.held_out else ""))
    s = summary(rows)
    out.append(f"shipped profile: mean |error| {s['all']['mean_abs']:.0%} over {s['all']['n']} rows "
               f"(largest {s['all']['max_abs']:.0%}); {sum(r.inside for r in rows)} of {len(rows)} inside the "
               f"90 % interval")
    if result:
        f = summary(rows, "fitted_error")
        out.append(f"fitted ({result.rms_before:.0%} -> {result.rms_after:.0%} rms on the {f['fitted_on']['n']} rows "
                   f"fitted): mean |error| {f['fitted_on']['mean_abs']:.0%} on them, {f['held_out']['mean_abs']:.0%} "
                   f"on the {f['held_out']['n']} held out (largest {f['held_out']['max_abs']:.0%})")
        for ff in result.fields:
            out.append(f"  {ff.field}: " + (f"{ff.prior:g} -> {ff.value:.4g}" + (" (at a bound)" if ff.at_bound else "")
                                           if ff.determined else f"not determined ({ff.why})"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kda.validate", description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DATA, help="measurements (default: validation/measurements.csv)")
    p.add_argument("--profile", default="ascend-910b2")
    p.add_argument("--samples", type=int, default=50, help="profiles sampled for the 90 %% interval (0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fit", action="store_true", help="also fit the assumed fields to the rows not held out")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.samples < 0 or args.samples == 1:
        print("error: --samples must be 0 or >= 2", file=sys.stderr)
        return 2
    try:
        rows, result = validate(args.data, args.profile, args.samples, args.seed, args.fit)
    except NpuSimError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"rows": [r.to_dict() for r in rows], "summary": summary(rows),
                          "fit": None if result is None else [f.to_dict() for f in result.fields]}, indent=2))
    else:
        print("\n".join(lines(rows, result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
