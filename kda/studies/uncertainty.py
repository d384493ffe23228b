"""Every latency with its uncertainty: the evaluated designs timed under N profiles sampled from the
ranges of the assumed fields (npusim/fit/uncertainty.py), `python -m kda.run --uncertainty N`.

The phase graph of each design is recorded once (it depends on shapes and precision, not on the profile),
and so is its replay on the run's profile; the samples are timed all at once from those (kda/studies/timing.py:
replayed by the compiled event model, or by the event model where a sample changes the schedule's shape;
`ways` says how many each way). Fields the user fixed with `--set` are not sampled.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from npusim.fit.uncertainty import (
    Assumption,
    Influence,
    Interval,
    assumptions,
    interval,
    rank_influences,
    sample_profiles,
    sample_values,
)
from npusim.model.limits import MAX_SAMPLES, check
from npusim.model.whatif import Ways

from kda.studies.evaluate import VersionResult
from kda.studies.probe import probe_results, why_unsafe
from kda.studies.timing import time_profiles

METRICS = {"pipelined": "layer latency (pipelined)", "serial": "serial", "bound": "lower bound"}


def _metrics(r: VersionResult) -> dict[str, float]:
    rep = r.design_report            # every design, one pass or several
    if rep is None:
        return {m: float("nan") for m in METRICS}
    serial = rep.serial_us if rep.serial_us is not None else float("nan")
    return {"pipelined": rep.latency_us, "serial": serial, "bound": rep.bound_us}


@dataclass
class Uncertainty:
    samples: int
    seed: int
    fields: list[Assumption]
    values: np.ndarray                                 # [samples, fields]
    versions: list[str]
    latencies: dict[str, dict[str, np.ndarray]]        # version -> metric -> [samples] us
    nominal: dict[str, dict[str, float]]               # version -> metric -> us under the profile's values
    ways: Ways | None = None                           # how the (sample, pass) timings were obtained
    notes: list[str] | None = None                     # what the fast ways could not serve, once each
    statuses: dict[str, str] = field(default_factory=dict)   # field -> ASSUMED, FITTED or MEASURED
    apart: dict[str, str] = field(default_factory=dict)      # version -> why it is not counted as a winner

    def interval(self, version: str, metric: str = "pipelined") -> Interval:
        return interval(self.latencies[version][metric], self.nominal[version][metric])

    def influences(self, version: str, metric: str = "pipelined") -> list[Influence]:
        return rank_influences(self.fields, self.values, self.latencies[version][metric])

    def drivers(self, version: str, cover: float = 0.8, most: int = 3) -> list[Influence]:
        """The fields that drive most of a design's interval: the largest rho^2 first, until they add up to `cover`
        or `most` of them; a field explaining under 5 % alone is left out."""
        out: list[Influence] = []
        for i in self.influences(version):
            if len(out) == most or sum(d.share for d in out) >= cover or i.share < 0.05:
                break
            out.append(i)
        return out

    def win_shares(self) -> dict[str, float]:
        """Share of the samples in which each design has the lowest pipelined latency (ties split), among the
        designs not set apart (those that overflow on the run's gates, or that nothing checked)."""
        counted = [v for v in self.versions if v not in self.apart]
        if not counted:
            return {}
        lat = np.stack([self.latencies[v]["pipelined"] for v in counted])   # [versions, samples]
        lat = np.where(np.isfinite(lat), lat, np.inf)
        best = lat.min(axis=0)
        winners = (lat == best) & np.isfinite(best)
        share = (winners / np.maximum(winners.sum(axis=0), 1)).sum(axis=1) / self.samples
        return {v: float(s) for v, s in zip(counted, share)}

    def to_dict(self) -> dict:
        return {
            "samples": self.samples, "seed": self.seed,
            "sampling": "Latin hypercube, log-uniform over each range",
            "ranking": "Spearman rank correlation with the pipelined latency; share = rho^2",
            "fields": [{"field": f.field, "value": f.value, "range": [f.lo, f.hi], "reason": f.reason,
                        "status": self.statuses.get(f.field, "")} for f in self.fields],
            "latency_us": {v: {m: self.interval(v, m).to_dict() for m in METRICS} for v in self.versions},
            "influence": {v: [i.to_dict() for i in self.influences(v)] for v in self.versions},
            "drivers": {v: [i.field for i in self.drivers(v)] for v in self.versions},
            "wins": self.win_shares() if len(self.versions) > 1 else None,
            "not_counted": dict(self.apart),
            "timed": dict(self.ways.counts) if self.ways is not None else None,
            "notes": list(self.notes or []),
        }


def design_fields(profile, fixed=()) -> list:
    """The ranged fields a design's samples draw. Not the host's: they time a measured kernel's Python wrapper
    (npusim/model/host.py), and a design is timed as its kernels alone (drawn, they would only reshuffle the
    hypercube)."""
    return [f for f in assumptions(profile, fixed) if not f.field.startswith("host.")]


def check_samples(samples, what: str = "--uncertainty") -> int:
    """The number of samples of an interval: a whole number from 2 on (ValueError otherwise), at most
    MAX_SAMPLES (LimitError)."""
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)):
        raise ValueError(f"{what} takes a whole number of samples, got {samples!r}")
    if samples < 2:
        raise ValueError(f"{what} needs at least 2 samples, got {samples}")
    check(what, int(samples), MAX_SAMPLES)              # LimitError: the limit, and how to lift it
    return int(samples)


