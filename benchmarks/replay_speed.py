"""How many phases and syncs per second the event model replays (a benchmark, not a test).

    python benchmarks/replay_speed.py [--version v3] [--chunks 256] [--heads 32] [--profile ascend-910b2]

The phase graph is recorded once (one chunk of one head); the event model then replays it for every chunk
and head with no tensor math. "per core" simulates every AI core; "by class" simulates one core per
class of cores holding the same number of heads (the default: npusim/model/engine.py) and copies its trace.
"""
from __future__ import annotations

import argparse
import time

from kda.settings import Settings
from kda.studies.evaluate import evaluate
from npusim import build_template, load_profile, simulate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--version", default="v3")
    p.add_argument("--chunks", type=int, default=256)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--profile", default="ascend-910b2")
    a = p.parse_args()
    graph = evaluate(a.version, Settings(chunks=1, profile=a.profile), timing=False).execution.graph
    profile = load_profile(a.profile)
    tpl = build_template(graph, profile)
    nodes = tpl.n * a.chunks * a.heads
    print(f"{a.version} on {a.profile}: {a.chunks} chunks x {a.heads} heads = {nodes:,} phases and syncs "
          f"({len(graph.phases)} phases, {len(graph.syncs)} syncs per chunk)")
    print(f"{'mode':<32}{'wall s':>8}{'phases+syncs/s':>16}  makespan us")
    for label, kw in (("pipelined, per core, trace", dict(symmetric=False)),
                      ("pipelined, per core", dict(symmetric=False, trace=False)),
                      ("pipelined, by class, trace", dict()),
                      ("pipelined, by class", dict(trace=False)),
                      ("serial, per core", dict(symmetric=False, trace=False, serial=True)),
                      ("serial, by class", dict(trace=False, serial=True))):
        t0 = time.perf_counter()
        run = simulate(tpl, profile, chunks=a.chunks, sequences=a.heads, **kw)
        wall = time.perf_counter() - t0
        print(f"{label:<32}{wall:>8.2f}{nodes / wall:>16,.0f}  {run.makespan_us:,.1f}")


if __name__ == "__main__":
    main()
