"""python benchmarks/decode_predictions.py [--check | --compare [--set SECTION.FIELD=VALUE ...] [--kdn-aiv-launch]]

The registered predictions of the measured decode kernels: every row of the held-out decode data
(kda/validation/decode.csv) by id, kernel, shape and type, predicted on the shipped calibrated chip, written to
kda/validation/predictions/<implementation>.csv (columns id, kernel, stage, shape, dtype, predicted_us, profile).
These files were committed with the kernels' models before the measured values were; a model changed later
reports its new figure beside the registered one. `--check` prints the rows whose prediction moved.
`--compare` puts the registered predictions beside the measured values (decode.csv) with the median |error|
of the targets' groups; with `--set` (a profile field changed) or `--kdn-aiv-launch` (PR 35's blocks read as
AIVs, all 40 at once), a post-hoc what-if beside them: never a registered prediction.

The rows and what each measured (the values are in decode.csv, not here):
  kdn35-*   MegaGDN-PTO PR 35's kdn_decode (fp32 in and out, fp32 state), B x HV of its bandwidth figure,
            NPU events with a 256 MiB L2 flush before each call: the state comes from HBM
  kdn34-*   MegaGDN-PTO PR 34's kernel at ac07e1c (fp16 inputs, fp32 state) at PR 35's decode point
  sgl635-*  sgl-kernel-npu PR 635's kernel in sglang at 128 concurrent sessions of Kimi-Linear, 8 of its 32 KDA
            heads per device (four devices); a whole model between two calls: the state from HBM
  vllm12869-*  vllm-ascend PR 12869's AscendC GDN decode, H = 16 q/k heads, HV = 32 value heads, bf16 inputs;
            its working set (<= 32 MiB of state) fits the 192 MB L2 and no flush is named: the state warm in L2
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from npusim import load_profile

from kda.kernels.registry import model

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "kda" / "validation" / "predictions"
PROFILE = "ascend-910b2"
COLUMNS = ("id", "kernel", "stage", "shape", "dtype", "predicted_us", "profile")

PR35 = ((32, 16), (32, 32), (64, 32), (64, 64), (128, 64), (128, 128), (256, 128))
ROWS = (
    *((f"kdn35-B{b}-HV{hv}", "kdn_decode", f"B={b};T=1;H={hv};HV={hv};K=128;V=128;state=fp32", "fp32",
       "megagdn-pto-decode") for b, hv in PR35),
    ("kdn34-B32-HV16", "kdn_decode_pr34", "B=32;T=1;H=16;HV=16;K=128;V=128;state=fp32", "fp16", "megagdn-pto-decode"),
    ("sgl635-B128-H8", "sgl_kda_decode", "B=128;T=1;H=8;HV=8;K=128;V=128;state=fp32", "bf16", "sgl-kernel-npu"),
    *((f"vllm12869-B{b}", "gdn_decode_ascendc", f"B={b};T=1;H=16;HV=32;K=128;V=128;state=fp32;L2=warm", "bf16",
       "vllm-ascend-ascendc") for b in (1, 4, 8, 16)),
)


def predictions() -> dict[str, list[dict]]:
    profile = load_profile(PROFILE)
    out: dict[str, list[dict]] = {}
    for row_id, kernel, shape, dtype, implementation in ROWS:
        us = model(kernel, shape, dtype).predict(profile)
        out.setdefault(implementation, []).append(
            {"id": row_id, "kernel": kernel, "stage": "", "shape": shape, "dtype": dtype,
             "predicted_us": f"{us:.3f}", "profile": PROFILE})
    return out


GROUPS = {"910B2 kernels (MegaGDN-PTO, sgl-kernel-npu)": ("megagdn-pto-decode", "sgl-kernel-npu"),
          "AscendC GDN decode (vllm-ascend)": ("vllm-ascend-ascendc",)}


def compare(overrides: dict[str, float], aiv_launch: bool) -> None:
    """Registered, measured and (with a what-if) the what-if's predictions, row by row, and the medians."""
    from dataclasses import replace
    from statistics import median

    from kda.decode.design import AIVS
    from kda.kernels import decode
    registered = {r["id"]: float(r["predicted_us"]) for p in OUT.glob("*.csv") for r in csv.DictReader(p.open())}
    measured = list(csv.DictReader((ROOT / "kda" / "validation" / "decode.csv").open(encoding="utf-8")))
    what_if = bool(overrides or aiv_launch)
    profile = load_profile(PROFILE)
    if overrides:
        profile = profile.replace(**{k.replace(".", "__", 1): v for k, v in overrides.items()})
    kernels = dict(decode.DECODE_KERNELS)
    if aiv_launch:
        decode.DECODE_KERNELS["kdn_decode"] = replace(kernels["kdn_decode"], workers=AIVS)
    try:
        print(f"{'id':<20}{'measured':>10}{'registered':>12}{'error':>8}" + (f"{'what-if':>10}{'error':>8}" if what_if else ""))
        errors: dict[str, list] = {}
        for r in measured:
            m, reg = float(r["measured_us"]), registered[r["id"]]
            line = f"{r['id']:<20}{m:>10.1f}{reg:>12.1f}{reg / m - 1:>+8.0%}"
            new = model(r["kernel"], r["shape"], r["dtype"]).predict(profile) if what_if else reg
            if what_if:
                line += f"{new:>10.1f}{new / m - 1:>+8.0%}"
            errors.setdefault(r["implementation"], []).append((abs(reg / m - 1), abs(new / m - 1)))
            print(line)
    finally:
        decode.DECODE_KERNELS.update(kernels)
    for label, impls in GROUPS.items():
        rows = [e for i in impls for e in errors.get(i, [])]
        text = f"{label}: median |error| {median(e[0] for e in rows):.0%} registered"
        print(text + (f", {median(e[1] for e in rows):.0%} what-if" if what_if else "") + f" ({len(rows)} rows)")
    if what_if:
        print("what-if: " + ", ".join([f"{k}={v:g}" for k, v in overrides.items()]
                                      + (["PR 35's blocks as AIVs"] if aiv_launch else []))
              + " (post hoc: not a registered prediction)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/decode_predictions.py", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the registered files instead of writing")
    ap.add_argument("--compare", action="store_true", help="registered predictions beside the measured values")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                    help="with --compare: a profile field changed (a post-hoc what-if)")
    ap.add_argument("--kdn-aiv-launch", action="store_true",
                    help="with --compare: PR 35's 40 blocks read as AIVs of a Vector-only launch (a what-if)")
    args = ap.parse_args(argv)
    if args.compare:
        compare({k: float(v) for k, _, v in (x.partition("=") for x in args.set)}, args.kdn_aiv_launch)
        return 0
    moved = 0
    for implementation, rows in predictions().items():
        path = OUT / f"{implementation}.csv"
        if args.check:
            registered = {r["id"]: r["predicted_us"] for r in csv.DictReader(path.open(encoding="utf-8"))}
            for r in rows:
                if registered.get(r["id"]) != r["predicted_us"]:
                    moved += 1
                    print(f"{r['id']}: registered {registered.get(r['id'])} us, now {r['predicted_us']} us")
            continue
        OUT.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {path.relative_to(ROOT)} ({len(rows)} rows)")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
