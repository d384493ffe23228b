"""Which ranged fields of a profile move the ranking of the designs: each field alone at either end of its range
(every other field at its value), the designs' order at each end against the nominal one. The shape is the
README's recommendation, the Kimi layer (`python -m kda.run --version all --no-numerics --heads 32 --tokens
131072 --interleave 2`). A field moves the ranking where an end of its range changes the designs' order; the
pairs that swap are listed. Timing only: the graphs are recorded once and replayed per profile.

    python benchmarks/assumed_fields.py                    # the table docs/how-to/measure-assumed.md shows
    python benchmarks/assumed_fields.py --heads 32 --tokens 8192
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from npusim import load_profile  # noqa: E402
from kda.programs import DESIGNS  # noqa: E402
from kda.settings import Settings  # noqa: E402
from kda.studies.evaluate import evaluate, retime
from kda.studies.uncertainty import design_fields  # noqa: E402
from kda.views.table import markdown  # noqa: E402


def order(results: list, profile) -> list[tuple[str, float]]:
    """(design, layer latency in ms), fastest first, on `profile`."""
    timed = [(r.version, retime(r, profile).design_report.latency_us / 1000) for r in results]
    return sorted(timed, key=lambda x: x[1])


def swaps(nominal: list[str], moved: list[str]) -> list[str]:
    """The pairs whose order differs from the nominal one, as "b before a" (a was first)."""
    pos = {v: i for i, v in enumerate(moved)}
    return [f"{b} before {a}" for i, a in enumerate(nominal) for b in nominal[i + 1:] if pos[b] < pos[a]]


def table(results: list, profile) -> list[str]:
    base = order(results, profile)
    names = [v for v, _ in base]
    rows = []
    for f in design_fields(profile):
        cells = []
        for end in (f.lo, f.hi):
            moved = order(results, profile.replace(**{f.field.replace(".", "__", 1): end}))
            changed = swaps(names, [v for v, _ in moved])
            cells.append(f"{end:g}: " + ("; ".join(changed) if changed else "no change"))
        moves = any(not c.endswith("no change") for c in cells)
        rows.append([f"`{f.field}`", profile.status(f.field), f"{f.value:g} in [{f.lo:g}, {f.hi:g}]", *cells,
                     "**yes**" if moves else "no"])
    head = "Nominal order: " + ", ".join(f"{v} {ms:.1f} ms" for v, ms in base) + "."
    return [head, "", markdown(rows, ("field", "status", "value in range", "at the low end", "at the high end",
                                      "moves the ranking"))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--tokens", type=int, default=131072)
    p.add_argument("--interleave", type=int, default=2)
    p.add_argument("--profile", default="ascend-910b2")
    a = p.parse_args(argv)
    settings = Settings(numerics=False, keep_trace=False, heads=a.heads, tokens=a.tokens, interleave=a.interleave,
                        profile=a.profile)
    results = [evaluate(v, settings) for v in DESIGNS]
    print("\n".join(table(results, load_profile(a.profile))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
