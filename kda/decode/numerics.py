"""A decode step computed for real: the design's phase program on every work item of the batch at once
(the Executor of npusim/record/program.py), in FLA's layout, against the fp64 recurrence.

    q, k [B, T, H, K]   v [B, T, HV, V]   g [B, T, HV, K] (or [.., 1]: GDN)   beta [B, T, HV]
    initial_state [N, HV, K, V]   (N = B, or the number of sequences of cu_seqlens, with B = 1)
    A_log [HV], dt_bias [HV * K] or [HV, K]   (with the gate in the kernel)

Value head j reads q/k head j // (HV / H) (grouped value heads). Each (sequence, value head) is one item
(or V / v_tile items, a tile of its value columns); sequences of one length run together. Inputs are
rounded to their GM types first (q, k, v to the io type, g and beta to the gate type, the state to the
state type), o and the state back to theirs after: what the kernel reads and writes.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from npusim import Executor
from npusim.record.precision import DTYPES

from kda.decode.design import DecodeDesign
from kda.decode.programs.steps import BETA_SIGMOID, GATE, QK_L2NORM
from kda.decode.timing import Types, input_types, precision_of
from kda.reference.parity import Parity, compare
from kda.reference.recurrence import naive_recurrent_kda


@dataclass
class DecodeInputs:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    g: torch.Tensor
    beta: torch.Tensor
    initial_state: torch.Tensor
    A_log: torch.Tensor | None = None
    dt_bias: torch.Tensor | None = None
    cu_seqlens: tuple[int, ...] | None = None
    scale: float | None = None

    @property
    def heads(self) -> int:
        return self.q.shape[2]

    @property
    def value_heads(self) -> int:
        return self.v.shape[2]

    def sequences(self) -> list[tuple[int, int, int]]:
        """(batch row, first token, tokens) of every sequence."""
        if self.cu_seqlens is None:
            return [(b, 0, self.q.shape[1]) for b in range(self.q.shape[0])]
        cu = self.cu_seqlens
        return [(0, lo, hi - lo) for lo, hi in zip(cu, cu[1:])]


def _round(x: torch.Tensor, dtype: str) -> torch.Tensor:
    return x.to(DTYPES[dtype]).to(torch.float32)


def run_step(design: DecodeDesign, x: DecodeInputs, types: Types, options: tuple[str, ...] = (),
             lower_bound: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(o [B, T, HV, V], final state [N, HV, K, V]) of the design's program, in fp32."""
    B, T, H, K = x.q.shape
    HV, V = x.value_heads, x.v.shape[-1]
    group = HV // H
    vt = design.v_tile or V
    tiles = V // vt
    scale = K ** -0.5 if x.scale is None else x.scale
    gate = GATE in options
    q, k, v = (_round(t, types.io) for t in (x.q, x.k, x.v))
    g, beta = _round(x.g, types.gate), _round(x.beta, types.gate)
    S0 = _round(x.initial_state, types.state)
    A_log = None if x.A_log is None else x.A_log.float().reshape(HV, 1)
    dt_bias = None if x.dt_bias is None else x.dt_bias.float().reshape(HV, -1)
    o = torch.zeros(B, T, HV, V)
    final = torch.zeros_like(S0)
    seqs = x.sequences()
    for length in sorted({n for _, _, n in seqs}):
        chosen = [(i, s) for i, s in enumerate(seqs) if s[2] == length]
        items = [(i, b, lo, j, t) for i, (b, lo, n) in chosen for j in range(HV) for t in range(tiles)]
        batch = _items(items, q, k, v, g, beta, S0, A_log, dt_bias, group, vt, length, design.state_layout, gate)
        batch.update(scale=scale, options=options, lower_bound=lower_bound)
        ex = Executor(design.program, precision_of(design, types), input_types=input_types(types))
        ex.record({k_: (v_[:1] if isinstance(v_, torch.Tensor) else v_) for k_, v_ in batch.items()}, None,
                  shapes={"chunk_size": length, "d_k": K, "d_v": vt})
        out, _ = ex.step(batch, None, 0)
        o_items, S_items = _round(out["o"], types.io), _round(out["S_out"], types.state)
        if design.state_layout == "vk":
            S_items = S_items.mT
        for n, (i, b, lo, j, t) in enumerate(items):
            cols = slice(t * vt, (t + 1) * vt)
            o[b, lo:lo + length, j, cols] = o_items[n]
            final[i, j, :, cols] = S_items[n]
    return o, final


