"""python benchmarks/predictions.py [--write] [--breakdown ID] [FILE ...]

The registered predictions of held-out rows (kda/validation/predictions/<implementation>.csv; columns id,
kernel, stage, shape, dtype, predicted_us, profile; no measured values): every row predicted again by the
model as it is now, on the row's profile. Prints each row with its registered and its current figure and
exits 1 where they differ by more than 0.05 % (a prediction that moved since it was registered); `--write`
puts the current figures into the file (registering them: commit that before any measured value).
`--breakdown ID`: where the model puts one row's time, per work item on each unit, by mechanism.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from npusim import load_profile
from npusim.chip import isa
from npusim.model.multipass import templates
from npusim.model.template import PHASE, RIDE

from kda.kernels.registry import _graphs, model

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "kda" / "validation" / "predictions"
COLUMNS = ("id", "kernel", "stage", "shape", "dtype", "predicted_us", "profile")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/predictions.py", description=__doc__.splitlines()[2])
    ap.add_argument("files", nargs="*", type=Path, help="prediction files (default: every one in the folder)")
    ap.add_argument("--write", action="store_true", help="put the current predictions into the files")
    ap.add_argument("--breakdown", metavar="ID", help="where the model puts this row's time")
    args = ap.parse_args(argv)
    if args.breakdown:
        return breakdown(args.breakdown, args.files or sorted(FOLDER.glob("*.csv")))
    moved = 0
    for path in args.files or sorted(FOLDER.glob("*.csv")):
        rows = list(csv.DictReader(path.open(encoding="utf-8")))
        if not rows or tuple(rows[0]) != COLUMNS:
            print(f"{path}: the header must be {','.join(COLUMNS)}", file=sys.stderr)
            return 2
        for r in rows:
            now = model(r["kernel"], r["shape"], r["dtype"], stage=r["stage"]).predict(load_profile(r["profile"]))
            old = float(r["predicted_us"]) if r["predicted_us"] else None
            same = old is not None and abs(now / old - 1) <= 5e-4
            moved += not same
            mark = "" if same else "  MOVED" if old is not None else "  not registered yet"
            print(f"{r['id']:<40} registered {old if old is not None else '-':>10}  now {now:10.1f}{mark}")
            r["predicted_us"] = f"{now:.1f}"
        if args.write:
            with path.open("w", encoding="utf-8", newline="") as f:
                w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
                w.writeheader()
                w.writerows(rows)
    return 1 if moved and not args.write else 0


def _category(op) -> str:
    if op.kind in ("scalar", "flag"):
        return {"scalar": "scalar loops (GetValue / SetValue)", "flag": "AIV <-> AIV flag hop"}[op.kind]
    if op.name in ("ub_copy", "brcb", "dup"):
        return "UB copies, Brcb, Dup"
    if op.name == "cast":
        return "casts"
    return "arithmetic, selects (rows as issued)"


def breakdown(row_id: str, files) -> int:
    rows = {r["id"]: r for path in files for r in csv.DictReader(Path(path).open(encoding="utf-8"))}
    if row_id not in rows:
        print(f"no row {row_id!r} in {', '.join(map(str, files))}", file=sys.stderr)
        return 2
    r = rows[row_id]
    m = model(r["kernel"], r["shape"], r["dtype"], stage=r["stage"])
    profile = load_profile(r["profile"])
    graphs = _graphs(m.name, m.chunk_size, m.shape.d_k, m.shape.d_v, m.dtype, 0)
    tpl = templates(m.design, list(graphs), profile, RIDE)[0]
    units = m.design.passes[0].on(profile).chip.vec_per_core
    us = profile.cycles_to_us
    print(f"{row_id}: {m.name}, one work item, per unit (us); the whole kernel {m.predict(profile):.1f} us")
    for node in tpl.nodes:
        if node.kind != PHASE:
            print(f"  hand-off {node.label} ({node.resource}): transfers {node.busy_us:.3f}, flag {node.delay_us:.3f}")
            continue
        phase = graphs[0].phase(node.name)
        print(f"  {phase.name} ({phase.unit}): {node.busy_us:.3f} (GM loads {node.pipe.load_us:.3f}, "
              f"stores {node.pipe.store_us:.3f})")
        if phase.unit != "vec":
            continue
        parts: dict[str, float] = {}
        for op in phase.ops:
            walls = isa.issue.walls_cycles(profile, op.walls or 0) if isa.issue.declared(op) else 0.0
            cycles = isa.vector_op_cycles(op, profile, units)
            parts["pipe_barrier(V) walls"] = parts.get("pipe_barrier(V) walls", 0.0) + walls
            parts[_category(op)] = parts.get(_category(op), 0.0) + cycles - walls
        walls = sum(op.walls or 0 for op in phase.ops)
        for name, cycles in parts.items():
            extra = f" ({walls} walls)" if name.startswith("pipe") else ""
            print(f"    {name:<40} {us(cycles):7.3f}{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
