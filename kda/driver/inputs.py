"""Test inputs in FLA's layout, reproducible from a seed.

q, k: randn, L2-normalised along the key dimension (FLA's tests and Kimi Linear normalise them; with raw
randn keys |k|^2 ~ d_k and the delta rule itself diverges). v: randn. beta = sigmoid(randn).
Gate families for g = log(alpha):
    seed    alpha = sigmoid(randn)          the design document's test inputs (section 8)
    kimi    g = -5 * sigmoid(randn)         FLA's lower_bound = -5 gate, as Kimi Linear uses it
    strong  alpha = 0.01                    a constant strong decay
    slow    alpha = sigmoid(randn + b_c)    b_c spread over [2, 8] by key channel: memories from tens of
                                            tokens to many chunks, so the state matters across chunks

With seed, kimi or strong gates a 64-token chunk decays every channel of the state by e^-50 or more, so
what a chunk inherits from the previous ones hardly counts; only slow gates test the state hand-off.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

GATES = ("seed", "kimi", "strong", "slow")


@dataclass
class KdaInputs:
    q: torch.Tensor       # [B, T, H, K]
    k: torch.Tensor       # [B, T, H, K]
    v: torch.Tensor       # [B, T, H, V]
    g: torch.Tensor       # [B, T, H, K]
    beta: torch.Tensor    # [B, T, H]
    initial_state: torch.Tensor | None = None   # [B, H, K, V]


def make_gates(shape: tuple[int, ...], family: str, gen: torch.Generator) -> torch.Tensor:
    if family == "seed":
        return F.logsigmoid(torch.randn(shape, generator=gen))
    if family == "kimi":
        return -5.0 * torch.sigmoid(torch.randn(shape, generator=gen))
    if family == "strong":
        return torch.full(shape, math.log(0.01))
    if family == "slow":
        bias = torch.linspace(2.0, 8.0, shape[-1])
        return F.logsigmoid(torch.randn(shape, generator=gen) + bias)
    raise ValueError(f"unknown gate family {family!r}: choose from {', '.join(GATES)}")


def make_inputs(batch: int = 1, tokens: int = 1024, heads: int = 1, d_k: int = 128, d_v: int = 128,
                gates: str = "seed", seed: int = 0, initial_state: bool = False) -> KdaInputs:
    """fp32 inputs; the same arguments always give the same tensors."""
    gen = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.randn(batch, tokens, heads, d_k, generator=gen), dim=-1)
    k = F.normalize(torch.randn(batch, tokens, heads, d_k, generator=gen), dim=-1)
    v = torch.randn(batch, tokens, heads, d_v, generator=gen)
    g = make_gates((batch, tokens, heads, d_k), gates, gen)
    beta = torch.sigmoid(torch.randn(batch, tokens, heads, generator=gen))
    h0 = torch.randn(batch, heads, d_k, d_v, generator=gen) if initial_state else None
    return KdaInputs(q, k, v, g, beta, h0)
