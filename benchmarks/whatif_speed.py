"""What-ifs at speed: N sampled profiles of a shape for every design, timed all at once (kda/studies/timing.py),
against the per-sample replay of the event model, in one run.

    python benchmarks/whatif_speed.py [--samples 1000] [--replays 1] [--retime-samples 16] [--gates kimi]
                                      [--heads 32 --tokens 131072 --interleave 2] [--designs v1,v2,...] [--out FILE]

Per design: the nominal run (recorded), the N samples timed at once (wall clock, and the CPU time of every
thread), how each (sample, pass, mode) was timed, and `--replays` samples replayed by the event model as one
profile's replay does (kda.studies.evaluate.retime): their time gives the speed-up, their values are compared
with the fast path's (relative 1e-9). `--retime-samples` samples are also timed by re-timing the recorded order
first (DesignTimer(retime=True)): the share it accepts says how often a sampled profile keeps every decision
of the nominal replay, and its time against the compiled replay's on the same samples says which way is
faster. Then the win shares (as `--uncertainty` counts them) from the first N samples against all of them:
how many samples the shares need to settle. The machine is shared: the load average is printed with the
figures.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from npusim.errors import NpuSimError  # noqa: E402
from npusim.fit.uncertainty import sample_profiles, sample_values  # noqa: E402
from npusim.model.whatif import RETIMED, Ways  # noqa: E402

from kda.programs import DESIGNS  # noqa: E402
from kda.settings import Settings  # noqa: E402
from kda.studies.evaluate import evaluate, retime  # noqa: E402
from kda.studies.probe import probe_results, why_unsafe  # noqa: E402
from kda.studies.timing import timer  # noqa: E402
from kda.studies.uncertainty import _metrics, check_samples, design_fields  # noqa: E402


def _clock():
    return time.perf_counter(), time.process_time()


def _since(start) -> tuple[float, float]:
    wall, cpu = _clock()
    return wall - start[0], cpu - start[1]


def _retime_probe(r, profiles) -> tuple[float, float, float]:
    """(share of the (sample, pass, mode) timings re-timing accepts, its time, the compiled replay's time) on
    `profiles`."""
    if not profiles:
        return float("nan"), 0.0, 0.0
    t = _clock()
    got = timer(r, retime=True).time(profiles)
    slow = _since(t)[0]
    t = _clock()
    timer(r).time(profiles)
    fast = _since(t)[0]
    return got.ways.counts[RETIMED] / max(got.ways.total, 1), slow, fast


def _design(v: str, settings: Settings, a) -> dict:
    t = _clock()
    r = evaluate(v, settings)
    nominal = _since(t)[0]
    fields = design_fields(r.profile)
    profiles = sample_profiles(r.profile, fields, sample_values(fields, a.samples, 0))
    t = _clock()
    got = timer(r).time(profiles)
    wall, cpu = _since(t)
    t = _clock()
    worst = 0.0
    for i in range(a.replays):
        want = _metrics(retime(r, profiles[i]))
        for m, arr in (("pipelined", got.latency_us), ("serial", got.serial_us), ("bound", got.bound_us)):
            worst = max(worst, abs(arr[i] / want[m] - 1))
    replay = _since(t)[0] / max(a.replays, 1)
    share, slow, fast = _retime_probe(r, profiles[:a.retime_samples])
    probe_results([r])
    return dict(v=v, nominal=nominal, wall=wall, cpu=cpu, replay=replay, worst=worst, ways=got.ways,
                share=share, slow=slow, fast=fast, notes=got.notes, latency=got.latency_us, unsafe=why_unsafe(r))


def win_shares(rows: list[dict], n: int) -> dict[str, float]:
    """Each design's share of the first n samples in which it is the fastest (pipelined; ties split), among
    those that stay finite on the run's gates (as Uncertainty.win_shares counts them)."""
    counted = [d for d in rows if d["unsafe"] is None]
    if not counted:
        return {}
    lat = np.stack([np.where(np.isfinite(d["latency"][:n]), d["latency"][:n], np.inf) for d in counted])
    winners = lat == lat.min(axis=0)
    return {d["v"]: float(x) for d, x in zip(counted, (winners / winners.sum(axis=0)).sum(axis=1) / n)}


def convergence(rows: list[dict], samples: int, tolerance: float = 0.02) -> list[str]:
    """The win shares from the first N samples against those from all of them; the least N from which on
    every share stays within `tolerance` of the final one."""
    final = win_shares(rows, samples)
    sizes = [n for n in (10, 20, 50, 100, 200, 300, 500, 700, 1000, 2000, 5000) if n < samples] + [samples]
    gaps = {n: max((abs(win_shares(rows, n)[v] - x) for v, x in final.items()), default=0.0) for n in sizes}
    stable = next(n for n in sizes if all(gaps[m] <= tolerance for m in sizes if m >= n))
    shares = ", ".join(f"{v} {x:.1%}" for v, x in final.items())
    ends = {n: max(abs(np.percentile(d["latency"][:n], q) / np.percentile(d["latency"], q) - 1)
                   for d in rows for q in (5, 95)) for n in sizes}
    return ["", f"Win shares over the {samples} samples (pipelined, among the designs that stay finite on the "
            f"gates; the others: {', '.join(d['v'] for d in rows if d['unsafe'] is not None) or 'none'}): {shares}. "
            "Largest change of a share from the first N samples to all of them: "
            + ", ".join(f"N = {n}: {g:.1%}" for n, g in gaps.items())
            + f". Every share stays within {tolerance:.0%} of its final value from N = {stable} on. Largest "
            "relative change of a design's 90 % interval's end (5th or 95th percentile of the pipelined "
            "latency): " + ", ".join(f"N = {n}: {g:.1%}" for n, g in ends.items()) + "."]


def _row(d: dict, samples: int) -> str:
    ratio = f"{d['slow'] / d['fast']:.1f}x" if d["fast"] else "-"
    return (f"| {d['v']} | {d['nominal']:.1f} | {d['wall']:.1f} | {d['cpu']:.1f} | {d['replay']:.2f} | "
            f"{d['replay'] * samples / d['wall']:.0f}x | {d['share']:.0%} | {ratio} |")


def _text(rows: list[dict], a, load0, load1) -> str:
    shape = f"--heads {a.heads} --tokens {a.tokens} --interleave {a.interleave}"
    ways = Ways()
    for d in rows:
        ways.merge(d["ways"])
    wall, cpu = sum(d["wall"] for d in rows), sum(d["cpu"] for d in rows)
    nominal, replay = sum(d["nominal"] for d in rows), sum(d["replay"] for d in rows)
    worst = max(d["worst"] for d in rows)
    lines = [f"# What-ifs at speed: {a.samples} sampled profiles, {shape}", "",
             f"`python benchmarks/whatif_speed.py --samples {a.samples} --replays {a.replays} --retime-samples "
             f"{a.retime_samples} {shape}{'' if a.gates == 'kimi' else ' --gates ' + a.gates}"
             f"{'' if a.profile == 'ascend-910b2' else ' --profile ' + a.profile}` ({os.cpu_count()} cores, shared: load average {load0:.1f} at the start, "
             f"{load1:.1f} at the end; seconds of wall clock unless said, the speed-up and the ratios measured in "
             f"this one run).", "",
             "| design | nominal run (recorded) | samples timed at once | their CPU time (all threads) | one sample "
             "replayed by the event model | speed-up | re-timing accepts | re-timing's time / the compiled "
             "replay's |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [_row(d, a.samples) for d in rows]
    lines += ["", f"All designs: {nominal:.1f} s nominal + {wall:.1f} s for the {a.samples} samples ({cpu:.1f} s of "
              f"CPU time); replayed one by one by the event model, about {replay * a.samples:.0f} s "
              f"({replay * a.samples / wall:.0f}x longer). Timings: {ways.line()}. Largest relative difference "
              f"from the event model's replay on the replayed samples: {worst:.1e}.",
              "", "'re-timing accepts': the share of the first samples' (sample, pass, pipelined/serial) timings "
              "that keep every decision of the nominal replay (its order of events on each unit and link, its "
              "bandwidth shares, its slot grants), which re-timing then times without replaying; the others "
              "change one and are replayed."]
    lines += convergence(rows, a.samples)
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--replays", type=int, default=1, help="samples replayed by the event model per design")
    ap.add_argument("--retime-samples", type=int, default=16, help="samples re-timed first, per design")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=131072)
    ap.add_argument("--interleave", type=int, default=2)
    ap.add_argument("--designs", default=",".join(DESIGNS))
    ap.add_argument("--profile", default="ascend-910b2")
    ap.add_argument("--gates", default="kimi", help="the gates each design's numerics are probed on (a design "
                    "that overflows on them is not counted in the win shares)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    try:
        check_samples(a.samples, "--samples")
        if not 0 <= a.replays <= a.samples or not 0 <= a.retime_samples <= a.samples:
            raise ValueError("--replays and --retime-samples take 0 to --samples")
    except (ValueError, NpuSimError) as err:
        print(f"whatif_speed: {err}", file=sys.stderr)
        return 2
    load0 = os.getloadavg()[0]
    settings = Settings(heads=a.heads, tokens=a.tokens, interleave=a.interleave, numerics=False,
                        keep_trace=False, record=True, gates=a.gates, profile=a.profile)
    rows = []
    for v in a.designs.split(","):
        d = _design(v, settings, a)
        rows.append(d)
        print(f"{v}: nominal {d['nominal']:.1f} s, {a.samples} samples {d['wall']:.1f} s ({d['cpu']:.1f} s CPU), "
              f"one replay {d['replay']:.2f} s; {d['ways'].line()}; re-timing accepts {d['share']:.0%}",
              flush=True)
    text = _text(rows, a, load0, os.getloadavg()[0])
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0 if max(d["worst"] for d in rows) <= 1e-9 else 1


if __name__ == "__main__":
    raise SystemExit(main())
