"""Write kda_chunk_v3 .. v6 inputs (q, k, v, g, beta, h0 in FLA's layout) for the host emulation or an NPU run.

    python ascendc_stubs/scripts/gen_data.py --out DIR [--batch 1 --heads 2 --chunks 4 --chunk-size 64
        --dk 128 --dv 128 --dtype fp32|bf16|fp16 --gates slow --seed 0 --initial-state --gate-form log|alpha
        --plan v3|v4|v5|v6 --profile ascend-910b2]

--plan adds to meta.txt the operator's tile attributes ("state_a_tiles 8", bridge.tile_attrs) from the
simulator's core-memory plan of that design at this shape and profile, for the NPU app to pass to aclnnKdaChunkVn.

Run from the repository root (it uses kda.driver.inputs, the project's input generator).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ascendc_stubs.bridge import KERNELS, sim_plans, tile_attrs, write_inputs  # noqa: E402
from kda.driver.inputs import GATES, make_inputs  # noqa: E402
from npusim.errors import NpuSimError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--chunks", type=int, default=4)
    p.add_argument("--chunk-size", type=int, default=64)
    p.add_argument("--dk", type=int, default=128)
    p.add_argument("--dv", type=int, default=128)
    p.add_argument("--dtype", choices=("fp32", "bf16", "fp16"), default="fp32", help="fp16: kda_chunk_v6 only")
    p.add_argument("--gates", choices=GATES, default="slow")
    p.add_argument("--gate-form", choices=("log", "alpha"), default="log")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--initial-state", action="store_true")
    p.add_argument("--plan", choices=tuple(KERNELS), help="add the tile attributes of this design's plan")
    p.add_argument("--profile", default="ascend-910b2", help="the profile whose plan the tile attributes take")
    a = p.parse_args(argv)
    for name in ("batch", "heads", "chunks", "chunk_size", "dk", "dv"):
        if getattr(a, name) < 1:
            print(f"gen_data: --{name.replace('_', '-')} must be positive", file=sys.stderr)
            return 2
    attrs = {}
    if a.plan:
        # a phase's plan is per chunk: one sequence of two chunks gives it
        try:
            plans = sim_plans(a.plan, heads=1, chunks=2, dtype=a.dtype, profile=a.profile, chunk_size=a.chunk_size,
                              d_k=a.dk, d_v=a.dv)
        except (NpuSimError, ValueError) as e:
            print(f"gen_data: --plan {a.plan}: {e}", file=sys.stderr)
            return 2
        if not plans:
            print(f"gen_data: --plan {a.plan}: the simulator makes no plan at this shape and type", file=sys.stderr)
            return 2
        attrs = tile_attrs(KERNELS[a.plan], plans)
    x = make_inputs(a.batch, a.chunks * a.chunk_size, a.heads, a.dk, a.dv, a.gates, a.seed, a.initial_state)
    m = write_inputs(a.out, x, dtype=a.dtype, chunk_size=a.chunk_size, gate=a.gate_form)
    print(f"wrote {a.out}: B={m.B} T={m.T} H={m.H} K={m.K} V={m.V} C={m.C} {m.dtype} gate={m.gate} h0={int(m.h0)}")
    if attrs:
        with open(a.out / "meta.txt", "a") as f:
            f.writelines(f"{k} {n}\n" for k, n in attrs.items())
        print("tile attributes (meta.txt): " + " ".join(f"{k}={n}" for k, n in attrs.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
