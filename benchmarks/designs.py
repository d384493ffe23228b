"""Which design wins, for which shape, on the calibrated chip, with intervals: every design (v1-v6, fla,
mform) timed on the README's four shapes (and on MegaGDN's measured shape), each with and without two
sequences interleaved per core; then, at each design's better interleave, N profiles drawn from the
calibrated profile's ranges (what `python -m kda.run --version all --no-numerics ... --uncertainty N` does:
the graphs recorded once, timing replayed per sample), giving a median, a 90 % interval and how often each
design wins. Then the Kimi layer on `ascend-910b2-uncalibrated` beside it, what moved the ranking (each
mechanism of the calibrated chip switched off in turn, and the per-chunk busy time of each unit), and the
designs per token-head beside the measured 910B2 kernels (kda/validation/megagdn.csv) and the model's
prediction for those same kernels. Timing only; deterministic (--seed).

    python benchmarks/designs.py --jobs 2      # what designs.md holds: 32 samples, 1M tokens included; 12 min on 2 cores
    python benchmarks/designs.py --quick --samples 12   # without the 1M-token shape, fewer samples
    python benchmarks/designs.py --samples 8   # fewer samples (the Kimi layer 8, the 1M-token shape 4, others 4)
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from npusim import load_profile  # noqa: E402
from kda.programs import DESIGNS  # noqa: E402
from kda.settings import Settings  # noqa: E402
from kda.studies.evaluate import evaluate, retime
from kda.studies.uncertainty import propagate  # noqa: E402
from kda.views.table import markdown  # noqa: E402

from designs_why import kernel_rows, mechanisms, ms, per_token_head  # noqa: E402

CAL, UNCAL = "ascend-910b2", "ascend-910b2-uncalibrated"
KIMI = "Kimi layer (1 x 32 heads x 131072)"
MEGAGDN_SHAPE = "MegaGDN's measured shape (16 x 8192, 32 heads)"
WHY, KERNELS = "why", "kernels"           # the tasks beside the shapes (and UNCAL: the Kimi layer uncalibrated)
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


def record(shape: dict) -> dict[tuple[str, int], object]:
    """(design, interleave) -> its timing-only result on the calibrated chip (the graph recorded once)."""
    return {(v, il): evaluate(v, Settings(numerics=False, keep_trace=False, interleave=il, **shape))
            for v in DESIGNS for il in (1, 2)}


def on(recs: dict, profile) -> dict:
    """The same recordings replayed on another profile (the graphs do not depend on it)."""
    return {k: retime(r, profile) for k, r in recs.items()}


def best_interleave(recs: dict) -> dict[str, object]:
    """Each design at its better interleave on the profile the recordings were timed on (1 on a tie)."""
    return {v: min((recs[v, 1], recs[v, 2]), key=ms) for v in DESIGNS}


def _iv(x) -> str:
    return f"{x.median:,.2f} [{x.lo:,.2f}, {x.hi:,.2f}]"


def shape_section(name: str, shape: dict, flags: str, recs: dict, samples: int, seed: int, profile: str):
    """A shape's table on `profile`: nominal at interleave 1 and 2, the interval and win share at the better
    one. Returns (lines, uncertainty, the results sampled)."""
    best = best_interleave(recs)
    u = propagate(list(best.values()), samples, seed=seed)
    wins, th = u.win_shares(), token_heads(shape)
    cells = []
    for v, r in best.items():
        iv = u.interval(v)
        ns = type(iv)(*(x * 1e3 / th for x in (iv.median, iv.lo, iv.hi, iv.nominal)))
        top = ", ".join(f"`{i.field}` {i.share:.0%} ({u.statuses.get(i.field, '?')})" for i in u.drivers(v))
        cells.append((v, f"{ms(recs[v, 1]):,.2f}", f"{ms(recs[v, 2]):,.2f}", r.settings.interleave,
                      _iv(type(iv)(*(x / 1e3 for x in (iv.median, iv.lo, iv.hi, iv.nominal)))),
                      _iv(ns), f"{wins[v]:.0%}", top))
    order = sorted(best, key=lambda v: u.interval(v).median)
    prof = "" if profile == CAL else f" --profile {profile}"
    out = [f"### {name}" + ("" if profile == CAL else f", on `{profile}`"), "",
           f"`python -m kda.run --version all --no-numerics {flags}{prof} [--interleave 2] --uncertainty {samples}`",
           "", markdown(cells, ("design", "ms, interleave 1", "ms, interleave 2", "sampled at interleave",
                                f"ms: median [90 %], {samples} samples", "ns per token-head: median [90 %]",
                                "wins", "spread decided by (Spearman rho^2)")),
           "", "Ranking by median: " + " < ".join(f"{v} {u.interval(v).median / 1e3:,.1f}" for v in order) +
           f" ms. Fastest in most samples: **{max(wins, key=wins.get)}** ({max(wins.values()):.0%}).", ""]
    return out, u, best


def rank_change(cal_u, unc_u) -> list[str]:
    """The Kimi layer's medians on both profiles, side by side."""
    def ranks(u):
        order = sorted(u.versions, key=lambda v: u.interval(v).median)
        return {v: i + 1 for i, v in enumerate(order)}
    rc, ru = ranks(cal_u), ranks(unc_u)
    cw, uw = cal_u.win_shares(), unc_u.win_shares()
    cells = [(v, f"{ru[v]}", _iv(_ms(unc_u.interval(v))), f"{uw[v]:.0%}", f"{rc[v]}", _iv(_ms(cal_u.interval(v))),
              f"{cw[v]:.0%}", f"{cal_u.interval(v).median / unc_u.interval(v).median:.2f}x")
             for v in sorted(cal_u.versions, key=lambda v: rc[v])]
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