def propagate(results: list[VersionResult], samples: int, seed: int = 0, fixed=(),
              progress: Callable[[int, int], None] | None = None, latency_only: bool = False) -> Uncertainty:
    """Time each evaluated design under `samples` profiles drawn from the ranges of its profile.
    `latency_only`: the pipelined latency alone is sampled (the serial latency and the bound are left NaN)."""
    samples = check_samples(samples)
    probe_results(results)              # timing-only results: does each design stay finite on its gates?
    base = results[0].profile
    fields = design_fields(base, fixed)
    if not fields:
        raise ValueError(f"profile {base.name} gives no field a range"
                         + (" that --set leaves free" if fixed else "") + ": nothing to sample")
    values = sample_values(fields, samples, seed)
    profiles = sample_profiles(base, fields, values)
    lat = {r.version: {m: np.full(samples, np.nan) for m in METRICS} for r in results}
    ways, notes = Ways(), []
    for j, r in enumerate(results):
        if r.design_report is not None:
            t = time_profiles(r, profiles, serial=not latency_only, bound=not latency_only)
            lat[r.version]["pipelined"] = t.latency_us
            if not latency_only:
                if t.serial_us is None or t.bound_us is None:
                    raise ValueError(f"{r.version}: the sampled timings came back without the serial latency or bound")
                lat[r.version].update(serial=t.serial_us, bound=t.bound_us)
            ways.merge(t.ways)
            notes += [f"{r.version}: {x}" for x in t.notes if f"{r.version}: {x}" not in notes]
        if progress is not None:
            progress((j + 1) * samples, samples * len(results))
    return Uncertainty(samples, seed, fields, values, [r.version for r in results], lat,
                       {r.version: _metrics(r) for r in results}, ways, notes,
                       {f.field: base.status(f.field) for f in fields},
                       {r.version: why for r in results if (why := why_unsafe(r)) is not None})


def _us(x: float) -> str:
    if x != x:
        return "-"
    return f"{x / 1000:.2f} ms" if x >= 10_000 else f"{x:.1f} us"


def lines(u: Uncertainty) -> list[str]:
    """The plain-text summary the CLI prints."""
    out = [f"Uncertainty: {u.samples} samples (Latin hypercube, seed {u.seed}), log-uniform over the ranges of "
           f"{len(u.fields)} fields (assumed, fitted or measured); 90 % interval = 5th to 95th percentile"]
    for f in u.fields:
        out.append(f"  {f.field} = {f.value:g} in [{f.lo:g}, {f.hi:g}] ({u.statuses.get(f.field, '?')})")
    out.append(f"{'':10} {'metric':26} {'nominal':>10} {'median':>10} {'90 % interval':>24}")
    for v in u.versions:
        for m, label in METRICS.items():
            iv = u.interval(v, m)
            out.append(f"{v:10} {label:26} {_us(iv.nominal):>10} {_us(iv.median):>10} "
                       f"{'[' + _us(iv.lo) + ', ' + _us(iv.hi) + ']':>24}")
    out.append("What drives each design's interval: the fields that explain most of its pipelined latency's rank "
               "variance, each alone (Spearman rho^2)")
    for v in u.versions:
        top = ", ".join(f"{i.field} {i.share:.0%} ({u.statuses.get(i.field, '?')})" for i in u.drivers(v))
        out.append(f"  {v:8} {top or 'no field above 5 %'}")
    if any(u.statuses.get(i.field) == "ASSUMED" for v in u.versions for i in u.drivers(v)):
        out.append("  An ASSUMED field is measured on a 910B as docs/how-to/measure-assumed.md says; its figure goes "
                   "in with --set FIELD=VALUE or a profile file")
    if len(u.versions) > 1:
        wins = u.win_shares()
        out.append("Samples in which each design is fastest (pipelined), among those that stay finite on the run's "
                   "gates: " + (", ".join(f"{v} {s:.0%}" for v, s in wins.items()) or "none stays finite"))
    if u.apart:
        out.append("Not counted: " + "; ".join(f"{v} ({why})" for v, why in u.apart.items()))
    if u.ways is not None and u.ways.total:
        out.append(f"Timed (sample x pass x pipelined/serial): {u.ways.line()}; each way gives the event model's "
                   f"times (docs/explanation/what-ifs.md)")
    for note in u.notes or ():
        out.append(f"  {note}")
    return out
