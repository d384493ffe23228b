"""Uncertainty of a profile's assumed numbers: Latin hypercube samples of their ranges, summaries of what
comes out, and which assumption explains how much of the spread.

- Sampling: each field with a `range = [lo, hi]` (profile.py) is drawn log-uniformly over its range (each
  factor of two inside the range equally likely: the bounds are scales, often a decade apart), by a Latin
  hypercube: n strata per field, one draw in each, the strata of the fields paired by independent random
  permutations. Seeded: the same seed gives the same samples.
- Summary: the median and the 90 % interval (5th and 95th percentiles, linear interpolation).
- Ranking: the Spearman rank correlation rho between each field and the output. rho^2 is the share of the
  output's rank variance that field explains alone (the inputs are independent by construction); the
  shares add up to less than 1 where fields interact or act non-monotonically.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.stats import qmc

from npusim.chip.profile import Profile


@dataclass(frozen=True)
class Assumption:
    field: str                 # "sync.latency_us"
    value: float               # the profile's own value
    lo: float
    hi: float
    reason: str


def assumptions(profile: Profile, fixed=()) -> list[Assumption]:
    """The fields of `profile` with a range, less the `fixed` ones (e.g. set by the user)."""
    return [Assumption(k, profile.value(k), lo, hi, profile.range_reasons.get(k, ""))
            for k, (lo, hi) in profile.ranges.items() if k not in set(fixed)]


def latin_hypercube(n: int, d: int, seed: int) -> np.ndarray:
    """n points in [0, 1)^d, one in each of the n strata of every axis (scipy.stats.qmc)."""
    if n < 1:
        raise ValueError(f"the number of samples must be >= 1, got {n}")
    if d == 0:
        return np.zeros((n, 0))
    return qmc.LatinHypercube(d=d, rng=np.random.default_rng(seed)).random(n)


def sample_values(fields: list[Assumption], n: int, seed: int) -> np.ndarray:
    """[n, len(fields)] values, log-uniform over each range by a Latin hypercube."""
    u = latin_hypercube(n, len(fields), seed)
    lo = np.log([f.lo for f in fields]) if fields else np.zeros(0)
    hi = np.log([f.hi for f in fields]) if fields else np.zeros(0)
    return np.exp(lo + u * (hi - lo))


def sample_profiles(profile: Profile, fields: list[Assumption], values: np.ndarray) -> list[Profile]:
    """One profile per row of `values`."""
    out = []
    for row in values:
        out.append(profile.replace(**{f.field.replace(".", "__", 1): float(v) for f, v in zip(fields, row)}))
    return out


@dataclass(frozen=True)
class Interval:
    median: float
    lo: float                  # 5th percentile
    hi: float                  # 95th percentile
    nominal: float             # under the profile's own values

    def to_dict(self) -> dict:
        return {"median": self.median, "p05": self.lo, "p95": self.hi, "nominal": self.nominal}


def interval(samples, nominal: float) -> Interval:
    x = np.asarray(samples, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return Interval(math.nan, math.nan, math.nan, nominal)
    p5, p50, p95 = np.percentile(x, [5, 50, 95])
    return Interval(float(p50), float(p5), float(p95), nominal)


def spearman(x, y) -> float:
    """Spearman rank correlation (ties share their mean rank); 0 where either side is constant."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    return float(stats.spearmanr(x, y).statistic)


@dataclass(frozen=True)
class Influence:
    field: str
    rho: float                 # Spearman rank correlation with the output
    share: float               # rho^2: share of the output's rank variance it explains alone

    def to_dict(self) -> dict:
        return {"field": self.field, "rho": self.rho, "share": self.share}


def rank_influences(fields: list[Assumption], values: np.ndarray, y) -> list[Influence]:
    """The assumptions, most influential first."""
    out = [Influence(f.field, r, r * r) for f, r in
           ((f, spearman(values[:, j], y)) for j, f in enumerate(fields))]
    return sorted(out, key=lambda i: -i.share)

