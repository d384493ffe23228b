"""Does torch.compile (inductor, CPU) keep the numerics' bits? CPU numerics faster with the same bits
as the current path: fusing the step's element-wise passes is the one lever left, and inductor is
the fuser at hand. This compiles each kind of op the phase programs use, on a chunk-step-sized tensor
(32 heads x 64 x 128, fp32), and compares the result with eager's bit for bit.

    python benchmarks/compile_bits.py                   # about a minute on 2 cores (one compile per op)

A benchmark, not a test: the answer depends on the torch build (here the CPU wheel of 2.13.0).
"""
from __future__ import annotations

import torch
from torch._inductor import config as inductor_config

OPS = {
    "mul, sub": lambda x, y: x * y - y,
    "cumsum over the chunk": lambda x, y: x.cumsum(-2),
    "exp": lambda x, y: x.exp(),
    "exp of a gate difference, times": lambda x, y: (x[..., -1:, :] - x).exp() * y,
    "round to bf16 and back": lambda x, y: (x * y).to(torch.bfloat16).to(torch.float32),
    "sum over d_k": lambda x, y: x.sum(-1),
}


def _yes(same: bool) -> str:
    return "yes" if same else "no"


def main() -> int:
    torch.manual_seed(0)
    x, y = torch.randn(32, 64, 128), torch.randn(32, 64, 128)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| op | same bits | max abs difference | same bits, emulate_precision_casts |\n|---|---|---:|---|")
    for name, fn in OPS.items():
        ref = fn(x, y)
        out = torch.compile(fn)(x, y)
        torch._dynamo.reset()
        with inductor_config.patch(emulate_precision_casts=True):
            emulated = torch.compile(fn)(x, y)
        torch._dynamo.reset()
        print(f"| {name} | {_yes(torch.equal(ref, out))} | {(ref - out).abs().max().item():.3g} | "
              f"{_yes(torch.equal(ref, emulated))} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
