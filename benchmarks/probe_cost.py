"""What the numeric probe adds to a timing-only `--version all`: the README's command for the Kimi layer run
with the probe (the default, 2 chunks of each design's numerics on Kimi's gates) and without it
(`--probe-chunks 0`), alternately, in fresh processes; the ratio of the medians, and of each pair. Then, in
one process, the probe of the eight designs alone beside the timing it checks (the recordings and replays of
`--version all`), each timed once more after a warm-up.

    python benchmarks/probe_cost.py                 # 3 pairs; writes benchmarks/results/probe_cost.md
    python benchmarks/probe_cost.py --pairs 5

A benchmark, not a test: on a shared machine the wall times move with the load (the load average is printed
before and after); the ratio of runs taken in turn is the figure to read.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

COMMAND = ["-m", "kda.run", "--version", "all", "--no-numerics", "--heads", "32", "--tokens", "131072",
           "--interleave", "2", "--gates", "kimi"]
SHOWN = "python " + " ".join(COMMAND)


def wall(extra: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, *COMMAND, *extra], check=True, stdout=subprocess.DEVNULL, cwd=ROOT,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    return time.perf_counter() - t


def in_process() -> tuple[float, float]:
    """(seconds of the timing of every design, seconds of the probe of every design), after a warm-up of both."""
    from kda.programs import DESIGNS
    from kda.settings import Settings
    from kda.studies.evaluate import evaluate
    from kda.studies import probe as probe_module
    s = Settings(heads=32, tokens=131072, interleave=2, gates="kimi", numerics=False, keep_trace=False)
    small = Settings(chunks=2, gates="kimi", numerics=False)
    for v in DESIGNS:                                 # warm-up: imports, first-call costs
        probe_module.probe(v, small)
    t = time.perf_counter()
    results = [evaluate(v, s) for v in DESIGNS]
    timing = time.perf_counter() - t
    probe_module._probe.cache_clear()
    probe_module._inputs.cache_clear()
    t = time.perf_counter()
    probe_module.probe_results(results)
    return timing, time.perf_counter() - t


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=3, help="runs with and without the probe, in turn (default 3)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "probe_cost.md")
    args = p.parse_args(argv)
    load0 = os.getloadavg()
    pairs = []
    for i in range(args.pairs):
        off, on = wall(["--probe-chunks", "0"]), wall([])
        pairs.append((off, on))
        print(f"pair {i + 1}: without {off:.1f} s, with {on:.1f} s, ratio {on / off:.3f}", flush=True)
    timing, probe = in_process()
    load1 = os.getloadavg()
    off = statistics.median(a for a, _ in pairs)
    on = statistics.median(b for _, b in pairs)
    lines = ["# What the numeric probe adds to the Kimi layer's timing-only `--version all`", "",
             f"`python benchmarks/probe_cost.py --pairs {args.pairs}`; {os.cpu_count()} cores, load average "
             f"{load0[0]:.1f} before and {load1[0]:.1f} after (a shared machine: wall times are noisy, the ratio "
             "of runs taken in turn is the figure).", "",
             f"`{SHOWN}` with the probe (default: 2 chunks of each design's numerics) and with `--probe-chunks 0`:",
             "", "| pair | without the probe, s | with it, s | ratio |", "|---:|---:|---:|---:|"]
    lines += [f"| {i + 1} | {a:.1f} | {b:.1f} | {b / a:.3f} |" for i, (a, b) in enumerate(pairs)]
    lines += ["", f"Medians: {off:.1f} s without, {on:.1f} s with: **{on / off - 1:+.1%}**.", "",
              f"In one process: the eight designs' recording and replay {timing:.1f} s, their probe "
              f"{probe:.2f} s (**{probe / timing:.1%}** of it).", ""]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
