"""The inputs of a run, made from its settings: q, k, v, g, beta (and the initial state) from the seed, one
head per value head; FLA's in-kernel options applied as the design sees them; moved to the run's device."""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from kda.driver.device import resolve_device
from kda.driver.inputs import KdaInputs, make_inputs
from kda.settings.settings import Settings


def make_settings_inputs(s: Settings) -> KdaInputs:
    """The run's inputs, one head per value head; with grouped value heads the value heads of a group share
    their q/k head's q and k (the first head's of the group, repeated: FLA's numerics of grouped heads)."""
    if not s.seqlens:
        x = make_inputs(s.batch, s.T, s.v_heads, s.d_k, s.d_v, s.gates, s.seed, s.initial_state)
    else:
        x = make_inputs(1, s.T, s.v_heads, s.d_k, s.d_v, s.gates, s.seed, False)      # FLA's varlen layout
        if s.initial_state:
            gen = torch.Generator().manual_seed(s.seed + 1)
            x = replace(x, initial_state=torch.randn(len(s.seqlens), s.v_heads, s.d_k, s.d_v, generator=gen))
    if s.group > 1:
        def shared(t):
            return t[:, :, ::s.group].repeat_interleave(s.group, dim=2)
        x = replace(x, q=shared(x.q), k=shared(x.k))
    return x


def in_kernel_params(s: Settings, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(A_log [HV], dt_bias [HV * K]) of the in-kernel gate, from the seed as FLA's KDA layer initialises them:
    A uniform in [1, 16], dt log-uniform in [0.001, 0.1] and dt_bias its inverse softplus."""
    gen = torch.Generator().manual_seed(s.seed + 2)
    A_log = torch.empty(s.v_heads).uniform_(1.0, 16.0, generator=gen).log()
    dt = torch.empty(s.v_heads * s.d_k).uniform_(math.log(1e-3), math.log(1e-1), generator=gen).exp()
    dt_bias = dt + torch.log(-torch.expm1(-dt))
    return A_log.to(device or "cpu"), dt_bias.to(device or "cpu")


def apply_in_kernel(x: KdaInputs, s: Settings) -> KdaInputs:
    """The inputs as the design sees them after FLA's in-kernel options (kda/driver/fla_options.py's formulas)."""
    if not s.in_kernel:
        return x
    from kda.driver.fla_options import beta_sigmoid, kda_gate, l2norm
    from kda.programs.in_kernel import BETA_SIGMOID, GATE, QK_L2NORM
    q, k, g, beta = x.q, x.k, x.g, x.beta
    if QK_L2NORM in s.in_kernel:
        q, k = l2norm(q), l2norm(k)
    if GATE in s.in_kernel:
        A_log, dt_bias = in_kernel_params(s, g.device)
        g = kda_gate(g, A_log, dt_bias, s.gate_lower_bound).to(g.dtype)
    if BETA_SIGMOID in s.in_kernel:
        beta = beta_sigmoid(beta).to(beta.dtype)
    return replace(x, q=q, k=k, g=g, beta=beta)


def on_device(x: KdaInputs, device: str) -> KdaInputs:
    """The inputs on `device` (made on the CPU from a seed: the same numbers on every device)."""
    dev = resolve_device(device)
    if x.q.device == dev:
        return x
    return KdaInputs(x.q.to(dev), x.k.to(dev), x.v.to(dev), x.g.to(dev), x.beta.to(dev),
                     None if x.initial_state is None else x.initial_state.to(dev))


def cu_seqlens(settings: Settings) -> list[int] | None:
    """FLA's cu_seqlens of a variable-length batch (None: a batch of equal lengths)."""
    if not settings.seqlens:
        return None
    cu = [0]
    for n in settings.seqlens:
        cu.append(cu[-1] + n)
    return cu
