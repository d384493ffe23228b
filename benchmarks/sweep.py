"""Benchmark of `python -m kda.sweep`: 1000 timing-only points of the Kimi layer shape
(benchmarks/sweep_kimi.toml: 5 designs (v2, v3, v4, fla, v5) x 10 sync latencies x 4 chunk sizes x 5 interleave factors, 32 heads x
131072 tokens each) on a Dask LocalCluster of 2 workers, against the same points run one after another in one
process, and the scaling from 1 to 2 workers. A benchmark, not a test: it prints a table and writes it.

    python benchmarks/sweep.py                 # the full 1000 points once on 2 workers, then a sample of
                                               # them in-process, on 1 worker and on 2 (half an hour on a
                                               # loaded 2-core machine)
    python benchmarks/sweep.py --sample 10 --no-full      # a smoke run
    python benchmarks/sweep.py --out FILE.md   # default benchmarks/results/sweep.md

Whole-sweep times include starting the LocalCluster; no cache is used. The sample is drawn evenly at random
(seed 0) from the grid, so that it holds every design, chunk size and interleave factor in proportion.
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kda.sweep import load_spec, run_sweep, write_table  # noqa: E402


def timed(spec, workers: int) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = run_sweep(spec, workers=workers, cache=None)
    return time.perf_counter() - t0, out


def cluster_start_s() -> float:
    import logging
    from dask.distributed import Client, LocalCluster
    t0 = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None, silence_logs=logging.ERROR) as c:
        with Client(c):
            pass
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", type=Path, default=ROOT / "benchmarks" / "sweep_kimi.toml")
    ap.add_argument("--sample", type=int, default=60, help="points of the in-process / 1 / 2 worker comparison")
    ap.add_argument("--no-full", action="store_true", help="skip the full sweep on 2 workers")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "sweep.md")
    ap.add_argument("--table", type=Path, default=Path("/tmp/sweep_kimi.parquet"),
                    help="where the full sweep's table goes")
    args = ap.parse_args()
    spec = load_spec(args.spec)
    n = spec.size()
    load0 = os.getloadavg()
    lines = [f"# kda.sweep benchmark ({args.spec.relative_to(ROOT)})", "",
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}; load average before: {load0[0]:.2f} (other jobs share the cores).",
             "", "| run | points | wall s | points/s | failed points |", "|---|---:|---:|---:|---:|"]
    rows = {}

    def record(name, wall, out):
        rows[name] = (len(out.rows), wall)
        lines.append(f"| {name} | {len(out.rows)} | {wall:.1f} | {len(out.rows) / wall:.3f} | {out.failed} |")
        print(lines[-1], flush=True)

    start = cluster_start_s()
    print(f"LocalCluster of 2 workers: {start:.1f} s to start and stop", flush=True)
    if not args.no_full:
        wall, out = timed(spec, 2)
        record(f"all {n} points, LocalCluster of 2 workers", wall, out)
        write_table(out.rows, args.table)
    picked = sorted(random.Random(0).sample(range(n), args.sample))
    points = [spec.points()[i] for i in picked]

    class Sample:                     # the spec, restricted to the sampled points
        metrics, origin = spec.metrics, spec.origin
        fixed, axes, columns = spec.fixed, spec.axes, spec.columns

        @staticmethod
        def points():
            return [replace(p, index=k) for k, p in enumerate(points)]
    for workers, name in ((0, "in-process, one after another"), (1, "LocalCluster of 1 worker"),
                          (2, "LocalCluster of 2 workers")):
        wall, out = timed(Sample, workers)
        record(f"sample of {args.sample}: {name}", wall, out)
    pps = {k: v[0] / v[1] for k, v in rows.items()}
    serial = pps[f"sample of {args.sample}: in-process, one after another"]
    one = pps[f"sample of {args.sample}: LocalCluster of 1 worker"]
    two = pps[f"sample of {args.sample}: LocalCluster of 2 workers"]
    load1 = os.getloadavg()
    lines += ["", f"LocalCluster of 2 workers: {start:.1f} s to start and stop (included in the walls above).",
              f"Sample, 2 workers against in-process: {two / serial:.2f}x; scaling 1 -> 2 workers: {two / one:.2f}x.",
              ]
    if not args.no_full:
        full = pps[f"all {n} points, LocalCluster of 2 workers"]
        lines.append(f"All {n} points on 2 workers against the sample in-process: {full / serial:.2f}x.")
    lines.append(f"Load average after: {load1[0]:.2f}.")
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
