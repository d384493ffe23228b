"""Where a measured KDA kernel's time goes in the model, stage by stage (a benchmark, not a test).

    python benchmarks/fla_npu_stages.py [--kernel kda_fla_npu] [--shape B=1;T=8192;H=32;K=128;V=128;C=64]
                                        [--dtype fp16] [--profile ascend-910b2]

Per stage: the latency (its launch and its makespan on the busiest core), the items (or streams) of that
core, and one item's work as the template times it: the Vector units' loads, compute and stores, the Cube's
loads and matmuls (each with its operand loads, MMAD and FixPipe), the hand-offs' DataCopies, and the
cross-core flags (each the profile's sync latency), with how many of each.
"""
from __future__ import annotations

import argparse

from npusim import load_profile
from npusim.model.multipass import simulate_design, templates
from npusim.model.template import PHASE, RIDE, STATE, SYNC

from kda.kernels.registry import _graphs, model


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/fla_npu_stages.py", description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default="kda_fla_npu")
    ap.add_argument("--shape", default="B=1;T=8192;H=32;K=128;V=128;C=64")
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--profile", default="ascend-910b2")
    a = ap.parse_args(argv)
    profile = load_profile(a.profile)
    m = model(a.kernel, a.shape, a.dtype)
    graphs = list(_graphs(m.name, m.chunk_size, m.shape.d_k, m.shape.d_v, m.dtype, 0))
    tpls = templates(m.design, graphs, profile, RIDE)
    run = simulate_design(m.design, tpls, profile, m.shape.chunk_counts(m.chunk_size), trace=False)
    print(f"{a.kernel} {a.shape} {a.dtype} on {a.profile}: {run.latency_us / 1000:.3f} ms")
    for p, tpl in zip(run.passes, tpls):
        per_core = -(-p.run.sequences // p.run.cores_used)
        b = breakdown(tpl)
        what = "chunks" if p.pass_.layout == "chunks" else f"streams ({p.run.interleave} at a time)"
        print(f"  {p.pass_.name:9s} {(p.boundary_us + p.run.makespan_us) / 1000:.3f} ms: {per_core} {what} on the "
              f"busiest of {p.run.cores_used} cores; one item: "
              + ", ".join(f"{k} {v:.2f} us" for k, v in b.items() if k not in ("vec phases", "cube phases", "flag count"))
              + f" ({b['vec phases']} Vector phases, {b['cube phases']} Cube phases, {b['flag count']} flags)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
