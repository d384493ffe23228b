"""One tolerance rule for every comparison: flash-linear-attention's `assert_close` metric.

Pass if the max absolute error is <= 1e-6; otherwise RMS(ref - x) / RMS(ref) must be below the ratio
(0.005 for outputs and final states in FLA's tests/ops/test_kda.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

RATIO = 0.005
ATOL = 1e-6


@dataclass(frozen=True)
class Parity:
    max_abs_err: float
    rel_rms_err: float
    passed: bool
    finite: bool

    def to_dict(self) -> dict:
        return {"max_abs_err": _json_float(self.max_abs_err), "rel_rms_err": _json_float(self.rel_rms_err),
                "pass": self.passed}


def _json_float(x: float):
    return x if math.isfinite(x) else None


def compare(ref: torch.Tensor, out: torch.Tensor, ratio: float = RATIO) -> Parity:
    ref = ref.detach().to(torch.float64)
    out = out.detach().to(device=ref.device, dtype=torch.float64)
    finite = bool(torch.isfinite(out).all()) and bool(torch.isfinite(ref).all())
    if not finite:
        return Parity(math.inf, math.inf, False, False)
    diff = ref - out
    max_abs = float(diff.abs().max()) if diff.numel() else 0.0
    rms_ref = float(ref.pow(2).mean().sqrt()) if ref.numel() else 0.0
    rel = float(diff.pow(2).mean().sqrt()) / rms_ref if rms_ref > 0 else (0.0 if max_abs == 0 else math.inf)
    return Parity(max_abs, rel, max_abs <= ATOL or rel < ratio, True)


def assert_close(name: str, ref: torch.Tensor, out: torch.Tensor, ratio: float = RATIO) -> Parity:
    """FLA-style assertion with a message that says by how much it failed."""
    p = compare(ref, out, ratio)
    assert p.passed, (f"{name}: max abs err {p.max_abs_err:.3e}, rel RMS err {p.rel_rms_err:.3e} "
                      f"(ratio {ratio})" + ("" if p.finite else ", non-finite values"))
    return p


# Gradients (FLA's tests/ops backward checks; docs/sources/kda.md): 0.008 for dq, dk, dv and the
# initial state's gradient, 0.02 for dg and dbeta. With fp32 hand-offs this project asks more of every
# gradient: rel RMS < 1e-5 against the fp64 autograd reference.
GRAD_RATIOS = {"o": RATIO, "ht": RATIO, "dq": 0.008, "dk": 0.008, "dv": 0.008, "dh0": 0.008,
               "dg": 0.02, "dbeta": 0.02}
FP32_RATIO = 1e-5


def tolerance(name: str, transfer: str) -> float:
    """The rel-RMS ratio a tensor (o, ht or a gradient) must meet, for hand-offs of type `transfer`."""
    if name not in GRAD_RATIOS:
        raise ValueError(f"no tolerance for {name!r}: one of {', '.join(GRAD_RATIOS)}")
    return FP32_RATIO if transfer in ("fp32", "fp64") else GRAD_RATIOS[name]
