"""How long a decode report over batches 1..256 takes, timing only (a benchmark, not a test).

    python benchmarks/decode_speed.py [--design step] [--heads 32] [--repeat 3]

In process: the settings checked, every step recorded (once per item shape), replayed on the event model and
rendered as the sweep's table (`python -m kda.decode --design step --batch 1-256 --no-numerics`, less the
interpreter's start and imports). Then the same command as a fresh process, start-up included.
"""
from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import time

from rich.console import Console


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--design", default="step")
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    from kda.decode import timing
    from kda.decode.study import DecodeSettings, evaluate
    from kda.views.render_decode import print_results
    s = DecodeSettings(designs=(a.design,), batches=tuple(range(1, 257)), heads=a.heads, numerics=False)
    walls = []
    for i in range(a.repeat):
        timing._record.cache_clear()
        timing._template.cache_clear()
        t0 = time.perf_counter()
        results = evaluate(s)
        print_results(results, s, Console(file=io.StringIO(), width=200))
        walls.append(time.perf_counter() - t0)
    print(f"{a.design}, B = 1..256, H = {a.heads}: {len(results)} steps; in process {min(walls):.2f} s "
          f"(fewest of {a.repeat}: {', '.join(f'{w:.2f}' for w in walls)})")
    cmd = [sys.executable, "-m", "kda.decode", "--design", a.design, "--batch", "1-256", "--heads", str(a.heads),
           "--no-numerics"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env={**os.environ})
    print(f"as a command ({' '.join(cmd[1:])}): {time.perf_counter() - t0:.2f} s, start-up and imports included")


if __name__ == "__main__":
    main()