def _items(items, q, k, v, g, beta, S0, A_log, dt_bias, group, vt, length, layout, gate) -> dict:
    """The inputs of the listed items, stacked on a leading axis."""
    def take(x, head_of):
        return torch.stack([x[b, lo:lo + length, head_of(j)] for _, b, lo, j, _ in items])
    def cols(t):
        return slice(t * vt, (t + 1) * vt)
    state = torch.stack([S0[i, j, :, cols(t)] for i, _, _, j, t in items])
    out = {"q": take(q, lambda j: j // group), "k": take(k, lambda j: j // group),
           "v": torch.stack([v[b, lo:lo + length, j, cols(t)] for _, b, lo, j, t in items]),
           "g": take(g, lambda j: j), "beta": torch.stack([beta[b, lo:lo + length, j] for _, b, lo, j, _ in items]),
           "S_in": state.mT.contiguous() if layout == "vk" else state}
    if gate:
        out["A_log"] = torch.stack([A_log[j] for _, _, _, j, _ in items])
        out["dt_bias"] = torch.stack([dt_bias[j] for _, _, _, j, _ in items])
    return out


def reference(x: DecodeInputs, options: tuple[str, ...] = (), lower_bound: float | None = None,
              kernel_l2norm: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The fp64 recurrence of the same step (FLA's formulas for the in-kernel options), per sequence."""
    from kda.driver.fla_options import beta_sigmoid, expand_groups, kda_gate, l2norm
    d = torch.float64
    B, T, H, K = x.q.shape
    HV = x.value_heads
    q, k, v, g, beta = (t.to(d) for t in (x.q, x.k, x.v, x.g, x.beta))
    if QK_L2NORM in options:
        q, k = l2norm(q), l2norm(k)
    if GATE in options:          # on the gate's own width: K channels, or one per head (GDN)
        if x.A_log is None:
            raise ValueError("the in-kernel gate needs A_log")
        g = kda_gate(g, x.A_log.to(d), None if x.dt_bias is None else x.dt_bias.to(d), lower_bound)
    if BETA_SIGMOID in options:
        beta = beta_sigmoid(beta)
    g = g.expand(*g.shape[:3], K)
    q, k = expand_groups(q, HV // H), expand_groups(k, HV // H)
    o = torch.zeros(B, T, HV, v.shape[-1], dtype=d)
    final = torch.zeros_like(x.initial_state, dtype=d)
    for i, (b, lo, n) in enumerate(x.sequences()):
        s = slice(lo, lo + n)
        o_n, S_n = naive_recurrent_kda(q[b:b + 1, s], k[b:b + 1, s], v[b:b + 1, s], g[b:b + 1, s], beta[b:b + 1, s],
                                       x.scale, x.initial_state[i:i + 1].to(d), True, dtype=d)
        o[b, s], final[i] = o_n[0], S_n[0]
    return o, final


@dataclass(frozen=True)
class StepParity:
    output: Parity
    state: Parity

    @property
    def passed(self) -> bool:
        return self.output.passed and self.state.passed


def stored(x: DecodeInputs, types: Types) -> DecodeInputs:
    """The inputs as GM holds them: what a reference of the kernel's arithmetic starts from."""
    return replace(x, q=_round(x.q, types.io), k=_round(x.k, types.io), v=_round(x.v, types.io),
                   g=_round(x.g, types.gate), beta=_round(x.beta, types.gate),
                   initial_state=_round(x.initial_state, types.state))


def check(design: DecodeDesign, x: DecodeInputs, types: Types, options: tuple[str, ...] = (),
          lower_bound: float | None = None) -> StepParity:
    """The design's step against the fp64 recurrence on the same stored inputs (FLA's tolerance:
    kda/reference/parity.py)."""
    o, S = run_step(design, x, types, options, lower_bound)
    o_ref, S_ref = reference(stored(x, types), options, lower_bound)
    return StepParity(compare(o_ref, o), compare(S_ref, S))
