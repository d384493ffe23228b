"""FLA's in-kernel input options as a Vector phase of the design (`python -m kda.run --qk-l2norm-in-kernel
--gate-in-kernel --beta-sigmoid-in-kernel`; kda.chunk_kda's use_qk_l2norm_in_kernel, use_gate_in_kernel,
use_beta_sigmoid_in_kernel compute the same numbers, kda/driver/fla_options.py).

`with_in_kernel(design, options)` puts one pass in front of the design: per (sequence, chunk) item, Phase
prep (Vec) loads the raw inputs the options touch and stores what the design reads in their place, each
the exact formula of FLA's kernels:

    qk_l2norm     Q, K <- x * rsqrt(sum x^2 + 1e-6) over each row's d_k channels   (FLA's l2norm_fwd)
    gate          g <- -exp(A_log) * softplus(g + dt_bias)                         (FLA's kda_gate)
                  g <- lower_bound * sigmoid(exp(A_log) * (g + dt_bias))          (with lower_bound)
    beta_sigmoid  beta <- sigmoid(beta)                                             (fused_beta_sigmoid)

A_log is one value per value head, dt_bias one per value head and key channel (both in GM, fp32). The
pass is inside the design's kernel: it starts the launch, and the design's first pass follows it after
an all-core barrier (what it stores goes through GM, as FLA's separate l2norm kernel's does). So the
ISA model charges every instruction of it (npusim/chip/isa.py), its loads, stores and casts.
"""
from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F

from npusim import phase_program
from npusim.model.schedule import BARRIER, CHUNKS, Design, Pass

QK_L2NORM, GATE, BETA_SIGMOID = "qk_l2norm", "gate", "beta_sigmoid"
IN_KERNEL = (QK_L2NORM, GATE, BETA_SIGMOID)
L2NORM_EPS = 1e-6             # FLA's l2norm_fwd default
PASS_NAME = "in_kernel"


def _outputs(options: tuple[str, ...]) -> tuple[str, ...]:
    return ((("Q", "K") if QK_L2NORM in options else ()) + (("g",) if GATE in options else ())
            + (("beta",) if BETA_SIGMOID in options else ()))


def prep_program(options: tuple[str, ...], with_bias: bool = True, lower_bound: float | None = None):
    """The phase program of the options (a subset of IN_KERNEL); `with_bias`: the gate adds dt_bias;
    `lower_bound`: FLA's bounded gate (a sigmoid in place of the softplus)."""
    unknown = [o for o in options if o not in IN_KERNEL]
    if unknown or not options:
        raise ValueError(f"in-kernel options must be a non-empty subset of {', '.join(IN_KERNEL)}, got "
                         f"{', '.join(options) or 'none'}")

    def prep(npu, Q, K, g, beta, A_log, dt_bias):
        out = []
        with npu.vec("prep"):
            if QK_L2NORM in options:
                Q_normed = Q * torch.rsqrt((Q * Q).sum(-1, keepdim=True) + L2NORM_EPS)
                K_normed = K * torch.rsqrt((K * K).sum(-1, keepdim=True) + L2NORM_EPS)
                out += [Q_normed, K_normed]
            if GATE in options:
                raw = g + dt_bias if with_bias else g
                if lower_bound is None:
                    g_gated = -A_log.exp() * F.softplus(raw)
                else:
                    g_gated = lower_bound * torch.sigmoid(A_log.exp() * raw)
                out.append(g_gated)
            if BETA_SIGMOID in options:
                beta_sig = torch.sigmoid(beta)
                out.append(beta_sig)
        return tuple(out)

    name = "in_kernel(" + ",".join(o if o != GATE or lower_bound is None else f"{o}>={lower_bound:g}"
                                   for o in IN_KERNEL if o in options) + ")"
    return phase_program(name, returns=_outputs(options),
                         description="FLA's in-kernel options on the Vector")(prep)


def with_in_kernel(design: Design, options: tuple[str, ...], with_bias: bool = True,
                   lower_bound: float | None = None) -> Design:
    """`design` with the options' Vector pass in front (one launch; the design follows after a barrier)."""
    first = Pass(PASS_NAME, prep_program(tuple(options), with_bias, lower_bound), CHUNKS)
    rest = (replace(design.passes[0], boundary=BARRIER),) + design.passes[1:]
    stored = design.notes.get("stored", "")
    notes = {**design.notes, "stored": ",".join(x for x in (stored, "g=fp32,beta=fp32") if x),
             "in_kernel": ",".join(options)}
    return Design(design.name, (first,) + rest, design.description, notes)
