"""Which design wins, for which shape, on the calibrated chip, with intervals: every design (v1-v6, fla,
mform) timed on the README's four shapes (and on MegaGDN's measured shape), each with and without two
sequences interleaved per core; then, at each design's better interleave, N profiles drawn from the
calibrated profile's ranges (what `python -m kda.run --version all --no-numerics ... --uncertainty N` does:
the graphs recorded once, timing replayed per sample), giving a median, a 90 % interval and how often each
design wins. Then the Kimi layer on `ascend-910b2-uncalibrated` beside it, what moved the ranking (each
mechanism of the calibrated chip switched off in turn, and the per-chunk busy time of each unit), and the
designs per token-head beside the measured 910B2 kernels (kda/validation/megagdn.csv) and the model's
prediction for those same kernels. Timing only, each design's numerics probed on a few chunks of the gates
(`--gates`, Kimi's by default): a design that overflows on them is listed apart, never counted as a winner.
Deterministic (--seed). Each table says from how many samples on its win shares stay put. The nominal runs, the uncalibrated replays and the mechanisms switched off
are timed by the compiled event model (npusim/model/whatif/: the event model's figures, as
tests/studies/test_designs_compiled.py checks), each design's graphs recorded once; the critical paths, which
need a whole trace, by the event model itself.

    python benchmarks/designs.py --jobs 1          # what designs.md holds; its header says how long it took
    python benchmarks/designs.py --quick --samples 20   # without the 1M-token shape, fewer samples
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from designs_why import kernel_rows, mechanisms, ms, per_token_head  # noqa: E402

from npusim import load_profile  # noqa: E402

from kda.driver.inputs import GATES  # noqa: E402
from kda.programs import DESIGNS  # noqa: E402
from kda.settings import Settings  # noqa: E402
from kda.studies.evaluate import VersionResult, evaluate, retime  # noqa: E402
from kda.studies.probe import probe_results, why_unsafe  # noqa: E402
from kda.studies.uncertainty import propagate  # noqa: E402
from kda.views.table import markdown  # noqa: E402

CAL, UNCAL = "ascend-910b2", "ascend-910b2-uncalibrated"
KIMI = "Kimi layer (1 x 32 heads x 131072)"
MEGAGDN_SHAPE = "MegaGDN's measured shape (16 x 8192, 32 heads)"
WHY, KERNELS = "why", "kernels"           # the tasks beside the shapes (and UNCAL: the Kimi layer uncalibrated)
SAMPLES = 200            # profiles sampled per shape by default: each table says from how many its win shares settle
UNCAL_SAMPLES = 1000     # on the uncalibrated profile, whose wide ranges leave the shares unsettled for longer
MIXED = (65536, 32768, 16384, 8192, 4096, 4096, 2048, 1024, 512, 256)
SHAPES = {     # name -> (Settings fields, the kda.cli.run flags that give it)
    KIMI: (dict(heads=32, tokens=131072), "--heads 32 --tokens 131072"),
    "1M tokens (1 x 32 x 1048576)": (dict(heads=32, tokens=1 << 20), "--heads 32 --tokens 1048576"),
    "batch 64 x 4096 (32 heads)": (dict(batch=64, heads=32, tokens=4096), "--batch 64 --heads 32 --tokens 4096"),
    "mixed lengths (32 heads)": (dict(heads=32, seqlens=MIXED), "--heads 32 --seqlens " + ",".join(map(str, MIXED))),
    MEGAGDN_SHAPE: (dict(batch=16, heads=32, tokens=8192),
                                                       "--batch 16 --heads 32 --tokens 8192"),
}


def token_heads(shape: dict) -> int:
    tokens = sum(shape["seqlens"]) if "seqlens" in shape else shape.get("batch", 1) * shape["tokens"]
    return tokens * shape["heads"]


_RECORDED: dict[tuple, VersionResult] = {}      # a design's timing-only result per settings the graphs depend on


def timed(version: str, settings: Settings):
    """evaluate(version, settings) timing only, timed by the compiled event model (the report's figures equal
    the replay's: tests/studies/test_designs_benchmark.py), the design's graphs recorded once per process:
    they depend on the chunk size, the head sizes and the types, not on the shape or the interleave."""
    key = (version, settings.group, replace(settings, batch=1, heads=1, value_heads=None, chunks=1, tokens=None,
                                           seqlens=None, interleave=1))
    first = _RECORDED.get(key)
    if first is None:
        first = _RECORDED[key] = evaluate(version, settings, compiled=True)
        return first
    C = settings.chunk_size
    ex = replace(first.execution, chunks=max(-(-n // C) for n in (settings.seqlens or (settings.T,))),
                 seqlens=settings.seqlens)
    return retime(replace(first, settings=settings, execution=ex, probe=None), first.profile, compiled=True)


def record(shape: dict, gates: str = "kimi") -> dict[tuple[str, int], object]:
    """(design, interleave) -> its timing-only result on the calibrated chip (the graph recorded once), with
    the probe of its numerics on `gates` (kda/studies/probe.py)."""
    recs = {(v, il): timed(v, Settings(numerics=False, keep_trace=False, interleave=il, gates=gates, **shape))
            for v in DESIGNS for il in (1, 2)}
    probe_results(recs.values())
    return recs


def finite_cell(r) -> str:
    why = why_unsafe(r)
    return "yes" if why is None else why.replace("overflows in the probe: ", "**no**: ")


def on(recs: dict, profile) -> dict:
    """The same recordings replayed on another profile (the graphs do not depend on it)."""
    return {k: retime(r, profile, compiled=True) for k, r in recs.items()}


def best_interleave(recs: dict) -> dict[str, object]:
    """Each design at its better interleave on the profile the recordings were timed on (1 on a tie)."""
    return {v: min((recs[v, 1], recs[v, 2]), key=ms) for v in DESIGNS}


def _iv(x) -> str:
    return f"{x.median:,.2f} [{x.lo:,.2f}, {x.hi:,.2f}]"


def shape_section(name: str, shape: dict, flags: str, recs: dict, samples: int, seed: int, profile: str):
    """A shape's table on `profile`: nominal at interleave 1 and 2, the interval and win share at the better
    one. Returns (lines, uncertainty, the results sampled)."""
    best = best_interleave(recs)
    u = propagate(list(best.values()), samples, seed=seed, latency_only=True)
    wins, th = u.win_shares(), token_heads(shape)
    cells = []
    for v, r in best.items():
        iv = u.interval(v)
        ns = type(iv)(*(x * 1e3 / th for x in (iv.median, iv.lo, iv.hi, iv.nominal)))
        top = ", ".join(f"`{i.field}` {i.share:.0%} ({u.statuses.get(i.field, '?')})" for i in u.drivers(v))
        cells.append((v, finite_cell(r), f"{ms(recs[v, 1]):,.2f}", f"{ms(recs[v, 2]):,.2f}", r.settings.interleave,
                      _iv(type(iv)(*(x / 1e3 for x in (iv.median, iv.lo, iv.hi, iv.nominal)))),
                      _iv(ns), f"{wins[v]:.0%}" if v in wins else "not counted", top))
    order = sorted((v for v in best if v not in u.apart), key=lambda v: u.interval(v).median)
    gates = next(iter(best.values())).settings.gates
    prof = "" if profile == CAL else f" --profile {profile}"
    out = [f"### {name}" + ("" if profile == CAL else f", on `{profile}`"), "",
           f"`python -m kda.run --version all --no-numerics {flags}{prof} [--interleave 2] --uncertainty {samples}`",
           "", markdown(cells, ("design", f"finite on gates {gates}", "ms, interleave 1", "ms, interleave 2",
                                "sampled at interleave",
                                f"ms: median [90 %], {samples} samples", "ns per token-head: median [90 %]",
                                "wins", "spread decided by (Spearman rho^2)")),
           "", f"Ranking by median, of the designs that stay finite on gates {gates}: " +
           (" < ".join(f"{v} {u.interval(v).median / 1e3:,.1f}" for v in order) + " ms. Fastest in most samples: "
            f"**{max(wins, key=wins.get)}** ({max(wins.values()):.0%})." if wins else "none stays finite.") +
           ("" if not u.apart else " Not counted: " + "; ".join(f"{v} ({w})" for v, w in u.apart.items()) + "."),
           "", settled(u), ""]
    return out, u, best


def settled(u, tolerance: float = 0.02) -> str:
    """How many samples the win shares need: each share (as Uncertainty.win_shares counts it) from the first n
    samples against all of them, and the least n from which every one stays within `tolerance` of its final value."""
    counted = [v for v in u.versions if v not in u.apart]
    if not counted:
        return "No design stays finite: no win shares to settle."
    lat = np.stack([u.latencies[v]["pipelined"] for v in counted])
    lat = np.where(np.isfinite(lat), lat, np.inf)

    def shares(n: int) -> np.ndarray:
        best = lat[:, :n].min(axis=0)
        winners = (lat[:, :n] == best) & np.isfinite(best)
        return (winners / np.maximum(winners.sum(axis=0), 1)).sum(axis=1) / n

    sizes = [n for n in (10, 20, 50, 100, 200, 500, 1000, 2000) if n < u.samples] + [u.samples]
    if len(sizes) == 1:
        return f"Win shares over {u.samples} samples: too few to say from how many on they settle."
    gaps = {n: float(np.abs(shares(n) - shares(u.samples)).max()) for n in sizes}
    stable = next(n for n in sizes if all(gaps[m] <= tolerance for m in sizes if m >= n))
    return (f"Win shares from the first n samples against all {u.samples}, largest change of a share: "
            + ", ".join(f"n = {n}: {g:.1%}" for n, g in gaps.items() if n < u.samples)
            + f". Every share stays within {tolerance:.0%} of its final value from n = {stable} on.")


def rank_change(cal_u, unc_u) -> list[str]:
    """The Kimi layer's medians on both profiles, side by side."""
    def ranks(u):            # among the designs that stay finite; the others "-"
        order = sorted((v for v in u.versions if v not in u.apart), key=lambda v: u.interval(v).median)
        return {**{v: "-" for v in u.apart}, **{v: i + 1 for i, v in enumerate(order)}}
    rc, ru = ranks(cal_u), ranks(unc_u)
    cw, uw = cal_u.win_shares(), unc_u.win_shares()
    share = lambda w, v: f"{w[v]:.0%}" if v in w else "not counted"
    cells = [(v, f"{ru[v]}", _iv(_ms(unc_u.interval(v))), share(uw, v), f"{rc[v]}", _iv(_ms(cal_u.interval(v))),
              share(cw, v), f"{cal_u.interval(v).median / unc_u.interval(v).median:.2f}x")
             for v in sorted(cal_u.versions, key=lambda v: (rc[v] == "-", cal_u.interval(v).median))]
    return ["## The Kimi layer on both profiles", "",
            "Median and 90 % interval (ms) of each design at its better interleave, each profile's own ranges "
            "sampled (the uncalibrated profile's are the wide ASSUMED per-instruction overheads).", "",
            markdown(cells, ("design", "rank, uncalibrated", "uncalibrated ms", "wins", "rank, calibrated",
                             "calibrated ms", "wins", "calibrated / uncalibrated")), ""]


def _ms(iv):
    return type(iv)(*(x / 1e3 for x in (iv.median, iv.lo, iv.hi, iv.nominal)))


def commit() -> str:
    try:
        return subprocess.run(["git", "log", "-1", "--format=%h %s"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=True).stdout.strip()[:90]
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def shape_task(name: str, samples: int, seed: int, gates: str = "kimi") -> dict:
    """One shape's section on the calibrated chip; WHY: the Kimi layer on the uncalibrated profile and what
    moved its ranking (recorded again, so that it runs beside the others); KERNELS: the measured kernels'
    predictions."""
    t = time.perf_counter()
    if name == KERNELS:
        return dict(name=name, kernels=kernel_rows(load_profile(CAL), samples, seed), seconds=time.perf_counter() - t)
    shape, flags = SHAPES[KIMI if name in (UNCAL, WHY) else name]
    recs = record(shape, gates)
    if name == UNCAL:
        sec, unc_u, _ = shape_section(KIMI, shape, flags, on(recs, load_profile(UNCAL)), samples, seed, UNCAL)
        lines = sec + [f"({time.perf_counter() - t:,.0f} s)", ""]
        print("\n".join(lines), flush=True)
        return dict(name=name, lines=lines, unc_u=unc_u)
    if name == WHY:
        why = mechanisms(recs, shape, load_profile(CAL), load_profile(UNCAL))
        why += [f"({time.perf_counter() - t:,.0f} s)", ""]
        print("\n".join(why), flush=True)
        return dict(name=name, why=why)
    lines, u, _ = shape_section(name, shape, flags, recs, samples, seed, CAL)
    lines += [f"({time.perf_counter() - t:,.0f} s)", ""]
    print("\n".join(lines), flush=True)
    return dict(name=name, lines=lines, u=u, token_heads=token_heads(shape))


def samples_for(name: str, samples: int, uncalibrated: int) -> int:
    """The profiles a task samples: the uncalibrated profile's wide ranges need more for its win shares to settle;
    the 1M-token shape (8x the Kimi layer's replay, its shares settled as early as the other shapes') a quarter."""
    return uncalibrated if name == UNCAL else max(4, samples // 4) if "1M" in name else samples


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="leave out the 1M-token shape")
    p.add_argument("--samples", type=int, default=SAMPLES, help=f"profiles sampled on each shape on the calibrated "
                   f"chip (default {SAMPLES}; the 1M-token shape a quarter of them)")
    p.add_argument("--uncalibrated-samples", type=int, default=UNCAL_SAMPLES, help="profiles sampled on the Kimi "
                   f"layer on {UNCAL} (default {UNCAL_SAMPLES})")
    p.add_argument("--seed", type=int, default=0, help="seed of the Latin hypercube (default 0)")
    p.add_argument("--jobs", type=int, default=1, help="shapes run in parallel processes (default 1)")
    p.add_argument("--gates", default="kimi", choices=GATES, help="the gate family the designs' numerics are "
                   "probed on (default kimi: Kimi Linear's -5 sigmoid gate); timing does not depend on it")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "designs.md")
    args = p.parse_args(argv)
    if min(args.samples, args.uncalibrated_samples) < 4 or args.jobs < 1:
        p.error(f"--samples and --uncalibrated-samples must be at least 4 and --jobs at least 1, got {args.samples}, "
                f"{args.uncalibrated_samples} and {args.jobs}")
    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    cmd = f"python benchmarks/designs.py --jobs {args.jobs}" + (" --quick" if args.quick else "") + \
          (f" --gates {args.gates}" if args.gates != "kimi" else "") + \
          (f" --samples {args.samples}" if args.samples != SAMPLES else "") + \
          (f" --uncalibrated-samples {args.uncalibrated_samples}" if args.uncalibrated_samples != UNCAL_SAMPLES else "") + \
          (f" --seed {args.seed}" if args.seed else "")
    names = [n for n in SHAPES if not (args.quick and "1M" in n)]
    slow_first = sorted(names + [UNCAL, WHY, KERNELS], key=lambda n: ("1M" not in n, n != WHY, n != KIMI))
    tasks = [(n, samples_for(n, args.samples, args.uncalibrated_samples), args.seed, args.gates) for n in slow_first]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            done = {r["name"]: r for r in pool.map(shape_task, *zip(*tasks))}
    else:
        done = {r["name"]: r for r in map(shape_task, *zip(*tasks))}
    wall, load1 = time.perf_counter() - t0, os.getloadavg()[0]
    lines = ["# Designs by shape, on the calibrated chip, with intervals", "",
             f"`{cmd}` (commit {commit()}): {wall:,.0f} s of wall clock after the imports, on {os.cpu_count()} cores, load average "
             f"{load0:.1f} at the start and {load1:.1f} at the end. `{CAL}` (calibrated) unless said, bf16, timing "
             "only. Medians and 90 % intervals over profiles drawn from the profile's ranges (Latin hypercube, "
             f"log-uniform, seed {args.seed}; {args.samples} samples on each shape, the 1M-token shape "
             f"{samples_for('1M', args.samples, 0)}, the uncalibrated profile {args.uncalibrated_samples}); "
             "'wins': the share of those samples in which the design is the fastest of those that stay finite on "
             f"gates {args.gates} (each design's numerics probed on 2 chunks of them; the others are not counted).",
             ""]
    for n in names:
        lines += done[n]["lines"]
    kimi, meg, why, unc = done[KIMI], done.get(MEGAGDN_SHAPE), done[WHY], done[UNCAL]
    lines += unc["lines"] + rank_change(kimi["u"], unc["unc_u"]) + why["why"]
    pth = per_token_head(done[KERNELS]["kernels"], kimi["u"], kimi["token_heads"], meg and meg["u"],
                         meg and meg["token_heads"], args.samples)
    lines += pth + [f"({done[KERNELS]['seconds']:,.0f} s)", ""]
    print("\n".join(rank_change(kimi["u"], unc["unc_u"]) + pth), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
