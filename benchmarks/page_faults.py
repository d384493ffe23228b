"""Page faults of the numerics with and without `npusim.keep_freed_memory()` (a benchmark, not a test: the
counts depend on the machine, its C library and whatever else runs on it).

    python benchmarks/page_faults.py [--runs 3]

Each mode runs in a fresh process: v3's pipelined numerics over 8 heads x 512 tokens (d = 128, bf16 hand-offs),
twice to warm up, then once more counting the minor page faults (getrusage). The worker thread's tensors come
from a glibc arena whose freed top goes back to the system, so by default a later run faults on fresh pages
again; with the thresholds raised (npusim/record/memory.py) it reuses what it freed. The fewest of `--runs`
processes per mode is kept: other jobs only add faults.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import resource, sys
import npusim
from kda.driver.inputs import make_inputs
from kda.driver.execute import ChunkLoop, Types, execute
kept = npusim.keep_freed_memory() if sys.argv[1] == "keep" else None
x = make_inputs(1, 512, 8, 128, 128, "slow", 0)
run = lambda: execute(x.q, x.k, x.v, x.g, x.beta, types=Types(transfer="bf16"), loop=ChunkLoop(pipeline=True))
run()
run()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
run()
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", CHILD, mode], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    return out[0], int(out[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3, help="processes per mode; the fewest faults is kept")
    args = p.parse_args(argv)
    if not sys.platform.startswith("linux"):
        print("glibc's malloc only: nothing to measure here")
        return 0
    best: dict[str, int] = {}
    for mode in ("default", "keep") * args.runs:
        kept, n = faults(mode)
        best[mode] = min(n, best.get(mode, n))
        if mode == "keep" and kept != "True":
            print("keep_freed_memory() returned False: the C library is not glibc or refused")
    ratio = best["default"] / max(best["keep"], 1)
    print(f"minor page faults of one run (fewest of {args.runs}): default {best['default']}, kept "
          f"{best['keep']}: {ratio:.1f}x fewer")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
