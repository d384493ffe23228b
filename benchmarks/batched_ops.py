"""CPU proxies for the training numerics' speed on a GPU: torch ops dispatched per chunk, and wall
time, of kda.chunk_kda forward + backward under autograd, chunk by chunk against batched (npusim/record/
batched.py, what runs off the CPU; forced here). A benchmark, not a test.

    python benchmarks/batched_ops.py                       # 4 heads x 8192 tokens, chunk 64, K = V = 128, bf16

On a GPU each dispatched op is a kernel: the chunk-by-chunk replay launches (or graph-replays) every op of the
chunk step once per chunk, the batched one the chunk-parallel ops once per block of chunks (`--block-items`
items, chunks x sequences: the GPU's default, 2048, is 64 chunks of the Kimi layer's 32 heads) and only the
state's chain per chunk. `walk` counts the chains' ops per chunk (the forward's, the backward's passes');
`ops/chunk` every op of the forward or the backward that would launch a kernel (not views), over the chunks,
recording the programs included (amortised over more chunks on the Kimi layer). Wall time: CPU seconds of this process (one thread: the machine may be shared), best of `--reps`.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kda  # noqa: E402
import kda.driver.backward as kda_backward  # noqa: E402
import npusim.record.batched as batched  # noqa: E402
from npusim.record.memory import keep_freed_memory  # noqa: E402


class Count(TorchDispatchMode):
    """Ops that launch a kernel on a GPU: every dispatched op but views (and metadata) and the meta device's."""
    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view and not (isinstance(out, torch.Tensor) and out.is_meta):
            self.n += 1
        return out


def inputs(heads: int, tokens: int, d: int = 128, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen)
    leaf = lambda x: x.requires_grad_()
    return (leaf(F.normalize(r(1, tokens, heads, d), dim=-1).bfloat16()),
            leaf(F.normalize(r(1, tokens, heads, d), dim=-1).bfloat16()), leaf(r(1, tokens, heads, d).bfloat16()),
            leaf(F.logsigmoid(r(1, tokens, heads, d))), leaf(torch.sigmoid(r(1, tokens, heads)).bfloat16()),
            r(1, tokens, heads, d).bfloat16())


def train_step(version: str, x, count: bool):
    """(forward ops, backward ops, forward s, backward s, gradients); seconds: this process's CPU time."""
    *leaves, do = x
    for t in leaves:
        t.grad = None
    modes = [Count() if count else None, Count() if count else None]
    t0 = time.process_time()
    with modes[0] or _null():
        o, _ = kda.chunk_kda(*leaves, version=version)
    t1 = time.process_time()
    with modes[1] or _null():
        o.backward(do)
    t2 = time.process_time()
    return ((modes[0].n, modes[1].n) if count else (0, 0)), (t1 - t0, t2 - t1), [t.grad.clone() for t in leaves]


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def walk_ops(version: str, x) -> int:
    """The state's chain of every sequential pass, ops per chunk (summed over the passes)."""
    chains = []
    original = batched.BatchedReplay.__init__

    def spy(self, *a, **kw):
        original(self, *a, **kw)
        chains.append(len(self.walk.chain))
    batched.BatchedReplay.__init__ = spy
    try:
        train_step(version, x, False)
    finally:
        batched.BatchedReplay.__init__ = original
    return sum(chains)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--versions", default="v6,v4,fla")
    p.add_argument("--block-items", type=int, default=256, help="items per block (default 256: 64 chunks of 4 "
                   "heads, as the GPU's 2048 items are of the Kimi layer's 32)")
    p.add_argument("--reps", type=int, default=2)
    a = p.parse_args()
    keep_freed_memory()
    torch.set_num_threads(1)
    batched.BLOCK_ITEMS = a.block_items
    x = inputs(a.heads, a.tokens)
    chunks = -(-a.tokens // 64)
    rows = {}
    for version in a.versions.split(","):
        grads = {}
        for mode in ("chunk by chunk", "batched"):
            kda_backward.BATCHED = mode == "batched"
            (nf, nb), _, grads[mode] = train_step(version, x, True)
            best = min((train_step(version, x, False)[1] for _ in range(a.reps)), key=sum)
            walk = walk_ops(version, x) if mode == "batched" else None
            rows[version, mode] = (nf / chunks, nb / chunks, walk, *best)
        same = all(torch.equal(u, w) for u, w in zip(grads["chunk by chunk"], grads["batched"]))
        rows[version, "same"] = same
    kda_backward.BATCHED = None
    print(f"{a.heads} heads x {a.tokens} tokens ({chunks} chunks of 64), K = V = 128, bf16; one torch thread; "
          f"blocks of {a.block_items} items")
    print(f"{'design':6s} {'replay':15s} {'fwd ops/chunk':>13s} {'bwd ops/chunk':>13s} {'walk ops/chunk':>14s} "
          f"{'fwd s':>7s} {'bwd s':>7s} {'total s':>7s}  same bits")
    for version in a.versions.split(","):
        for mode in ("chunk by chunk", "batched"):
            nf, nb, walk, tf, tb = rows[version, mode]
            print(f"{version:6s} {mode:15s} {nf:13.1f} {nb:13.1f} {walk if walk is not None else '':>14} "
                  f"{tf:7.2f} {tb:7.2f} {tf + tb:7.2f}  {rows[version, 'same'] if mode == 'batched' else ''}")


if __name__ == "__main__":
    main()
