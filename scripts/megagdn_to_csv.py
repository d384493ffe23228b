#!/usr/bin/env python3
"""Write kda/validation/megagdn.csv from MegaGDN-PTO's published kernel benchmarks (sources: kda/validation/README.md).

    python scripts/megagdn_to_csv.py --git-dir /work/.mirror/huawei-csl+megagdn-pto/repo [--rev 3a59190]
    python scripts/megagdn_to_csv.py --json-dir DIR        # DIR/kernel_bench_L{4096,8192,16384}.json

Every `<stage>_{pto,triton64,triton128}_ms` and `mega_ms` timing of outputs/data/kernel_bench_L{4096,8192,16384}.json
with a value becomes one row; JSON nulls (Triton runs that failed or were skipped) are listed on stderr and left
out; `staged_ms` and the `*_speedup*` ratios are not timings of one kernel and are left out too. Deterministic.
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

REPO = "huawei-csl/megagdn-pto"
FILES = [f"outputs/data/kernel_bench_L{L}.json" for L in (4096, 8192, 16384)]
STAGES = ("cumsum", "kkt", "solve_tril", "wy_fast", "chunk_h", "chunk_o")
# JSON key suffix -> (kernel, chunk, dtype of q/k/v, implementation, short tag for the id)
SUFFIXES = {
    "_pto_ms": ("gdn_pto", 128, "fp16", "megagdn-pto", "pto"),
    "_triton64_ms": ("gdn_triton64", 64, "bf16", "vllm-ascend-triton", "triton64"),
    "_triton128_ms": ("gdn_triton128", 128, "bf16", "vllm-ascend-triton", "triton128"),
}
TIMED_PTO = "device time: NPU events around one kernel launch (host ran ahead), mean of 15, L2 flushed before each"
TIMED_TRITON = ("NPU events after a host sync: includes the Python wrapper (transposes, allocations) and the "
                "launch, mean of 15")
TIMED_TRITON_SYNC = TIMED_TRITON + "; prepare_chunk_indices does a D2H sync in the region"
TIMED_MEGA = ("NPU events around run_mega_kernel: the fused kernel plus the zero-fills of its buffers, "
              "o*scale and a D2H sync (cu_seqlens.tolist()), mean of 15")
HEADER = ["id", "kernel", "stage", "shape", "dtype", "measured_us", "implementation", "timed", "quoted", "held_out"]


def timed(kernel: str, stage: str) -> str:
    if kernel == "gdn_pto_fused":
        return TIMED_MEGA
    if kernel == "gdn_pto":
        return TIMED_PTO + ("; input an all-zero tril, fp32 output" if stage == "solve_tril" else "")
    return TIMED_TRITON_SYNC if stage in ("cumsum", "solve_tril") else TIMED_TRITON


def held_out(L: int, H: int) -> str:
    """Never seen by a fit: the longest sequences (L = 16384) and the one head count only measured at L >= 8192."""
    return "yes" if L == 16384 or H == 48 else "no"


def rows(docs: dict[str, dict]) -> tuple[list[list[str]], list[str]]:
    out, nulls = [], []
    for name, doc in docs.items():
        base = Path(name).name
        for res in doc["results"]:
            B, L, H, Hg, D = res["N_seq"], res["L_seg"], res["H"], res["Hg"], res["D"]
            assert res["C_pto"] == 128 and (B, L, D) == (doc["N_seq"], doc["L_seg"], doc["D"]), name
            keys = [(f"{s}{suffix}", s, suffix) for suffix in SUFFIXES for s in STAGES] + [("mega_ms", "", None)]
            for key, stage, suffix in keys:
                if key not in res:
                    continue
                value = res[key]
                if suffix is None:
                    kernel, C, dtype, impl, tag = "gdn_pto_fused", 128, "fp16", "megagdn-pto-fused", "mega"
                else:
                    kernel, C, dtype, impl, tag = SUFFIXES[suffix]
                if value is None:
                    nulls.append(f"{base} H={H}: {key} is null")
                    continue
                shape = f"B={B};T={L};H={H};Hg={Hg};K={D};V={D};C={C}"
                row_id = "-".join(filter(None, (tag, stage, f"L{L}", f"H{H}")))
                out.append([row_id, kernel, stage, shape, dtype, f"{value * 1000:.3f}", impl, timed(kernel, stage),
                            f"{base} H={H}: {key} = {value!r}", held_out(L, H)])
    return out, nulls


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--git-dir", type=Path, help="a clone or bare mirror of github.com/" + REPO)
    p.add_argument("--rev", default="3a59190")
    p.add_argument("--json-dir", type=Path)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "kda/validation/megagdn.csv")
    args = p.parse_args(argv)
    if (args.git_dir is None) == (args.json_dir is None):
        p.error("give one of --git-dir and --json-dir")
    docs = {}
    for f in FILES:
        if args.git_dir:
            text = subprocess.run(["git", f"--git-dir={args.git_dir}", "show", f"{args.rev}:{f}"], check=True,
                                  capture_output=True, text=True).stdout
        else:
            text = (args.json_dir / Path(f).name).read_text()
        docs[f] = json.loads(text)
    out, nulls = rows(docs)
    with args.out.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(HEADER)
        w.writerows(out)
    print(f"{args.out}: {len(out)} rows; left out {len(nulls)} nulls:", *nulls, sep="\n  ", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
