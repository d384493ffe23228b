"""python -m kda.validate [--data FILE ...] [--samples 50] [--fit [--fields a,b]] [--only IMPLEMENTATION] [--json]
[--plot OUT.png]

Predicted against measured Ascend timings: by default the two shipped files (kda/validation/measurements.csv,
whole forwards of FlagGems-vllm and vllm-ascend; kda/validation/megagdn.csv, MegaGDN-PTO's stage kernels,
its fused kernel and vllm-ascend's Triton stages; sources in kda/validation/README.md), or a user's own CSV in
the same format (`--data`, msprof op summaries too). Each row under the shipped profile, with the 90 %
interval of the profile's assumed ranges (Latin hypercube, npusim/fit/uncertainty.py), and the error; rows
are grouped by implementation and stage, the held-out ones (never seen by any fit) apart.

Then two fits, both on the rows not marked held out, both reported on the held-out rows apart:
- the affine diagnostic (always): per group (an implementation's whole kernels, or one stage of one of its
  kernels: Row.group), measured = floor + scale x predicted. A floor is time that does not grow with the
  shape (host dispatch, allocation, synchronisation: what a benchmark of a Python function times around the
  kernels); a scale other than 1 is per-token work the model misses or invents. Neither is a profile field:
  they say where the model is off, not what the chip is.
- `--fit`: the profile's assumed fields fitted within their ranges (npusim/fit/least_squares.py), with one
  host floor per group solved in closed form at every step (npusim/chip/floor.py), so the fields only have
  to explain how time grows with the shape.

A measured KDA kernel's rows (kda/validation/kda.csv) are held out by rule: a file that marks one of them
held_out = no is refused. A row whose `not_modelled` cell says why (a chip without a profile, an earlier
kernel version, a path the model does not read) is data reported as it is, never predicted (`reported`). Rows with a prediction registered before their measured value (kda/studies/
predictions.py) carry it (Row.registration): the figure as registered, its commit, and whether it moved.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

from npusim import NpuSimError, load_profile
from npusim.chip.floor import FloorPredictors, floors
from npusim.fit.least_squares import fit, typical_evaluations
from npusim.fit.measurements import MeasurementError, read_measurements
from npusim.fit.op_map import OpEntry
from npusim.fit.uncertainty import Influence, assumptions, rank_influences, sample_profiles, sample_values
from npusim.record.precision import itemsize

from kda.kernels.registry import check_models, resolve
from kda.kernels.registry import held_out as kda_kernel
from kda.studies import predictions as registry_of_predictions

_SHIPPED = resources.files("kda") / "validation"                                   # package data
DATA = Path(str(_SHIPPED / "measurements.csv"))      # FlagGems-vllm and vllm-ascend: whole forwards
MEGAGDN = Path(str(_SHIPPED / "megagdn.csv"))        # MegaGDN-PTO: stage kernels, fused kernel, Triton stages
KDA = Path(str(_SHIPPED / "kda.csv"))                # measured KDA kernels (all held out)
SHIPPED = tuple(p for p in (DATA, MEGAGDN, KDA) if p.is_file())
STAGES = ("cumsum", "kkt", "solve_tril", "wy_fast", "chunk_h", "chunk_o")     # the forward's order
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
    stage: str = ""                   # the stage timed alone, "" for a whole kernel
    source: str = ""                  # the file
    predicted_us: float = math.nan    # under the shipped profile
    p05: float = math.nan             # 90 % interval over the assumed ranges
    p50: float = math.nan
    p95: float = math.nan
    affine_us: float = math.nan       # floor + scale x predicted (the affine diagnostic)
    fitted_us: float = math.nan       # host floor + prediction under the fitted profile (--fit)
    line: int = 0                     # the row's line in its file (the header is line 1)
    registration: object = None       # its prediction registered before the measured value (predictions.py)

    @property
    def key(self) -> tuple:
        return self.kernel, self.stage, self.shape, itemsize(self.dtype)

    @property
    def group(self) -> str:
        """The rows that share a floor (affine diagnostic, --fit's host floors): one implementation's whole
        kernels, or one stage of one of its kernels, e.g. 'vllm-ascend-triton/kkt (gdn_triton64)'."""
        return f"{self.implementation}/{self.stage} ({self.kernel})" if self.stage else self.implementation

    @property
    def error(self) -> float:
        """(predicted - measured) / measured under the shipped profile."""
        return self.predicted_us / self.measured_us - 1

    @property
    def registered_error(self) -> float:
        """(registered - measured) / measured: the prediction as registered before the measured value."""
        reg = self.registration
        return reg.registered_us / self.measured_us - 1 if reg is not None else math.nan

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
                 affine_error=self.affine_error, fitted_error=self.fitted_error,
                 registration=None if self.registration is None else self.registration.to_dict(),
                 registered_error=None if self.registration is None else self.registered_error)
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


def _paths(paths) -> list[Path]:
    return [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]


def load(paths: Path | Sequence[Path] = SHIPPED, ops: dict[str, OpEntry] | None = None) -> tuple[list[Row], dict]:
    """The rows of one or several files and their models (one model per distinct kernel, stage, shape and
    element size); MeasurementError naming the file and row of the first row that cannot be used. `ops`: an
    op map (npusim/fit/op_map.py) for the msprof op summaries among them: a row's implementation is its OP Type."""
    rows, models = [], {}
    ids: dict[str, str] = {}
    for path in _paths(paths):
        measured = read_measurements(path, ops if _is_op_summary(path) else None)
        lines = list(csv.reader(path.read_text(encoding="utf-8-sig").splitlines()))   # read_measurements read it
        header = [h.strip() for h in lines[0]]
        for m in measured:
            cells = dict(zip(header, (c.strip() for c in lines[m.row - 1])))
            if cells.get("not_modelled"):
                continue                                  # reported as data (`reported`), not predicted
            held = "yes" if m.held_out else cells.get("held_out", "").lower()
            if held not in YES + NO:
                raise MeasurementError(f"{m.where()}: held_out {cells['held_out']!r} is not yes or no")
            if kda_kernel(m.kernel) and held not in YES:
                raise MeasurementError(f"{m.where()}: {m.kernel} models a measured KDA kernel, whose rows are held "
                                       f"out (no fit may see them): set held_out = yes")
            row_id = cells.get("id") or f"{path.name} row {m.row}"
            if row_id in ids:
                raise MeasurementError(f"{m.where()}: id {row_id!r} is used twice (first at {ids[row_id]})")
            ids[row_id] = m.where()
            row = Row(row_id, cells.get("implementation", "") or cells.get("OP Type", ""), m.kernel, m.shape, m.dtype, m.measured_us,
                      held in YES, m.stage, str(path), line=m.row)
            if row.key not in models:
                models[row.key] = resolve(m)
            rows.append(row)
    return rows, models


def _is_op_summary(path: Path) -> bool:
    """Whether a measurements file is an msprof op summary (its header names Task Duration(us))."""
    first = path.read_text(encoding="utf-8-sig", errors="replace").split("\n", 1)[0] if path.is_file() else ""
    return "Task Duration(us)" in first


@dataclass(frozen=True)
class Reported:
    """A measured row the model does not predict, and why (its `not_modelled` cell)."""
    id: str
    implementation: str
    stage: str
    measured_us: float
    why: str


def reported(paths: Path | Sequence[Path] = SHIPPED) -> list[Reported]:
    """The rows of `paths` marked not modelled (a simple CSV's `not_modelled` column), in file order."""
    out = []
    for path in _paths(paths):
        text = path.read_text(encoding="utf-8-sig")
        for line, cells in enumerate(csv.DictReader(text.splitlines()), start=2):
            why = (cells.get("not_modelled") or "").strip()
            if why:
                out.append(Reported(cells.get("id") or f"{path.name} row {line}", cells.get("implementation", ""),
                                    cells.get("stage", "") or "", float(cells["measured_us"]), why))
    return out


def affine(rows: list[Row]) -> dict[str, Affine]:
    """The affine diagnostic of each group (implementation and stage), on its rows not held out (needs two
    distinct predictions)."""
    out = {}
    for impl in dict.fromkeys(r.group for r in rows):
        train = [r for r in rows if r.group == impl and not r.held_out]
        x = np.array([r.predicted_us for r in train])
        y = np.array([r.measured_us for r in train])
        if len(set(x.round(6))) < 2:
            continue
        w = 1 / y
        floor, scale = np.linalg.lstsq(np.c_[w, x * w], np.ones_like(y), rcond=None)[0]
        out[impl] = Affine(impl, float(floor), float(scale), len(train))
    return out


def host_floors(rows: list[Row], device: dict) -> dict[str, float]:
    """Per group (implementation and stage), the host floor (npusim/chip/floor.py) of `rows` given each row's
    predicted us (`device`: a row's key -> us)."""
    return floors([r.group for r in rows], [r.measured_us for r in rows], [device[r.key] for r in rows])


def _predict_each(model, profiles) -> list[float]:
    """The first profile replayed, the others timed from it at once (KernelModel.predict_many)."""
    return model.predict_many(profiles) if len(profiles) > 1 else [model.predict(p) for p in profiles]


def predictions(models: dict, profiles: list, jobs: int = 1) -> dict:
    """Every model's latency under every profile ({key: [us per profile]}); with jobs > 1, the models are
    shared among that many worker processes (the same numbers: a prediction is deterministic)."""
    if jobs <= 1 or len(models) < 2:
        return {k: _predict_each(m, profiles) for k, m in models.items()}
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(max_workers=min(jobs, len(models))) as pool:
        futures = {k: pool.submit(_predict_each, m, profiles) for k, m in models.items()}
        return {k: f.result() for k, f in futures.items()}


def validate(paths: Path | Sequence[Path] = SHIPPED, profile_name: str = "ascend-910b2", samples: int = 50,
             seed: int = 0, refit: bool = False, only: str | None = None, fit_fields=None, jobs: int = 1,
             registered: Sequence[Path] | None = None, ops: dict[str, OpEntry] | None = None):
    """(rows, affine diagnostics, fit or None, floors under the fitted profile, influences on the largest row).
    `jobs`: worker processes for the predictions (the nominal ones and the interval's samples). `registered`:
    the files of predictions registered before the measured values (None: the shipped ones); a row they
    register carries its prediction (Row.registration)."""
    profile = load_profile(profile_name)
    rows, models = load(paths, ops)
    if only is not None:
        rows = [r for r in rows if r.implementation == only]
        if not rows:
            raise MeasurementError(f"{', '.join(map(str, _paths(paths)))}: no row has implementation {only!r}")
    if refit and sum(r.held_out for r in rows) < 2:
        raise MeasurementError(f"{', '.join(map(str, _paths(paths)))}: --fit needs at least 2 rows marked "
                               f"held_out = yes, to test the fit on")
    if refit and sum(not r.held_out for r in rows) < 2:
        raise MeasurementError(f"{', '.join(map(str, _paths(paths)))}: --fit needs at least 2 rows not held "
                               f"out, to fit on; got {sum(not r.held_out for r in rows)}")
    keys = list(dict.fromkeys(r.key for r in rows))
    fields = assumptions(profile)
    fitted = len(fit_fields or fields) if refit else 0
    check_models([models[k] for k in keys], profile, 1 + samples + (typical_evaluations(fitted) if refit else 0),
                 "kda.validate")                     # one line before hours of replays
    chosen = fields
    if fit_fields:
        known = {f.field for f in fields}
        unknown = [f for f in fit_fields if f not in known]
        if unknown:
            raise NpuSimError(f"--fields: {unknown[0]!r} is not a ranged field of {profile.name} "
                              f"(ranged: {', '.join(sorted(known))})")
        chosen = [f for f in fields if f.field in fit_fields]
    values = sample_values(fields, samples, seed) if samples else None
    profiles = [profile] + (sample_profiles(profile, fields, values) if samples else [])
    each = predictions({k: models[k] for k in keys}, profiles, jobs)
    nominal = {k: v[0] for k, v in each.items()}
    spread = {k: v[1:] for k, v in each.items()}
    influences: list[Influence] = []
    if samples:
        largest = max(rows, key=lambda r: nominal[r.key])
        influences = rank_influences(fields, values, spread[largest.key])
    for r in rows:
        r.predicted_us = nominal[r.key]
        if samples:
            r.p05, r.p50, r.p95 = (float(x) for x in np.percentile(spread[r.key], [5, 50, 95]))
    attach_registrations(rows, registry_of_predictions.shipped() if registered is None else registered,
                         profile_name, nominal)
    diag = affine(rows)
    for r in rows:
        if r.group in diag:
            r.affine_us = diag[r.group](r.predicted_us)
    result, floors = None, {}
    if refit:
        train = [r for r in rows if not r.held_out and not kda_kernel(r.kernel)]
        fp = FloorPredictors([models[r.key] for r in train], [r.group for r in train],
                             [r.measured_us for r in train])
        result = fit(profile, chosen, fp.predictors(), [r.measured_us for r in train], many=fp.many)
        device = {k: models[k].predict(result.profile) for k in keys}
        floors = host_floors(train, device)
        for r in rows:
            r.fitted_us = floors.get(r.group, 0.0) + device[r.key]
    return rows, diag, result, floors, influences


def attach_registrations(rows: list[Row], paths, profile_name: str, nominal: dict) -> list:
    """Each row's registered prediction (Row.registration); returns the predictions no row measures yet.
    The model's figure now is the nominal prediction where the prediction names this profile."""
    cache: dict = {}

    def now(p) -> float:
        if p.profile == profile_name and p.key in nominal:
            return nominal[p.key]
        if (p.key, p.profile) not in cache:
            try:
                prof = load_profile(p.profile)
            except NpuSimError as err:
                raise MeasurementError(f"{p.where()}: {err}") from None
            cache[(p.key, p.profile)] = registry_of_predictions.model_of(p).predict(prof)
        return cache[(p.key, p.profile)]

    regs, pending = registry_of_predictions.register(rows, [Path(p) for p in paths], now)
    for r in rows:
        r.registration = regs.get(r.id)
    return pending


def summary(rows: list[Row], attr: str = "error") -> dict:
    """Median, mean and largest |error| (relative) over the rows: all, fitted on (not held out) and held out."""
    def stats(sel):
        errs = [abs(getattr(r, attr)) for r in sel if not math.isnan(getattr(r, attr))]
        return {"n": len(errs), "median_abs": float(np.median(errs)) if errs else None,
                "mean_abs": float(np.mean(errs)) if errs else None, "max_abs": float(np.max(errs)) if errs else None}
    return {"all": stats(rows), "fitted_on": stats([r for r in rows if not r.held_out]),
            "held_out": stats([r for r in rows if r.held_out])}


def stage_order(rows: list[Row]) -> list[str]:
    """The stages of `rows`, the forward's order first, then any other in order of appearance, "" last."""
    seen = dict.fromkeys(r.stage for r in rows)
    return [s for s in STAGES if s in seen] + [s for s in seen if s not in STAGES and s] + ([""] if "" in seen else [])


def by_implementation(rows: list[Row], attr: str = "error") -> dict:
    """Per implementation: its summary, and per stage the summary of that stage's rows; where rows carry
    registered predictions, the summary of those (`registered`: the figures as registered)."""
    out = {}
    for impl in dict.fromkeys(r.implementation for r in rows):
        sel = [r for r in rows if r.implementation == impl]
        out[impl] = {**summary(sel, attr), "inside_interval": sum(r.inside for r in sel if not math.isnan(r.p05)),
                     "stages": {s: summary([r for r in sel if r.stage == s], attr) for s in stage_order(sel)}}
        reg = [r for r in sel if r.registration is not None]
        if reg:
            out[impl]["registered"] = summary(reg, "registered_error")["all"]
    return out
