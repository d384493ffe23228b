"""Bounded least squares of a profile's ranged fields against measured latencies, and what the data can
and cannot determine.

- Unknowns: the log of each field, kept inside log(range) (scipy.optimize.least_squares with bounds, the
  trust-region reflective method: a field at a bound that the gradient pushes outward stays there).
- Residuals: log(predicted) - log(measured), i.e. relative errors, so a 20 us kernel counts as much as a
  20 ms one. A weak pull towards the profile's own value (1e-3 per range width) keeps directions the data
  do not see where they were, instead of wandering.
- Jacobian: forward differences of the simulator, 1e-3 in log (0.1 %).
- What is determined, at the solution (Jw: the Jacobian scaled by each field's log range width, i.e. how
  the log predictions move when the field crosses its whole range):
    * zero sensitivity: moving the field across its range moves no prediction by 0.1 %;
    * collinear: the smallest singular value of Jw is below 1e-3 of the largest: the fields that make up
      its singular vector move the predictions together, so only their combination is determined;
    * too uncertain: the standard error (residual variance x (Jw^T Jw)^-1) spans more than half the range.
  An undetermined field keeps the profile's value and its ASSUMED source; the report says why.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from scipy.optimize import least_squares

from npusim.chip.floor import model_times
from npusim.chip.profile import Profile
from npusim.fit.uncertainty import Assumption

PRIOR = 1e-3
STEP = 1e-3
ZERO_SENSITIVITY = 1e-3
COLLINEAR = 1e-3


@dataclass
class FieldFit:
    field: str
    prior: float
    lo: float
    hi: float
    value: float                 # fitted value, or the prior when undetermined
    determined: bool
    why: str = ""                # when not determined: zero sensitivity / collinear with ... / too uncertain
    rel_se: float = math.nan     # standard error, relative (log units)
    at_bound: bool = False

    def to_dict(self) -> dict:
        return {"field": self.field, "prior": self.prior, "range": [self.lo, self.hi], "value": self.value,
                "determined": self.determined, "why": self.why or None, "rel_se": self.rel_se,
                "at_bound": self.at_bound}


@dataclass
class Fit:
    fields: list[FieldFit]
    measured: np.ndarray
    before: np.ndarray           # predictions under the profile's values
    after: np.ndarray            # predictions under the fitted values
    iterations: int
    evaluations: int
    profile: Profile | None = field(default=None, repr=False)   # the profile with the determined fields set
    host_floor_us: float | None = None   # set by callers that fit a constant host time too (floor.py)

    @staticmethod
    def rms(pred, meas) -> float:
        """Root mean square relative error, in log terms (0.1 = about 10 %)."""
        return float(np.sqrt(np.mean((np.log(pred) - np.log(meas)) ** 2)))

    @property
    def rms_before(self) -> float:
        return self.rms(self.before, self.measured)

    @property
    def rms_after(self) -> float:
        return self.rms(self.after, self.measured)


Predictor = Callable[[Profile], float]
# Every predictor on each of several profiles at once: an array [profiles, predictors] holding the numbers
# the predictors give one by one (a model timed under many profiles in one batch: npusim/model/whatif/).
Batch = Callable[[list[Profile]], np.ndarray]


def batch_of(models: Sequence) -> Batch:
    """fit()'s `many` for predictors that are models' predict(profile): each model timed under the profiles
    at once where it has predict_many(profiles), else one profile after another; a model shared by several
    rows is timed once."""
    def many(profiles: list[Profile]) -> np.ndarray:
        return model_times(models, profiles).T
    return many


def typical_evaluations(fields: int) -> int:
    """Predictions of every row a fit of `fields` fields makes, typically: ten steps, each one prediction and
    one more per field for the Jacobian (what a tool weighs before it starts: npusim/model/limits.py)."""
    return 10 * (1 + fields)


def _profile(base: Profile, fields: Sequence[Assumption], phi: np.ndarray) -> Profile:
    return base.replace(**{f.field.replace(".", "__", 1): float(math.exp(x)) for f, x in zip(fields, phi)})


def fit(base: Profile, fields: Sequence[Assumption], predictors: Sequence[Predictor], measured: Sequence[float],
        max_iter: int = 40, many: Batch | None = None) -> Fit:
    """Fit `fields` of `base` so that the predictors match `measured` (us), within the fields' ranges.
    Fields the data cannot determine are set back to the profile's value and the others refitted without
    them, until every field left is determined. `many`: the predictors under several profiles at once, for
    the Jacobian's points (the same numbers, fewer replays)."""
    meas = np.asarray(measured, dtype=float)
    calls = [0]
    before = np.array([f(base) for f in predictors])
    calls[0] += len(predictors)
    verdicts: dict[str, FieldFit] = {}
    active = list(fields)
    profile, pred, iterations = base, before, 0
    while active:
        phi, pred, J, its = _solve(base, active, predictors, meas, max_iter, calls, many)
        iterations += its
        judged = _judge(active, phi, J, np.log(pred) - np.log(meas))
        for f in judged:
            verdicts[f.field] = f
        undetermined = [f.field for f in judged if not f.determined]
        profile = _profile(base, active, phi)
        if not undetermined:
            break
        active = [f for f in active if f.field not in undetermined]
        if not active:
            profile, pred = base, before
    out = [verdicts[f.field] for f in fields]
    return Fit(out, meas, before, pred, iterations, calls[0], profile)


