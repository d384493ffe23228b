"""Which design wins, for which shape, and where the ranking flips: every design (v1-v5, fla) timed on the
README's four shapes, each with and without two sequences interleaved per core, then the Kimi layer again
with each ASSUMED figure the ranking rests on moved over its range. Timing only (the graphs are recorded on
random inputs; the same figures as `python -m kda.run --no-numerics ...`).

    python benchmarks/designs.py            # about 10 min on 2 cores; writes benchmarks/results/designs.md
    python benchmarks/designs.py --quick    # without the 1M-token shape
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kda.studies.evaluate import Settings, evaluate  # noqa: E402
from kda.views.table import markdown  # noqa: E402
from kda.programs import DESIGNS  # noqa: E402

SHAPES = {     # name -> (Settings fields, the kda.cli.run flags that give it)
    "Kimi layer (1 x 32 heads x 131072)": (dict(heads=32, tokens=131072), "--heads 32 --tokens 131072"),
    "1M tokens (1 x 32 x 1048576)": (dict(heads=32, tokens=1 << 20), "--heads 32 --tokens 1048576"),
    "batch 64 x 4096 (32 heads)": (dict(batch=64, heads=32, tokens=4096), "--batch 64 --heads 32 --tokens 4096"),
    "mixed lengths (32 heads)": (dict(heads=32, seqlens=(65536, 32768, 16384, 8192, 4096, 4096, 2048, 1024, 512, 256)),
                                 "--heads 32 --seqlens 65536,32768,16384,8192,4096,4096,2048,1024,512,256"),
}
# the ASSUMED figures (npusim/profiles/ascend-910b2.toml) at the ends of the ranges their profile gives
# the calibrated chip's ranged fields: the ASSUMED sync latency and barrier, the two FITTED ones at their intervals
SENSITIVITY = [("sync.latency_us", (0.1, 2.0)), ("chip.barrier_us", (0.2, 10.0)),
               ("isa.vec_dependent_cycles", (12.7, 23.6)), ("isa.gm_burst_cycles", (11.7, 18.7))]


def layer_ms(version: str, overrides: dict | None = None, interleave: int = 1, **shape) -> tuple[float, object]:
    s = Settings(numerics=False, keep_trace=False, interleave=interleave, overrides=overrides or {}, **shape)
    r = evaluate(version, s)
    return r.design_report.latency_us / 1e3, r.design_report


def shape_table(name: str, shape: dict, flags: str) -> list[str]:
    rows, best = [], (float("inf"), "")
    for v in DESIGNS:
        (ms1, rep), (ms2, _) = layer_ms(v, **shape), layer_ms(v, interleave=2, **shape)
        rows.append((v, ms1, ms2, rep))
        best = min(best, (ms1, f"{v}"), (ms2, f"{v} --interleave 2"))
    out = [f"### {name}", "", f"`python -m kda.run --version all --no-numerics {flags} [--interleave 2]`", ""]
    cells = [(v, f"{ms1:,.2f}", f"{ms2:,.2f}", f"{rep.floor_us / 1e3:,.2f}", f"{min(ms1, ms2) / (rep.floor_us / 1e3):.1f}",
              rep.launches, rep.barriers, f"{rep.hbm_bytes / 1e9:.2f}") for v, ms1, ms2, rep in rows]
    out.append(markdown(cells, ("design", "ms", "ms, interleave 2", "floor ms", "x floor (best)", "launches",
                                "barriers", "HBM GB")))
    out += ["", f"Fastest: **{best[1]}** ({best[0]:,.2f} ms).", ""]
    return out


def ranking(overrides: dict, shape: dict) -> list[tuple[str, float]]:
    times = []
    for v in DESIGNS:
        times.append((v, min(layer_ms(v, overrides, il, **shape)[0] for il in (1, 2))))
    return sorted(times, key=lambda x: x[1])


def sensitivity(shape: dict) -> list[str]:
    out = ["### Where the ranking flips (Kimi layer; each design at its better interleave, 1 or 2)", "",
           "`python -m kda.run --version all --no-numerics --heads 32 --tokens 131072 --set FIELD=VALUE`", ""]
    cells = [("(profile as is)", "", _rank(ranking({}, shape)))]
    cells += [(f"`{field}`", f"{x:g}", _rank(ranking({field: x}, shape))) for field, values in SENSITIVITY for x in values]
    out.append(markdown(cells, ("profile figure", "value", "ranking, fastest first (ms)")))
    return out + [""]


def _rank(times) -> str:
    return " < ".join(f"{v} {ms:,.1f}" for v, ms in times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="leave out the 1M-token shape")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "designs.md")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    lines = ["# Designs by shape (benchmarks/designs.py, ascend-910b2, bf16, timing only)", ""]
    for name, (shape, flags) in SHAPES.items():
        if args.quick and "1M" in name:
            continue
        lines += shape_table(name, shape, flags)
        print("\n".join(lines[-(len(DESIGNS) + 8):]), flush=True)
    lines += sensitivity(SHAPES["Kimi layer (1 x 32 heads x 131072)"][0])
    lines.append(f"Wall time {time.perf_counter() - t0:,.0f} s.")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines[-14:]))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
