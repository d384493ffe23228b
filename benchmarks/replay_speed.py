"""How many phases and syncs per second the event model replays (a benchmark, not a test).

    python benchmarks/replay_speed.py [--version v3] [--chunks 256] [--heads 8] [--profile ascend-910b2]

The phase graph is recorded once (one chunk of one head); the event model then replays it for every chunk
and head with no tensor math, once with the trace kept and once without.
"""
from __future__ import annotations

import argparse
import time

from kda.evaluate import Settings, evaluate
from npusim import build_template, load_profile, simulate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--version", default="v3")
    p.add_argument("--chunks", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--profile", default="ascend-910b2")
    a = p.parse_args()
    graph = evaluate(a.version, Settings(chunks=1, profile=a.profile), timing=False).execution.graph
    profile = load_profile(a.profile)
    tpl = build_template(graph, profile)
    print(f"{a.version} on {a.profile}: {a.chunks} chunks x {a.heads} heads, {tpl.n} nodes per chunk "
          f"({len(graph.phases)} phases, {len(graph.syncs)} syncs)")
    print(f"{'mode':<22}{'nodes':>10}{'wall s':>10}{'nodes/s':>12}")
    for label, kw in (("pipelined, trace", dict(trace=True)), ("pipelined, no trace", dict(trace=False)),
                      ("serial, no trace", dict(trace=False, serial=True))):
        t0 = time.perf_counter()
        simulate(tpl, profile, chunks=a.chunks, sequences=a.heads, **kw)
        wall = time.perf_counter() - t0
        nodes = tpl.n * a.chunks * a.heads
        print(f"{label:<22}{nodes:>10,}{wall:>10.2f}{nodes / wall:>12,.0f}")


if __name__ == "__main__":
    main()
