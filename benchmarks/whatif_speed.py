"""What-ifs at speed: N sampled profiles of a shape for every design, timed all at once (kda/studies/whatif.py),
against the per-sample replay of the event model, in one run.

    python benchmarks/whatif_speed.py [--samples 1000] [--replays 2] [--heads 32 --tokens 131072 --interleave 2]
                                      [--designs v1,v2,...] [--out benchmarks/results/whatif_speed.md]

Per design: the nominal run (recorded), the N samples timed at once, how each (sample, pass, mode) was
timed (re-timed / compiled replay / event-model replay), and `--replays` samples replayed by the event model
as `--uncertainty` did before (kda.studies.evaluate.retime), whose times give the speed-up and are compared
with the fast path's (relative 1e-9). The machine is shared: the load average is printed with the figures.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from kda.programs import DESIGNS  # noqa: E402
from kda.settings import Settings  # noqa: E402
from kda.studies.evaluate import evaluate, retime
from kda.studies.uncertainty import _metrics, design_fields  # noqa: E402
from kda.studies.whatif import time_profiles  # noqa: E402
from npusim.fit.uncertainty import sample_profiles, sample_values  # noqa: E402
from npusim.model.whatif import Ways  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--replays", type=int, default=2, help="samples replayed by the event model per design")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=131072)
    ap.add_argument("--interleave", type=int, default=2)
    ap.add_argument("--designs", default=",".join(DESIGNS))
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    load0 = os.getloadavg()
    settings = Settings(heads=a.heads, tokens=a.tokens, interleave=a.interleave, numerics=False,
                        keep_trace=False, record=True)
    rows, total_fast, total_nominal, total_replay, ways = [], 0.0, 0.0, 0.0, Ways()
    worst = 0.0
    for v in a.designs.split(","):
        t = time.perf_counter()
        r = evaluate(v, settings)
        nominal = time.perf_counter() - t
        fields = design_fields(r.profile)
        profiles = sample_profiles(r.profile, fields, sample_values(fields, a.samples, 0))
        t = time.perf_counter()
        got = time_profiles(r, profiles)
        fast = time.perf_counter() - t
        t = time.perf_counter()
        for i in range(a.replays):
            want = _metrics(retime(r, profiles[i]))
            for m, arr in (("pipelined", got.latency_us), ("serial", got.serial_us), ("bound", got.bound_us)):
                worst = max(worst, abs(arr[i] / want[m] - 1))
        replay = (time.perf_counter() - t) / max(a.replays, 1)
        ways.merge(got.ways)
        total_fast, total_nominal, total_replay = total_fast + fast, total_nominal + nominal, total_replay + replay
        rows.append((v, nominal, fast, replay, replay * a.samples / fast, got.ways.line()))
        print(f"{v}: nominal {nominal:.1f} s, {a.samples} samples {fast:.1f} s, one replay {replay:.2f} s "
              f"(speed-up {replay * a.samples / fast:.0f}x); {got.ways.line()}", flush=True)
    load1 = os.getloadavg()
    shape = f"--heads {a.heads} --tokens {a.tokens} --interleave {a.interleave}"
    lines = [f"# What-ifs at speed: {a.samples} sampled profiles, {shape}", "",
             f"`python benchmarks/whatif_speed.py --samples {a.samples} --replays {a.replays} {shape}` "
             f"(2 cores, shared: load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end; times "
             f"in seconds of wall clock, the speed-up measured in this one run).", "",
             "| design | nominal run (recorded) | samples timed at once | one sample replayed | speed-up | "
             "how the (sample, pass, mode) timings were obtained |",
             "|---|---:|---:|---:|---:|---|"]
    for v, nominal, fast, replay, ratio, how in rows:
        lines.append(f"| {v} | {nominal:.1f} | {fast:.1f} | {replay:.2f} | {ratio:.0f}x | {how} |")
    lines += ["", f"All designs: {total_nominal:.1f} s nominal + {total_fast:.1f} s for the {a.samples} samples "
              f"(replayed one by one: about {total_replay * a.samples:.0f} s, {total_replay * a.samples / total_fast:.0f}x "
              f"longer). Timings: {ways.line()}. Largest relative difference from the event model's replay on the "
              f"replayed samples: {worst:.1e}."]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0 if worst <= 1e-9 else 1


if __name__ == "__main__":
    raise SystemExit(main())
