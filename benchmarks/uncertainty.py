"""Speed of the uncertainty study (the aim: 200 samples of the Kimi layer in a few minutes). A benchmark,
not a test: it prints a table and writes it to a file.

    python benchmarks/uncertainty.py                   # v3, 32 heads x 131072 tokens, 200 samples
    python benchmarks/uncertainty.py --samples 20      # a smoke run
    python benchmarks/uncertainty.py --out FILE.md     # default benchmarks/results/uncertainty.md

What `python -m kda.run --no-numerics --heads 32 --tokens 131072 --version v3 --uncertainty 200` does: the
phase graph recorded once, then the timing replayed under each sampled profile. Wall time depends on what
else the machine runs; CPU time (this process) is the figure to compare.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--tokens", type=int, default=131072)
    p.add_argument("--version", default="v3")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "uncertainty.md")
    a = p.parse_args()

    from kda.settings import Settings
    from kda.studies.evaluate import evaluate
    from kda.studies.uncertainty import propagate

    w0, c0 = time.perf_counter(), time.process_time()
    result = evaluate(a.version, Settings(heads=32, tokens=a.tokens, numerics=False, keep_trace=False))
    u = propagate([result], a.samples, seed=0)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    iv = u.interval(a.version)
    top = ", ".join(f"{i.field} {i.share:.0%}" for i in u.influences(a.version)[:2])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows = [
        ("what", "measured", "target"),
        (f"{a.samples} samples, {a.version}, 32 heads x {a.tokens} tokens, timing only",
         f"{cpu:.0f} s CPU, {wall:.0f} s wall (load average {load:.1f})", "a few minutes"),
        ("  per sample", f"{cpu / a.samples:.2f} s CPU", ""),
        ("  layer latency: shipped profile, median, 90 % interval",
         f"{iv.nominal / 1000:.2f} ms, {iv.median / 1000:.2f} ms, [{iv.lo / 1000:.2f}, {iv.hi / 1000:.2f}] ms", ""),
        ("  decided by (Spearman rho^2)", top, ""),
    ]
    head = (f"`python benchmarks/uncertainty.py --samples {a.samples} --tokens {a.tokens}` on {platform.machine()}, "
            f"{os.cpu_count()} CPUs, {dt.date.today()}")
    from kda.views.table import markdown
    text = "\n".join([head, "", markdown(rows[1:], rows[0])]) + "\n"
    print(text)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)


if __name__ == "__main__":
    main()
