"""Host time a kernel model does not have: one floor per group of measurements (an implementation, a
benchmark), for timings taken around a whole Python-level call rather than one kernel on the device.

For given predictions p_i of a group's rows, the floor f >= 0 minimises sum ((f + p_i - m_i) / m_i)^2,
i.e. f = sum w_i (m_i - p_i) / sum w_i with w_i = 1 / m_i^2 (relative errors, as fit.py weighs them),
clipped at 0. `FloorPredictors` solves it at every profile the fit tries (variable projection), so the
fitted fields only have to explain how time grows with the shape; the floor itself is reported, never
written into a profile (it is not a property of the chip).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from npusim.chip.profile import Profile


def floors(groups: Sequence[str], measured: Sequence[float], predicted: Sequence[float]) -> dict[str, float]:
    """The floor of each group (see the module doc)."""
    m = np.asarray(measured, dtype=float)
    p = np.asarray(predicted, dtype=float)
    g = np.asarray(groups, dtype=object)
    out = {}
    for name in dict.fromkeys(groups):
        sel = g == name
        w = 1 / m[sel] ** 2
        out[name] = max(float(w @ (m[sel] - p[sel]) / w.sum()), 0.0)
    return out


def model_times(models: Sequence, profiles: list[Profile]) -> np.ndarray:
    """Each model's latency under each of `profiles`, [models, profiles]: timed under them at once where the
    model has predict_many(profiles), else one profile after another; a model shared by several rows once."""
    times: dict[int, list[float]] = {}
    for m in models:
        if id(m) not in times:
            batch = getattr(m, "predict_many", None)
            times[id(m)] = list(batch(profiles)) if callable(batch) else [m.predict(p) for p in profiles]
    return np.array([times[id(m)] for m in models], dtype=float)


class FloorPredictors:
    """Predictors for npusim.fit.least_squares: a row's group floor + its model's latency. `models` have `predict(profile)`;
    rows may share a model object (it is evaluated once per profile). fit.py evaluates every predictor on
    one profile object before it tries the next, so one profile's predictions are kept at a time."""

    def __init__(self, models: Sequence, groups: Sequence[str], measured: Sequence[float]):
        if not (len(models) == len(groups) == len(measured)):
            raise ValueError("models, groups and measured must have one entry per row")
        self.models, self.groups, self.measured = list(models), list(groups), list(measured)
        self._last: tuple | None = None

    def evaluate(self, profile: Profile) -> tuple[list[float], dict[str, float]]:
        """(every row's model latency, every group's floor) under `profile`."""
        if self._last is None or self._last[0] is not profile:
            cache: dict[int, float] = {}
            device = []
            for m in self.models:
                if id(m) not in cache:
                    cache[id(m)] = m.predict(profile)
                device.append(cache[id(m)])
            self._last = (profile, device, floors(self.groups, self.measured, device))
        return self._last[1], self._last[2]

    def many(self, profiles: list[Profile]) -> np.ndarray:
        """Every predictor under each of `profiles`, [profiles, rows] (least_squares.fit's `many`): each
        model timed under them at once where it has predict_many, each profile's floors solved as evaluate
        solves them."""
        times = model_times(self.models, profiles)
        out = []
        for device in times.T.tolist():
            fl = floors(self.groups, self.measured, device)
            out.append([fl[g] + d for g, d in zip(self.groups, device)])
        return np.array(out, dtype=float)

    def predictors(self) -> list:
        def make(i):
            def predict(profile: Profile) -> float:
                device, fl = self.evaluate(profile)
                return fl[self.groups[i]] + device[i]
            return predict
        return [make(i) for i in range(len(self.models))]
