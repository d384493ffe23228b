"""python benchmarks/calibrate_910b2.py [--write] [--only chip|host] [--with-launch]

The FITTED fields of npusim/profiles/ascend-910b2.toml, from the measured data of kda/validation/megagdn.csv.
Rows with L = 16384 or H = 48 (held out), the fused kernel's rows and any measured KDA kernel's row (refused:
kda/validation/kda.csv is validation only) never enter a fit.

The chip: every MegaGDN-PTO stage row not held out (L = 4096 and 8192; H = 16, 32 and 64; 30 rows).
The host ([host]: what a Python wrapper costs where the timed region holds it, npusim/model/host.py): the
part of the Triton rows not held out that does not grow with the sequence, 2 m(L = 4096) - m(L = 8192) for
each stage, chunk and H measured at both lengths (16 pairs), against the same of the model on the fitted
chip. The host fit runs after the chip's and does not move it.

Four fields no public table gives are fitted within wide priors (PRIORS below), every other field as the
profile has it (msKPP's tables, CANN's platform configuration): the bounded least squares of
npusim/fit/least_squares.py on log(predicted / measured). Each fitted field's interval is its value
x exp(+-2 standard errors) from the covariance of the residuals; `--write` puts the values, intervals and
sources into the profile. Every model is timed under the grid's profiles, and the fit's Jacobian points, in
one batch (npusim/model/whatif/). `--with-launch` fits the launch overhead beside them, as a diagnostic of
whether these rows determine it (the profile keeps its sourced value).
"""
from __future__ import annotations

import argparse
import csv
import itertools
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np

from npusim import load_profile
from npusim.chip.floor import model_times
from npusim.fit.least_squares import batch_of, fit
from npusim.fit.uncertainty import Assumption

from kda.kernels.registry import held_out, model

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "kda" / "validation" / "megagdn.csv"
PROFILE = ROOT / "npusim" / "profiles" / "ascend-910b2.toml"
PRIORS = {
    "sync.latency_us": (0.1, 5.0, "low: one flag write and one polled read through L2 (~100 cycles each at "
                        "1.8 GHz); high: a quarter of the 20 us full-chip launch, beyond which no kernel would hand "
                        "off per chunk"),
    "isa.vec_dependent_cycles": (0.5, 100.0, "low: back-to-back issue (msKPP: 1 cycle a flag); high: a full "
                                 "pipe_barrier plus scalar address set-up"),
    "isa.gm_burst_cycles": (0.5, 100.0, "low: rows streamed back to back; high: a new GM transaction per row"),
    "isa.scalar_access_cycles": (1.0, 100.0, "low: a load-use on an in-order scalar pipe; high: a UB access "
                                 "serialised behind the Vector pipe's port and a flag round trip"),
}
LAUNCH_PRIOR = {            # --with-launch: the launch fitted beside them (a diagnostic, never written)
    "chip.launch_overhead_us": (1.0, 40.0, "low: the device's start of every block with its arguments already "
                                "in place; high: twice the ~20 us head overhead the AscendC documentation gives "
                                "a full-core launch on A2 (asc-devkit docs, performance analysis)"),
}
HOST_PRIORS = {          # the low ends: what one call costs alone on a 910B2 host (triton-ascend issue #1675)
    "host.op_us": (12.1, 500.0, "low: an eager torch.add's host enqueue on a 910B2 (12.1 us, triton-ascend "
                   "issue #1675); high: a Python call that waits on a device allocation"),
    "host.launch_us": (23.7, 2000.0, "low: the legacy Triton C launcher's enqueue alone on a 910B2 (23.7 us, "
                       "triton-ascend issue #1675), without JITFunction.run's Python; high: a launcher that "
                       "rebinds and re-specialises every argument"),
    "host.sync_us": (5.0, 5000.0, "low: one PCIe round trip; high: a full stream synchronise with the CPU work "
                     "around it"),
}


def read(path: Path | None = None) -> list[dict]:
    """The rows of a measurement file (DATA, as it is when called), refusing any row of a measured KDA kernel
    (held out by rule)."""
    path = DATA if path is None else path
    with open(path, encoding="utf-8") as f:
        data = list(csv.DictReader(f))
    for i, r in enumerate(data, start=2):
        if held_out(r["kernel"]):
            raise SystemExit(f"{path} row {i}: {r['kernel']} is a measured KDA kernel: validation only, never fitted")
    return data


