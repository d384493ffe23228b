"""Benchmark of a sweep's profile axes run as one batch per design and shape (recorded once, each profile timed
by the compiled event model) against every point evaluated on its own (replayed by the event model): both in
this process, one after the other in one run, no cache, the rows checked equal. A benchmark, not a test: it prints one line.

    python benchmarks/sweep_batch.py                               # benchmarks/sweep_profile.toml
    python benchmarks/sweep_batch.py --spec benchmarks/sweep_kimi.toml
    python benchmarks/sweep_batch.py --spec benchmarks/sweep_overlap.toml   # every column, the overlap metrics
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kda.sweep import load_spec, run_sweep  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", type=Path, default=ROOT / "benchmarks" / "sweep_profile.toml")
    args = ap.parse_args()
    spec = load_spec(args.spec)
    load = os.getloadavg()[0]
    walls = {}
    for batch in (False, True):
        t0 = time.perf_counter()
        out = run_sweep(spec, workers=0, cache=None, batch=batch)
        walls[batch] = (time.perf_counter() - t0, out.rows)
    same = walls[True][1] == walls[False][1]
    print(f"{spec.size()} points in-process: per point {walls[False][0]:.1f} s, batched {walls[True][0]:.1f} s, "
          f"{walls[False][0] / walls[True][0]:.2f}x faster; rows identical: {same}; "
          f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