def shape_task(name: str, samples: int, seed: int) -> dict:
    """One shape's section on the calibrated chip; WHY: the Kimi layer on the uncalibrated profile and what
    moved its ranking (recorded again, so that it runs beside the others); KERNELS: the measured kernels'
    predictions."""
    t = time.perf_counter()
    if name == KERNELS:
        return dict(name=name, kernels=kernel_rows(load_profile(CAL), samples, seed), seconds=time.perf_counter() - t)
    shape, flags = SHAPES[KIMI if name in (UNCAL, WHY) else name]
    recs = record(shape)
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


def samples_for(name: str, samples: int) -> int:
    """The Kimi layer and MegaGDN's shape (compared sample by sample with the kernels) get all the samples, the
    1M-token shape (8x the replay) a quarter, the others half."""
    return samples if name in (KIMI, UNCAL, WHY, KERNELS, MEGAGDN_SHAPE) else max(4, samples // (4 if "1M" in name else 2))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="leave out the 1M-token shape")
    p.add_argument("--samples", type=int, default=32, help="profiles sampled on the Kimi layer (default 32; the "
                   "1M-token shape a quarter of them, the other shapes half, at least 4)")
    p.add_argument("--seed", type=int, default=0, help="seed of the Latin hypercube (default 0)")
    p.add_argument("--jobs", type=int, default=1, help="shapes run in parallel processes (default 1)")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "designs.md")
    args = p.parse_args(argv)
    if args.samples < 4 or args.jobs < 1:
        p.error(f"--samples must be at least 4 and --jobs at least 1, got {args.samples} and {args.jobs}")
    t0 = time.perf_counter()
    cmd = "python benchmarks/designs.py" + (" --quick" if args.quick else "") + \
          (f" --samples {args.samples}" if args.samples != 32 else "") + (f" --seed {args.seed}" if args.seed else "")
    names = [n for n in SHAPES if not (args.quick and "1M" in n)]
    slow_first = sorted(names + [UNCAL, WHY, KERNELS], key=lambda n: ("1M" not in n, n != WHY, n != KIMI))
    tasks = [(n, samples_for(n, args.samples), args.seed) for n in slow_first]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            done = {r["name"]: r for r in pool.map(shape_task, *zip(*tasks))}
    else:
        done = {r["name"]: r for r in map(shape_task, *zip(*tasks))}
    lines = ["# Designs by shape, on the calibrated chip, with intervals", "",
             f"`{cmd}` (commit {commit()}); `{CAL}` (calibrated) unless said, bf16, timing only. "
             "Medians and 90 % intervals over profiles drawn from the profile's ranges (Latin hypercube, log-uniform, "
             f"seed {args.seed}; {args.samples} samples on the Kimi layer, fewer on the others as each table says); "
             "'wins': the share of those samples in which the design is the fastest.", ""]
    for n in names:
        lines += done[n]["lines"]
    kimi, meg, why, unc = done[KIMI], done.get(MEGAGDN_SHAPE), done[WHY], done[UNCAL]
    lines += unc["lines"] + rank_change(kimi["u"], unc["unc_u"]) + why["why"]
    pth = per_token_head(done[KERNELS]["kernels"], kimi["u"], kimi["token_heads"], meg and meg["u"],
                         meg and meg["token_heads"], args.samples)
    lines += pth + [f"({done[KERNELS]['seconds']:,.0f} s)", "", f"Wall time {time.perf_counter() - t0:,.0f} s."]
    print("\n".join(rank_change(kimi["u"], unc["unc_u"]) + pth), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