def rows(path: Path | None = None) -> list[dict]:
    return [r for r in read(path) if r["kernel"] == "gdn_pto" and r["held_out"] == "no"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/calibrate_910b2.py", description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the fitted values into the profile")
    ap.add_argument("--only", choices=("chip", "host"), help="fit only the chip's or only the host's fields")
    ap.add_argument("--with-launch", action="store_true", help="fit chip.launch_overhead_us with the chip's "
                    "fields (a diagnostic: the profile keeps its sourced launch; refuses --write)")
    args = ap.parse_args(argv)
    if args.with_launch and args.write:
        ap.error("--with-launch is a diagnostic: it does not write the profile")
    if args.only != "host":
        fit_chip(args.write, {**PRIORS, **LAUNCH_PRIOR} if args.with_launch else PRIORS)
    if args.only != "chip":
        fit_host(args.write)
    return 0


def fit_chip(write_profile: bool, priors: dict = PRIORS) -> None:
    base = load_profile("ascend-910b2")
    base = replace(base, ranges={**base.ranges, **{k: (lo, hi) for k, (lo, hi, _) in priors.items()}})
    data = rows()
    models = [model(r["kernel"], r["shape"], r["dtype"], stage=r["stage"]) for r in data]
    measured = [float(r["measured_us"]) for r in data]
    result, out = until_determined(base, priors, lambda pr: fit_fields(base, pr, models, measured))
    if write_profile:
        write(out, f"the {len(data)} gdn_pto stage rows of kda/validation/megagdn.csv not held out "
                   f"(L = 4096, 8192; H = 16, 32, 64), bounded least squares on log(predicted / "
                   f"measured), rms {result.rms_after:.2f} (benchmarks/calibrate_910b2.py)", PRIORS)


def until_determined(base, priors: dict, fit_once):
    """fit_once(priors) -> the fit's result, again and again: a field the rows cannot determine keeps the
    profile's value (ASSUMED, its prior's range) and the others are fitted again without it. Returns the
    last result and every field's (value, lo, hi, at_bound, determined, why)."""
    priors, kept = dict(priors), {}
    while True:
        result = fit_once(priors)
        out = report(result, priors)
        loose = [f.field for f in result.fields if not f.determined]
        if not loose or len(loose) == len(priors):
            return result, {**out, **kept}
        print(f"not determined: {', '.join(loose)}; kept at the profile's value, the others fitted again")
        kept.update({k: (base.value(k), *priors[k][:2], False, False,
                         f"{out[k][5]}; kept at the profile's value, its previous calibration") for k in loose})
        priors = {k: v for k, v in priors.items() if k not in loose}


def fit_fields(base, priors: dict, models, measured: list[float]):
    # the objective has local minima: the least squares start from the best point of a coarse grid over the
    # priors (4 log-spaced values each), never from the profile's value, so a rerun after --write gives
    # the same fit
    start = grid_start(base, priors, models, measured)
    print("grid start: " + ", ".join(f"{k} = {v:.3g}" for k, v in start.items()))
    fields = [Assumption(k, start[k], lo, hi, why) for k, (lo, hi, why) in priors.items()]
    result = fit(base.replace(**{k.replace(".", "__"): v for k, v in start.items()}), fields,
                 [m.predict for m in models], measured, many=batch_of(models))
    print(f"{len(models)} rows; rms of log(predicted / measured): {result.rms_before:.3f} at the grid start -> "
          f"{result.rms_after:.3f}")
    return result


def host_pairs(path: Path | None = None) -> list[tuple[dict, dict]]:
    """(L = 4096, L = 8192) rows of one Triton kernel, stage and H, neither held out."""
    data = [r for r in read(path) if r["kernel"].startswith("gdn_triton") and r["held_out"] == "no"]
    key = lambda r: (r["kernel"], r["stage"], r["shape"].replace("T=4096", "T=*").replace("T=8192", "T=*"))
    short = {key(r): r for r in data if ";T=4096;" in r["shape"]}
    return [(short[key(r)], r) for r in data if ";T=8192;" in r["shape"] and key(r) in short]


