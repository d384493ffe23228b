"""Write kda_chunk_v3 / kda_chunk_v4 inputs (q, k, v, g, beta, h0 in FLA's layout) for the host emulation or an NPU run.

    python ascendc_stubs/scripts/gen_data.py --out DIR [--batch 1 --heads 2 --chunks 4 --chunk-size 64
        --dk 128 --dv 128 --dtype fp32|bf16 --gates slow --seed 0 --initial-state --gate-form log|alpha]

Run from the repository root (it uses kda.inputs, the project's input generator).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ascendc_stubs.bridge import write_inputs  # noqa: E402
from kda.inputs import GATES, make_inputs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--chunks", type=int, default=4)
    p.add_argument("--chunk-size", type=int, default=64)
    p.add_argument("--dk", type=int, default=128)
    p.add_argument("--dv", type=int, default=128)
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--gates", choices=GATES, default="slow")
    p.add_argument("--gate-form", choices=("log", "alpha"), default="log")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--initial-state", action="store_true")
    a = p.parse_args(argv)
    for name in ("batch", "heads", "chunks", "chunk_size", "dk", "dv"):
        if getattr(a, name) < 1:
            print(f"gen_data: --{name.replace('_', '-')} must be positive", file=sys.stderr)
            return 2
    x = make_inputs(a.batch, a.chunks * a.chunk_size, a.heads, a.dk, a.dv, a.gates, a.seed, a.initial_state)
    m = write_inputs(a.out, x, dtype=a.dtype, chunk_size=a.chunk_size, gate=a.gate_form)
    print(f"wrote {a.out}: B={m.B} T={m.T} H={m.H} K={m.K} V={m.V} C={m.C} {m.dtype} gate={m.gate} h0={int(m.h0)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
