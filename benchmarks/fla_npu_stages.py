"""Where a measured KDA kernel's time goes in the model, stage by stage (a benchmark, not a test).

    python benchmarks/fla_npu_stages.py [--kernel kda_fla_npu] [--shape B=1;T=8192;H=32;K=128;V=128;C=64]
                                        [--dtype fp16] [--profile ascend-910b2] [--mechanisms]

Per stage: the latency (its launch and its makespan on the busiest core), the items (or streams) of that
core, and one item's work as the template times it: the Vector units' loads, compute and stores, the Cube's
loads and matmuls (each with its operand loads, MMAD and FixPipe), the hand-offs' DataCopies, and the
cross-core flags (each the profile's sync latency), with how many of each. `--mechanisms`: each Vector
phase's compute of one item on one unit, by what the kernel's source issues (npusim/chip/issue.py): the
pipe_barrier(PIPE_V) walls, the scalar loops, the UB copies, Brcb and Dup, the casts, the arithmetic.
"""
from __future__ import annotations

import argparse

from npusim import load_profile
from npusim.chip import isa
from npusim.model.multipass import simulate_design, templates
from npusim.model.template import PHASE, RIDE, STATE, SYNC

from kda.kernels.registry import model


def breakdown(tpl) -> dict[str, float]:
    out = {"vec load": 0.0, "vec compute": 0.0, "vec store": 0.0, "cube load": 0.0, "cube matmul": 0.0,
           "hand-off copies": 0.0, "flags": 0.0}
    counts = {"vec phases": 0, "cube phases": 0, "flag count": 0}
    for n in tpl.nodes:
        if n.kind == PHASE:
            p = n.pipe
            unit = "vec" if n.resource == "vec" else "cube"
            counts[f"{unit} phases"] += 1
            if unit == "vec":
                out["vec load"] += p.load_us * p.tiles
                out["vec compute"] += p.compute_us * p.tiles
                out["vec store"] += p.store_us * p.tiles
            else:
                out["cube load"] += p.load_us * p.tiles
                out["cube matmul"] += p.compute_us * p.tiles
        elif n.kind in (SYNC, STATE):
            out["hand-off copies"] += n.busy_us
            out["flags"] += n.delay_us
            counts["flag count"] += 1
    return {**out, **counts}


def _mechanism(op) -> str:
    if op.kind in ("scalar", "flag"):
        return {"scalar": "scalar loops (GetValue / SetValue)", "flag": "AIV <-> AIV flag hop"}[op.kind]
    if op.name in ("ub_copy", "brcb", "dup"):
        return "UB copies, Brcb, Dup"
    return "casts" if op.name == "cast" else "arithmetic, selects (repeats as issued)"


def mechanisms(graph, pass_, profile) -> list[str]:
    """Each Vector phase's compute for one item on one unit, by mechanism, in us."""
    units = pass_.on(profile).chip.vec_per_core
    lines = []
    for phase in graph.phases:
        if phase.unit != "vec":
            continue
        parts: dict[str, float] = {}
        for op in phase.ops:
            walls = isa.issue.walls_cycles(profile, op.walls or 0) if isa.issue.declared(op) else 0.0
            parts["pipe_barrier(V) walls"] = parts.get("pipe_barrier(V) walls", 0.0) + walls
            key = _mechanism(op)
            parts[key] = parts.get(key, 0.0) + isa.vector_op_cycles(op, profile, units) - walls
        walls = sum(op.walls or 0 for op in phase.ops)
        lines.append(f"    {phase.name} (vec): " + ", ".join(
            f"{k} {profile.cycles_to_us(v):.3f} us" + (f" ({walls} walls)" if k.startswith("pipe") else "")
            for k, v in parts.items() if v))
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/fla_npu_stages.py", description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default="kda_fla_npu")
    ap.add_argument("--shape", default="B=1;T=8192;H=32;K=128;V=128;C=64")
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--profile", default="ascend-910b2")
    ap.add_argument("--mechanisms", action="store_true", help="each Vector phase by mechanism")
    a = ap.parse_args(argv)
    profile = load_profile(a.profile)
    m = model(a.kernel, a.shape, a.dtype)
    design, graphs = m.timed()
    tpls = templates(design, graphs, profile, RIDE)
    run = simulate_design(design, tpls, profile, m.counts(), trace=False)
    print(f"{a.kernel} {a.shape} {a.dtype} on {a.profile}: {run.latency_us / 1000:.3f} ms")
    for p, tpl, graph in zip(run.passes, tpls, graphs):
        per_core = -(-p.run.sequences // p.run.cores_used)
        b = breakdown(tpl)
        what = "chunks" if p.pass_.layout == "chunks" else f"streams ({p.run.interleave} at a time)"
        print(f"  {p.pass_.name:9s} {(p.boundary_us + p.run.makespan_us) / 1000:.3f} ms: {per_core} {what} on the "
              f"busiest of {p.run.cores_used} cores; one item: "
              + ", ".join(f"{k} {v:.2f} us" for k, v in b.items() if k not in ("vec phases", "cube phases", "flag count"))
              + f" ({b['vec phases']} Vector phases, {b['cube phases']} Cube phases, {b['flag count']} flags)")
        if a.mechanisms:
            print("\n".join(mechanisms(graph, p.pass_, profile)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