def fit_host(write_profile: bool) -> None:
    base = load_profile("ascend-910b2")
    base = replace(base, ranges={**base.ranges, **{k: (lo, hi) for k, (lo, hi, _) in HOST_PRIORS.items()}})
    pairs = host_pairs()
    measured, predictors = [], []
    for a, b in pairs:                  # the device's part is the chip's: simulated once, the host's around it
        ma, mb = (model(r["kernel"], r["shape"], r["dtype"], stage=r["stage"]) for r in (a, b))
        ka, kb = ma.kernel_us(base), mb.kernel_us(base)
        measured.append(2 * float(a["measured_us"]) - float(b["measured_us"]))
        predictors.append(lambda p, ma=ma, mb=mb, ka=ka, kb=kb: 2 * ma.around(ka, p) - mb.around(kb, p))
    def fit_once(priors: dict):
        start = {k: math.sqrt(lo * hi) for k, (lo, hi, _) in priors.items()}
        fields = [Assumption(k, start[k], lo, hi, why) for k, (lo, hi, why) in priors.items()]
        result = fit(base.replace(**{k.replace(".", "__"): v for k, v in start.items()}), fields, predictors,
                     measured)
        print(f"host: {len(pairs)} pairs of Triton rows; rms of log(predicted / measured) of 2 m(4096) - m(8192): "
              f"{result.rms_before:.3f} at the start -> {result.rms_after:.3f}")
        for (a, _), y, yhat in zip(pairs, measured, result.after):
            print(f"    {a['kernel']:14s} {a['stage']:11s} {a['shape'].split(';')[2]:5s} measured {y:7.0f} us, "
                  f"model {yhat:7.0f} us")
        return result
    result, out = until_determined(base, HOST_PRIORS, fit_once)
    if write_profile:
        write(out, f"the part of the {2 * len(pairs)} vllm-ascend-triton rows of kda/validation/megagdn.csv not "
                   f"held out that does not grow with L, 2 m(L = 4096) - m(L = 8192) for {len(pairs)} (stage, chunk, "
                   f"H), against the same of the model; bounded least squares on log, rms {result.rms_after:.2f} "
                   f"(benchmarks/calibrate_910b2.py)", HOST_PRIORS)


def report(result, priors: dict) -> dict:
    out = {}
    for f in result.fields:
        se = f.rel_se if math.isfinite(f.rel_se) else float("nan")
        lo, hi = f.value * math.exp(-2 * se), f.value * math.exp(2 * se)
        lo = max(lo, priors[f.field][0])
        out[f.field] = (f.value, lo, hi, f.at_bound, f.determined, f.why)
        print(f"  {f.field} = {f.value:.4g}  2-sd [{lo:.4g}, {hi:.4g}]" + ("  (at a bound of its prior)" if f.at_bound
              else "") + ("" if f.determined else f"  NOT DETERMINED: {f.why}"))
    return out


def grid_start(base, priors: dict, models, measured: list[float], points: int = 4) -> dict[str, float]:
    """The grid point (each field at `points` log-spaced values across its prior) with the least rms of
    log(predicted / measured)."""
    axes = [[lo * (hi / lo) ** ((i + 0.5) / points) for i in range(points)] for lo, hi, _ in priors.values()]
    grid = list(itertools.product(*axes))
    profiles = [base.replace(**{k.replace(".", "__"): v for k, v in zip(priors, values)}) for values in grid]
    times = model_times(models, profiles)                       # [rows, grid points], timed in one batch
    rms = np.sqrt(np.mean(np.log(times / np.asarray(measured)[:, None]) ** 2, axis=0))
    return dict(zip(priors, grid[int(np.argmin(rms))]))


def write(out: dict, rows_text: str, priors: dict) -> None:
    text = PROFILE.read_text(encoding="utf-8")
    for key, (value, lo, hi, at_bound, determined, why) in out.items():
        section, name = key.split(".")
        prior = priors[key]
        note = (f"; at the bound of its prior [{prior[0]:g}, {prior[1]:g}]: the data pin only an upper end"
                if at_bound else f"; prior [{prior[0]:g}, {prior[1]:g}]")
        if not determined:      # the data cannot pin it: it stays an assumption, with its prior range
            line = (f'{name} = {{ value = {value:.4g}, source = "ASSUMED: no public figure; not determined by '
                    f'{rows_text} ({why})", range = [{prior[0]:g}, {prior[1]:g}], range_reason = "{prior[2]}" }}')
        else:
            line = (f'{name} = {{ value = {value:.4g}, source = "FITTED: {rows_text}{note}", range = [{lo:.4g}, '
                    f'{hi:.4g}], range_reason = "the fit\'s 2-sd interval from the covariance of its residuals" }}')
        pattern = re.compile(rf"^{name} = \{{.*\}}$", re.M)
        start = text.index(f"[{section}]")
        m = pattern.search(text, start)
        text = text[:m.start()] + line + text[m.end():]
    PROFILE.write_text(text, encoding="utf-8")
    print(f"wrote {PROFILE.relative_to(ROOT)}")


if __name__ == "__main__":
    raise SystemExit(main())