def _solve(base, fields, predictors, meas, max_iter, calls, many=None):
    """Bounded least squares in log space (scipy's trust-region reflective method, with our Jacobian);
    returns (log values, predictions, Jacobian, iterations). With `many`, the Jacobian's points not predicted
    yet are predicted in one batch."""
    lo = np.log([f.lo for f in fields])
    hi = np.log([f.hi for f in fields])
    width = np.maximum(hi - lo, 1e-12)
    phi0 = np.clip(np.log([f.value for f in fields]), lo, hi)
    seen: dict[bytes, np.ndarray] = {}           # predictions by point: the Jacobian reuses the residuals'

    def predict(phi):
        key = np.asarray(phi, dtype=float).tobytes()
        if key not in seen:
            p = _profile(base, fields, phi)
            calls[0] += len(predictors)
            seen[key] = np.array([f(p) for f in predictors])
        return seen[key]

    def predict_all(points):
        todo = [x for x in points if np.asarray(x, dtype=float).tobytes() not in seen]
        if many is None or len(todo) < 2:
            return
        calls[0] += len(predictors) * len(todo)
        values = np.asarray(many([_profile(base, fields, x) for x in todo]), dtype=float)
        for x, v in zip(todo, values):
            seen[np.asarray(x, dtype=float).tobytes()] = v

    def residuals(phi):
        return np.concatenate([np.log(predict(phi)) - np.log(meas), PRIOR * (phi - phi0) / width])

    def jacobian(phi):
        J = np.zeros((len(meas), len(fields)))
        steps = []
        for j in range(len(fields)):
            h = STEP if phi[j] + STEP <= hi[j] else -STEP
            step = phi.copy()
            step[j] += h
            steps.append((h, step))
        predict_all([phi] + [step for _, step in steps])
        base_log = np.log(predict(phi))
        for j, (h, step) in enumerate(steps):
            J[:, j] = (np.log(predict(step)) - base_log) / h
        return J

    def jacobian_all(phi):
        return np.vstack([jacobian(phi), PRIOR * np.diag(1 / width)])

    # the stopping rules of the hand-written solver this replaced: a step that gains less than 0.1 % of the
    # cost, or moves no field by 1e-5 in log; the fields scaled by the Jacobian's columns, as Marquardt's
    # damping does (the data see some fields 1000 times more than others)
    res = least_squares(residuals, phi0, jac=jacobian_all, bounds=(lo, np.maximum(hi, lo + 1e-12)),
                        method="trf", ftol=1e-3, xtol=1e-5, gtol=1e-8, max_nfev=max_iter, x_scale="jac")
    phi = np.clip(res.x, lo, hi)
    return phi, predict(phi), jacobian(phi), int(res.njev or res.nfev)


def _judge(fields, phi, J, resid) -> list[FieldFit]:
    lo = np.log([f.lo for f in fields])
    hi = np.log([f.hi for f in fields])
    width = np.maximum(hi - lo, 1e-12)
    Jw = J * width                               # log-prediction change across each field's whole range
    m, p = J.shape
    sens = np.abs(Jw).max(axis=0) if m else np.zeros(p)
    why = [""] * p
    alive = [j for j in range(p) if sens[j] >= ZERO_SENSITIVITY]
    for j in range(p):
        if j not in alive:
            why[j] = "zero sensitivity: no measurement changes by 0.1 % across its whole range"
    # collinear groups among the fields the data do see
    while len(alive) > 1:
        sub = Jw[:, alive] / sens[alive]
        _, s, vt = np.linalg.svd(sub, full_matrices=False)
        if len(s) == len(alive) and s[-1] >= COLLINEAR * s[0]:
            break
        v = vt[-1] if len(s) == len(alive) else _null_vector(sub)
        group = [alive[k] for k in range(len(alive)) if abs(v[k]) > 0.2]
        names = [fields[j].field for j in group]
        for j in group:
            others = ", ".join(n for n in names if n != fields[j].field)
            why[j] = f"collinear with {others}: the data move only their combination"
        alive = [j for j in alive if j not in group]
    # statistical: the residual variance over the free degrees of freedom
    se = np.full(p, math.inf)
    if alive:
        sub = J[:, alive]
        dof = max(m - len(alive), 1)
        sigma2 = max(float(resid @ resid) / dof, 1e-8)
        try:
            cov = sigma2 * np.linalg.inv(sub.T @ sub)
            se[alive] = np.sqrt(np.maximum(np.diag(cov), 0))
        except np.linalg.LinAlgError:
            pass
        for j in alive:
            if 2 * se[j] > 0.5 * width[j]:
                spread = f"x{math.exp(2 * se[j]):.3g}" if 2 * se[j] < math.log(1000) else "more than x1000"
                why[j] = f"too uncertain: 2 standard errors ({spread}) span more than half its range"
    out = []
    for j, f in enumerate(fields):
        ok = not why[j]
        value = math.exp(phi[j]) if ok else f.value
        at_bound = ok and (phi[j] <= lo[j] + 1e-9 or phi[j] >= hi[j] - 1e-9)
        out.append(FieldFit(f.field, f.value, f.lo, f.hi, value, ok, why[j], float(se[j]), bool(at_bound)))
    return out


def _null_vector(a: np.ndarray) -> np.ndarray:
    """A unit vector v with a @ v ~ 0 when a has fewer rows than columns."""
    _, _, vt = np.linalg.svd(a, full_matrices=True)
    return vt[-1]
