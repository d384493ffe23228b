"""Scale benchmarks: a whole Kimi Linear KDA layer (32 heads of d_k = d_v = 128) on an
Ascend 910B2 (24 AI cores). A benchmark, not a test: it prints a table and writes it to a file.

    python benchmarks/scale.py                    # all cases, about two minutes on a 2-core machine
    python benchmarks/scale.py --quick            # smaller sizes, for a smoke run
    python benchmarks/scale.py --out FILE.md      # default benchmarks/results/scale.md

Cases (each runs in its own process, so its peak memory is its own):
  timing   v3, 32 heads x 131072 tokens (2048 chunks each), timing-only replay (--no-numerics)
  fla      numerics in fp32, 32 heads x 8192 tokens: head-tokens/s of kda.execute against FLA's
           naive_chunk_kda on the same inputs (needs `pip install fla-core einops`; loaded by file path
           because fla/ops/__init__ imports triton)
  full     numerics, bf16 inputs and transfers, 32 heads x 131072 tokens: head-tokens/s and peak memory
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADS = 32


def case_timing(tokens: int) -> dict:
    from kda.settings import Settings
    from kda.studies.evaluate import evaluate
    t0 = time.perf_counter()
    r = evaluate("v3", Settings(heads=HEADS, tokens=tokens, numerics=False, keep_trace=False))
    wall = time.perf_counter() - t0
    rep = r.report
    nodes = 2 * r.pipelined.template.n * r.execution.chunks * HEADS      # pipelined + serial replays
    return {"wall_s": wall, "nodes": nodes, "nodes_per_s": nodes / wall, "layer_latency_us": rep.pipelined_us,
            "serial_us": rep.serial_us, "bound_us": rep.bound_us, "roofline_us": rep.roofline_us,
            "waves": rep.waves, "cores": rep.cores}


def _fla_naive():
    spec = importlib.util.find_spec("fla")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "ops" / "kda" / "naive.py"
    mod_spec = importlib.util.spec_from_file_location("fla_kda_naive", path)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    return module


def case_fla(tokens: int) -> dict:
    import torch
    from kda.driver.execute import Types, execute
    from kda.driver.inputs import make_inputs
    from kda.reference.parity import compare
    x = make_inputs(tokens=tokens, heads=HEADS, seed=1)
    t0 = time.perf_counter()
    ex = execute(x.q, x.k, x.v, x.g, x.beta, types=Types(transfer="fp32"))
    ours = time.perf_counter() - t0
    out = {"ours_s": ours, "ours_head_tokens_per_s": HEADS * tokens / ours}
    naive = _fla_naive()
    if naive is None:
        out["fla"] = "not installed: pip install fla-core einops"
        return out
    t0 = time.perf_counter()
    o, _ = naive.naive_chunk_kda(x.q, x.k, x.v, x.g, x.beta, chunk_size=64)
    fla = time.perf_counter() - t0
    agree = compare(o.to(torch.float64), ex.o)
    out.update(fla_s=fla, fla_head_tokens_per_s=HEADS * tokens / fla, speedup=fla / ours,
               agree_rel_rms=agree.rel_rms_err)
    return out


def case_full(tokens: int) -> dict:
    import torch
    import torch.nn.functional as F
    from kda.driver.autograd import forward_kda
    gen = torch.Generator().manual_seed(2)
    shape = (1, tokens, HEADS)
    q, k, v = (torch.empty(*shape, 128, dtype=torch.bfloat16) for _ in range(3))
    g = torch.empty(*shape, 128)
    for h in range(HEADS):          # fill head by head: no full-size fp32 temporaries
        q[:, :, h] = F.normalize(torch.randn(1, tokens, 128, generator=gen), dim=-1)
        k[:, :, h] = F.normalize(torch.randn(1, tokens, 128, generator=gen), dim=-1)
        v[:, :, h] = torch.randn(1, tokens, 128, generator=gen)
        g[:, :, h] = F.logsigmoid(torch.randn(1, tokens, 128, generator=gen))
    beta = torch.sigmoid(torch.randn(*shape, generator=gen))
    t0 = time.perf_counter()
    o, S = chunk_kda(q, k, v, g, beta, output_final_state=True)
    wall = time.perf_counter() - t0
    peak = _peak_gb()                 # inputs, output and the run; not the check below
    finite = all(bool(torch.isfinite(o[:, t:t + 4096]).all()) for t in range(0, tokens, 4096))
    return {"wall_s": wall, "head_tokens_per_s": HEADS * tokens / wall, "finite": finite, "peak_rss_gb": peak}


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2


CASES = {"timing": case_timing, "fla": case_fla, "full": case_full}


def run_case(name: str, tokens: int) -> dict:
    """Run one case in a child process; its peak resident memory is reported with it."""
    proc = subprocess.run([sys.executable, __file__, "--case", name, "--tokens", str(tokens)],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", choices=CASES)
    p.add_argument("--tokens", type=int)
    p.add_argument("--quick", action="store_true", help="8x smaller sequences")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "scale.md")
    a = p.parse_args()
    if a.case:                                          # child process
        result = CASES[a.case](a.tokens)
        result.setdefault("peak_rss_gb", _peak_gb())
        print(json.dumps(result))
        return
    div = 8 if a.quick else 1
    sizes = {"timing": 131072 // div, "fla": 8192 // div, "full": 131072 // div}
    results = {name: run_case(name, sizes[name]) for name in CASES}
    t, f, u = results["timing"], results["fla"], results["full"]
    rows = [("what", "measured", "target")]
    if "error" in t:
        rows.append((f"timing-only, v3, {HEADS} heads x {sizes['timing']} tokens", t["error"], "<= 10 s"))
    else:
        rows += [(f"timing-only, v3, {HEADS} heads x {sizes['timing']} tokens, ascend-910b2",
                  f"{t['wall_s']:.1f} s wall, peak {t['peak_rss_gb']:.2f} GiB", "<= 10 s"),
                 ("  phases and syncs replayed per second (pipelined + serial timelines; cores "
                  "with equal work simulated once)", f"{t['nodes_per_s']:,.0f} ({t['nodes']:,} in {t['wall_s']:.1f} s)", ""),
                 ("  predicted layer latency (pipelined)", f"{t['layer_latency_us'] / 1e3:,.2f} ms "
                  f"({t['cores']} cores, {t['waves']} waves; serial {t['serial_us'] / 1e3:,.2f} ms, "
                  f"bound {t['bound_us'] / 1e3:,.2f} ms, Cube roofline {t['roofline_us'] / 1e3:,.2f} ms)", "")]
    if "error" in f:
        rows.append((f"numerics fp32, {HEADS} heads x {sizes['fla']} tokens", f["error"], ">= 3x FLA"))
    else:
        rows.append((f"numerics fp32, {HEADS} heads x {sizes['fla']} tokens: kda.execute",
                     f"{f['ours_head_tokens_per_s']:,.0f} head-tokens/s ({f['ours_s']:.1f} s)", ""))
        if "fla_s" in f:
            rows += [("  FLA naive_chunk_kda, same inputs",
                      f"{f['fla_head_tokens_per_s']:,.0f} head-tokens/s ({f['fla_s']:.1f} s)", ""),
                     ("  speed-up over FLA's naive reference", f"{f['speedup']:.1f}x (outputs agree to rel RMS "
                      f"{f['agree_rel_rms']:.1e})", ">= 3x")]
        else:
            rows.append(("  FLA naive_chunk_kda", f["fla"], ""))
    if "error" in u:
        rows.append((f"numerics bf16, {HEADS} heads x {sizes['full']} tokens", u["error"], "<= 8 GB"))
    else:
        rows.append((f"numerics bf16, {HEADS} heads x {sizes['full']} tokens (whole layer)",
                     f"{u['head_tokens_per_s']:,.0f} head-tokens/s ({u['wall_s']:.1f} s), peak "
                     f"{u['peak_rss_gb']:.2f} GiB (inputs 5 GiB, output 1 GiB)"
                     + ("" if u["finite"] else ", NON-FINITE OUTPUT"), "<= 8 GB"))
    from kda.views.table import markdown
    lines = markdown(rows[1:], rows[0]).splitlines()
    import torch
    header = (f"`python benchmarks/scale.py{' --quick' if a.quick else ''}` on {platform.machine()}, "
              f"{__import__('os').cpu_count()} CPUs, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}")
    text = header + "\n\n" + "\n".join(lines) + "\n"
    print(text)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    print(f"written to {a.out.relative_to(ROOT) if a.out.is_relative_to(ROOT) else a.out}")


if __name__ == "__main__":
    main()
