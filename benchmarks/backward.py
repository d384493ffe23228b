"""The backward pass's precision and timing studies (too slow for CI): writes benchmarks/results/backward.md.

    python benchmarks/backward.py timing parity attribution   # the Kimi layer's timing (32 heads x 131072
        tokens; interleave 1 and 2) and the training ranking; bf16 parity over 16 chunks x three gate families,
        every design with a backward (v4, v6, fla); which hand-offs must stay fp32
    (results/backward_<parts>.md)
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from kda.studies.backward_eval import evaluate_backward
from kda.settings import Settings

OUT = Path(__file__).parent / "results" / ("backward" + "".join(f"_{a}" for a in sys.argv[1:]) + ".md")


def parity_rows(d: int = 64, chunks: int = 16) -> list[str]:
    rows = ["| design | gates | dtype | " + " | ".join(["dq", "dk", "dv", "dg", "dbeta", "dh0"]) + " | all pass | s |",
            "|---" * 10 + "|"]
    for gates in ("seed", "kimi", "slow"):
        for version in TRAINING:
            s = Settings(chunks=chunks, d_k=d, d_v=d, dtype="bf16", gates=gates, initial_state=True)
            t = time.perf_counter()
            r = evaluate_backward(version, s, forward=False)
            cells = [f"{p.rel_rms_err:.2e}" for p in r.parity.values()]
            rows.append(f"| {version} | {gates} | bf16 | " + " | ".join(cells) +
                        f" | {'yes' if r.passed else 'NO'} | {time.perf_counter() - t:.1f} |")
            print(rows[-1], flush=True)
    return rows


TRAINING = ("v4", "v6", "fla")       # the designs with a backward program (v5 shares v6's)


def timing_rows(interleave: int = 1) -> list[str]:
    rows = ["| design | states | forward ms | backward ms | serial ms | bound ms | fwd + bwd ms | syncs / chunk "
            "| HBM GB | GM kept GB | wall s |", "|---" * 11 + "|"]
    results = []
    for states in ("recompute", "store"):
        for version in TRAINING:
            s = Settings(heads=32, tokens=131072, numerics=False, keep_trace=False, interleave=interleave)
            t = time.perf_counter()
            r = evaluate_backward(version, s, states)
            results.append(r)
            rep = r.report
            rows.append(f"| {version} | {states} | {r.forward_report.latency_us / 1e3:.2f} | {rep.latency_us / 1e3:.2f} "
                        f"| {rep.serial_us / 1e3:.2f} | {rep.bound_us / 1e3:.2f} | {r.training_us / 1e3:.2f} "
                        f"| {rep.syncs_per_chunk} | {rep.hbm_bytes / 1e9:.2f} | {r.kept_bytes / 1e9:.2f} "
                        f"| {time.perf_counter() - t:.1f} |")
            print(rows[-1], flush=True)
    for states in ("recompute", "store"):
        mine = [r for r in results if r.states == states]
        fwd = sorted(mine, key=lambda r: r.forward_report.latency_us)
        train = sorted(mine, key=lambda r: r.training_us)
        rows.append(f"\n{states}: forward ranking {' < '.join(r.version for r in fwd)}; training (forward + "
                    f"backward) {' < '.join(r.version for r in train)}")
    return rows


def attribution_rows(version: str, chunks: int = 16, d: int = 32) -> list[str]:
    import torch

    from kda.studies.backward_attribution import attribute_backward, must_stay_fp32
    from kda.driver.inputs import make_inputs
    x = make_inputs(1, chunks * 64, 1, d, d, gates="slow", seed=0, initial_state=True)
    gen = torch.Generator().manual_seed(1)
    do, dht = torch.randn(1, chunks * 64, 1, d, generator=gen), torch.randn(1, 1, d, d, generator=gen)
    items = attribute_backward(version, x, do, dht)
    rows = [f"### {version}: must stay fp32 (rounding alone uses > 50 % of a tolerance): "
            f"{', '.join(must_stay_fp32(items)) or 'none'}", "",
            "| rounded to bf16 alone | worst error / tolerance | dq | dk | dv | dg | dbeta | dh0 |", "|---" * 8 + "|"]
    for it in items[:10]:
        rows.append(f"| {it.name} | {it.worst:.3f} | " + " | ".join(f"{e:.1e}" for e in it.errors.values()) + " |")
    print("\n".join(rows), flush=True)
    return rows


def oracle_rows(tokens: int = 512, d: int = 32) -> list[str]:
    """FLA's naive_chunk_kda differentiated in fp64 (fla-core) as a second oracle, beside the recurrence."""
    import torch

    from kda.driver.backward import execute_backward
    from kda.driver.inputs import make_inputs
    from kda.reference.parity import compare
    from kda.reference.recurrence_bwd import GRADS, fla_chunk_grads, recurrent_kda_grads
    x = make_inputs(1, tokens, 2, d, d, gates="slow", seed=0, initial_state=True)
    gen = torch.Generator().manual_seed(1)
    do, dht = torch.randn(1, tokens, 2, d, generator=gen), torch.randn(1, 2, d, d, generator=gen)
    args = (x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, do, dht)
    fla = fla_chunk_grads(*args)
    if fla is None:
        return ["fla-core is not installed (pip install -e '.[bench]'): no second oracle"]
    rec = recurrent_kda_grads(*args)
    rows = ["| against | " + " | ".join(GRADS) + " |", "|---" * 7 + "|",
            "| FLA naive_chunk_kda (fp64) vs the recurrence (fp64) | "
            + " | ".join(f"{compare(rec[n], fla[n]).rel_rms_err:.1e}" for n in GRADS) + " |"]
    for version in TRAINING:
        bx = execute_backward(*args, version=version, transfer_dtype="fp32")
        rows.append(f"| {version} backward (fp32) vs FLA naive_chunk_kda | "
                    + " | ".join(f"{compare(fla[n], bx.grads[n]).rel_rms_err:.1e}" for n in GRADS) + " |")
    print("\n".join(rows), flush=True)
    return rows


if __name__ == "__main__":
    parts = sys.argv[1:] or ["timing", "parity"]
    lines = ["# Backward pass studies (`python benchmarks/backward.py`)", ""]
    if "timing" in parts:
        lines += ["## Kimi layer, timing only (32 heads x 131072 tokens, bf16, ascend-910b2)", "", *timing_rows(), ""]
        lines += ["## The same with --interleave 2 (a core alternates two heads' chunks in its sequential passes)",
                  "", *timing_rows(2), ""]
    if "parity" in parts:
        lines += ["## Gradients in bf16 against fp64 autograd (16 chunks of 64, d_k = d_v = 64, randn h0; rel RMS; "
                  "FLA's tolerances 0.008 for dq, dk, dv, dh0 and 0.02 for dg, dbeta)", "", *parity_rows(), ""]
    if "oracle" in parts:
        lines += ["## A second oracle: FLA's naive_chunk_kda through autograd (512 tokens, 2 heads, d = 32, slow "
                  "gates; rel RMS)", "", *oracle_rows(), ""]
    if "attribution" in parts:
        lines += ["## Which backward hand-offs must stay fp32 (16 chunks of 64, d_k = d_v = 32, slow gates; each "
                  "payload rounded to bf16 alone, everything else and the states fp32; top 10)", ""]
        for version in TRAINING:
            lines += [*attribution_rows(version), ""]
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines))
    print(f"wrote {OUT}")
