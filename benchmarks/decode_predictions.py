"""python benchmarks/decode_predictions.py [--compare [--set SECTION.FIELD=VALUE ...] [--kdn-aiv-launch]]

The registered predictions of the measured decode kernels: kda/validation/predictions/<implementation>.csv
(megagdn-pto-decode, sgl-kernel-npu, vllm-ascend-ascendc), one row for every row of the held-out decode data
(kda/validation/decode.csv) by id, kernel, shape and type, predicted on the shipped calibrated chip. They were
committed with the kernels' models before the measured values were; `python scripts/register_predictions.py
FILE` fills a new row and never rewrites a registered figure. Without options this prints the rows whose model
figure moved since (reported re-registered, both figures, as kda.validate does). `--compare` puts the
registered predictions, and the model's figure now where it moved, beside the measured values with the median
|error| of the targets' groups; with `--set` (a profile field changed) or `--kdn-aiv-launch` (PR 35's blocks
read as AIVs, all 40 at once), a post-hoc what-if beside them: never a registered prediction.

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
from kda.studies import predictions as registered_files

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "kda" / "validation" / "predictions"
FILES = tuple(OUT / f"{name}.csv" for name in ("megagdn-pto-decode", "sgl-kernel-npu", "vllm-ascend-ascendc"))
PROFILE = "ascend-910b2"


def registered() -> dict[str, registered_files.Prediction]:
    """The decode predictions as registered, by id."""
    return {p.id: p for path in FILES for p in registered_files.read(path)}


def now(p: registered_files.Prediction) -> float | None:
    """The model's figure now for a registered prediction, None where it has not moved (kda.validate's
    tolerance)."""
    us = registered_files.model_of(p).predict(load_profile(p.profile))
    return None if abs(us / p.predicted_us - 1) <= registered_files.TOLERANCE else us


GROUPS = {"910B2 kernels (MegaGDN-PTO, sgl-kernel-npu)": ("megagdn-pto-decode", "sgl-kernel-npu"),
          "AscendC GDN decode (vllm-ascend)": ("vllm-ascend-ascendc",)}


def compare(overrides: dict[str, float], aiv_launch: bool) -> None:
    """Registered, measured and (with a what-if) the what-if's predictions, row by row, and the medians."""
    from dataclasses import replace
    from statistics import median

    from kda.decode.design import AIVS
    from kda.kernels import decode
    regs = registered()
    moved = {i: now(p) for i, p in regs.items()}           # the shipped model, before any what-if
    measured = list(csv.DictReader((ROOT / "kda" / "validation" / "decode.csv").open(encoding="utf-8")))
    what_if = bool(overrides or aiv_launch)
    profile = load_profile(PROFILE)
    if overrides:
        profile = profile.replace(**{k.replace(".", "__", 1): v for k, v in overrides.items()})
    kernels = dict(decode.DECODE_KERNELS)
    if aiv_launch:
        decode.DECODE_KERNELS["kdn_decode"] = replace(kernels["kdn_decode"], workers=AIVS)
    try:
        print(f"{'id':<20}{'measured':>10}{'registered':>12}{'error':>8}{'now':>9}"
              + (f"{'what-if':>10}{'error':>8}" if what_if else ""))
        errors: dict[str, list] = {}
        for r in measured:
            m, reg, cur = float(r["measured_us"]), regs[r["id"]].predicted_us, moved[r["id"]]
            line = f"{r['id']:<20}{m:>10.1f}{reg:>12.1f}{reg / m - 1:>+8.0%}{'' if cur is None else f'{cur:.1f}':>9}"
            new = model(r["kernel"], r["shape"], r["dtype"]).predict(profile) if what_if else reg
            if what_if:
                line += f"{new:>10.1f}{new / m - 1:>+8.0%}"
            errors.setdefault(r["implementation"], []).append((abs(reg / m - 1), abs(new / m - 1),
                                                               abs((cur or reg) / m - 1)))
            print(line)
    finally:
        decode.DECODE_KERNELS.update(kernels)
    for label, impls in GROUPS.items():
        rows = [e for i in impls for e in errors.get(i, [])]
        text = (f"{label}: median |error| {median(e[0] for e in rows):.0%} registered, "
                f"{median(e[2] for e in rows):.0%} now")
        print(text + (f", {median(e[1] for e in rows):.0%} what-if" if what_if else "") + f" ({len(rows)} rows)")
    if what_if:
        print("what-if: " + ", ".join([f"{k}={v:g}" for k, v in overrides.items()]
                                      + (["PR 35's blocks as AIVs"] if aiv_launch else []))
              + " (post hoc: not a registered prediction)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/decode_predictions.py", description=__doc__.splitlines()[0])
    ap.add_argument("--compare", action="store_true", help="registered predictions beside the measured values")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                    help="with --compare: a profile field changed (a post-hoc what-if)")
    ap.add_argument("--kdn-aiv-launch", action="store_true",
                    help="with --compare: PR 35's 40 blocks read as AIVs of a Vector-only launch (a what-if)")
    args = ap.parse_args(argv)
    if args.compare:
        compare({k: float(v) for k, _, v in (x.partition("=") for x in args.set)}, args.kdn_aiv_launch)
        return 0
    moved = [(p, us) for p in registered().values() if (us := now(p)) is not None]
    for p, us in moved:
        print(f"{p.id}: registered {p.predicted_us:g} us, the model now {us:.3f} us (re-registered)")
    print(f"{len(moved)} of {len(registered())} registered decode predictions moved (kda.validate reports them "
          f"re-registered, with both figures; the files keep the registered ones)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
