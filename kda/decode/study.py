"""Decode steps for the command line, the API's checks and the docs: designs x batches x tokens x state types
on one profile, each timed on the chip and (where asked) computed for real against the fp64 recurrence and
against a prefill followed by this step.

    settings = DecodeSettings(designs=("step", "chunked"), batches=(1, 8, 64), tokens=(1, 4))
    results = evaluate(settings)              # one DecodeResult per (design, batch, tokens, state type)
    crossover(results_of_one_design)          # the last launch-bound batch, the first bandwidth-bound one

The prefill check: `prefill` tokens of each sequence through kda.chunk_kda (version v6, numerically safe on any gate), then this decode
step from its final state; the step's output and final state must equal the fp64 recurrence over all the
tokens, and its final state the prefill of the longer sequence (FLA's tolerance both times).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from npusim import NpuSimError, load_profile
from npusim.model.limits import check_chunk

from kda.decode.design import DecodeDesign
from kda.decode.kernels import MEASURED
from kda.decode.numerics import DecodeInputs, StepParity, check, reference, run_step, stored
from kda.decode.programs import DESIGNS
from kda.decode.programs.steps import BETA_SIGMOID, GATE, OPTIONS, QK_L2NORM
from kda.decode.timing import FLOOR, LAUNCH, DecodeRun, DecodeShape, options_for, time_step, types_for
from kda.driver.checks import KdaInputError
from kda.reference.parity import Parity, compare

ALL_DESIGNS: dict[str, DecodeDesign] = {**DESIGNS, **MEASURED}
MAX_BATCH = 65536            # sequences a step takes here (sglang's largest graph buckets are far below)
MAX_STATES = 1 << 21         # (sequence, value head) states of one step: 2M states = 128 GiB of fp32 state
NUMERIC_ITEMS = 2048         # the numerics run on the first sequences up to this many states
EXACT_POINTS = 16            # sweeps of more points extrapolate long workers (kda/decode/timing.py `replay`)


@dataclass(frozen=True)
class DecodeSettings:
    designs: tuple[str, ...] = ("step",)
    batches: tuple[int, ...] = (32,)
    heads: int = 32
    value_heads: int | None = None        # None: as many as heads
    tokens: tuple[int, ...] = (1,)
    d_k: int = 128
    d_v: int = 128
    dtype: str = "bf16"                   # q, k, v and o in GM
    state_dtypes: tuple[str, ...] = ("fp32",)
    profile: str = "ascend-910b2"
    options: tuple[str, ...] = ()         # FLA's in-kernel options (qk_l2norm, gate, beta_sigmoid)
    lower_bound: float | None = None      # the bounded gate (with the gate in the kernel)
    warm: bool = False                    # the state warm in L2 (a benchmark that repeats one call)
    numerics: bool = True
    seed: int = 0
    seqlens: tuple[int, ...] | None = None   # cu_seqlens-style: tokens of each sequence of one step
    prefill: int = 64                     # tokens before the step in the prefill check (0: no check)
    overrides: tuple[tuple[str, float], ...] = ()   # profile fields set for this run (SECTION.FIELD, value)

    @property
    def hv(self) -> int:
        return self.value_heads or self.heads


@dataclass
class DecodeResult:
    design: DecodeDesign
    run: DecodeRun
    parity: StepParity | None = None
    prefill: StepParity | None = None       # the step after a prefill, against the recurrence of all tokens
    prefill_state: Parity | None = None     # its final state against the prefill of the longer sequence
    checked_sequences: int = 0              # sequences the numerics ran on (the first ones)

    @property
    def batch(self) -> int:
        return self.run.shape.batch

    @property
    def tokens(self) -> int:
        return self.run.shape.tokens

    @property
    def state(self) -> str:
        return self.run.types.state


def check_settings(s: DecodeSettings) -> None:
    """One line naming what is wrong (KdaInputError), before any work."""
    unknown = [d for d in s.designs if d not in ALL_DESIGNS]
    if unknown or not s.designs:
        raise KdaInputError(f"unknown decode design {unknown[0] if unknown else ''!r}: choose from "
                            f"{', '.join(ALL_DESIGNS)} or all")
    if not s.batches or min(s.batches) < 1:
        raise KdaInputError(f"--batch must be >= 1 (one sequence at least), got {min(s.batches, default=0)}")
    if max(s.batches) > MAX_BATCH:
        raise KdaInputError(f"--batch {max(s.batches)} is absurd for one decode step: at most {MAX_BATCH} sequences")
    if s.heads < 1 or s.hv < 1 or s.hv % s.heads:
        raise KdaInputError(f"--value-heads {s.hv} must be a positive multiple of --heads {s.heads}")
    if max(s.batches) * s.hv > MAX_STATES:
        raise KdaInputError(f"--batch {max(s.batches)} x {s.hv} value heads = {max(s.batches) * s.hv:,} states: "
                            f"more than {MAX_STATES:,} in one step")
    if min(s.d_k, s.d_v) < 1 or not s.tokens or min(s.tokens) < 1:
        raise KdaInputError("--dk, --dv and --tokens must be >= 1")
    check_chunk(max(s.seqlens or s.tokens), s.d_k, s.d_v, 1, "one decode item (its tokens and its state)")
    bad = [o for o in s.options if o not in OPTIONS]
    if bad:
        raise KdaInputError(f"unknown in-kernel option {bad[0]!r}: choose from {', '.join(OPTIONS)}")
    if s.lower_bound is not None and GATE not in s.options:
        raise KdaInputError("--gate-lower-bound bounds the gate computed in the kernel: it needs --gate-in-kernel")
    if s.seqlens is not None and (not s.seqlens or min(s.seqlens) < 1):
        raise KdaInputError("--seqlens: every sequence of the step needs a token at least")
    for name in s.designs:
        _check_design(ALL_DESIGNS[name], s)


def _check_design(d: DecodeDesign, s: DecodeSettings) -> None:
    lo, hi = d.tokens
    most = max(s.seqlens) if s.seqlens else max(s.tokens)
    if min(s.seqlens or s.tokens) < lo or most > hi:
        raise KdaInputError(f"design {d.name} takes {lo}-{hi} tokens a step, asked for {most}"
                            + (" (MTP steps: --design step or chunked)" if hi == 1 else ""))
    for st in s.state_dtypes:
        if st not in d.state_dtypes:
            raise KdaInputError(f"design {d.name} keeps its state in {' or '.join(d.state_dtypes)}, not {st}")
    if d.head_dim is not None and (s.d_k, s.d_v) != (d.head_dim, d.head_dim):
        raise KdaInputError(f"design {d.name} takes K = V = {d.head_dim} only, asked for K={s.d_k}, V={s.d_v}")
    if d.v_tile and s.d_v % d.v_tile:
        raise KdaInputError(f"design {d.name} cuts V into tiles of {d.v_tile}: --dv {s.d_v} is not a multiple")
    if d.options is not None and s.options and set(s.options) != set(d.options):
        raise KdaInputError(f"design {d.name} runs {', '.join(d.options) or 'no in-kernel option'} in its kernel "
                            f"(asked: {', '.join(s.options)})")
    if d.gate == "gdn" and s.seqlens is not None:
        raise KdaInputError(f"design {d.name} is a GDN kernel of one token a step: no --seqlens")


def evaluate(s: DecodeSettings, errors: list[str] | None = None) -> list[DecodeResult]:
    """Every (design, state type, tokens, batch) of the settings, in that order. With `errors`, a step that
    cannot run (its phase fits no memory, ...) is named there and the others still run."""
    check_settings(s)
    profile = load_profile(s.profile)
    if s.overrides:
        profile = profile.replace(**{k.replace(".", "__", 1): v for k, v in s.overrides})
    exact = points(s) <= EXACT_POINTS
    out = []
    for name in s.designs:
        d = ALL_DESIGNS[name]
        for state in s.state_dtypes:
            types = types_for(d, s.dtype, state)
            for T in ((max(s.seqlens),) if s.seqlens else s.tokens):
                for B in ((len(s.seqlens),) if s.seqlens else s.batches):
                    shape = DecodeShape(B, s.heads, s.hv, s.d_k, s.d_v, T)
                    try:
                        run = time_step(d, shape, profile, types=types, options=options_for(d, s.options),
                                        warm=s.warm, exact=exact)
                        result = DecodeResult(d, run)
                        if s.numerics:
                            _numerics(result, s)
                    except (NpuSimError, ValueError) as err:
                        if errors is None:
                            raise
                        errors.append(f"{name} B={B} T={T} state {state}: {err}")
                        continue
                    out.append(result)
    return out


def points(s: DecodeSettings) -> int:
    """Steps the settings ask for."""
    per = 1 if s.seqlens else len(s.tokens) * len(s.batches)
    return len(s.designs) * len(s.state_dtypes) * per


def _numerics(r: DecodeResult, s: DecodeSettings) -> None:
    """The step on the first sequences (up to NUMERIC_ITEMS states), alone and after a prefill."""
    d, shape, types = r.design, r.run.shape, r.run.types
    n = max(1, min(shape.batch, NUMERIC_ITEMS // shape.value_heads))
    seqlens = s.seqlens[:n] if s.seqlens else (shape.tokens,) * n
    opts = options_for(d, s.options)
    full = make_inputs(d, s, seqlens, opts, prefill=s.prefill)
    step = decode_part(full, seqlens, s.prefill, packed=s.seqlens is not None)
    r.parity = check(d, step, types, opts, s.lower_bound)
    r.checked_sequences = n
    if s.prefill:
        r.prefill, r.prefill_state = prefill_check(d, full, seqlens, s, types, opts)


def make_inputs(d: DecodeDesign, s: DecodeSettings, seqlens, options, prefill: int = 0) -> DecodeInputs:
    """Random inputs of `len(seqlens)` sequences of `prefill` + seqlens[i] tokens in FLA's layout (a batch
    row each, padded to the longest), seeded: q, k normalised unless l2norm runs in the kernel; the log
    decay in (-inf, 0), or the raw gate with A_log, dt_bias (Kimi's init: A_log = log U(1, 16))."""
    gen = torch.Generator().manual_seed(s.seed)
    def rnd(*shape):
        return torch.randn(*shape, generator=gen)
    B, T, H, HV, K, V = len(seqlens), prefill + max(seqlens), s.heads, s.hv, s.d_k, s.d_v
    width = 1 if d.gate == "gdn" else K
    q, k = rnd(B, T, H, K), rnd(B, T, H, K)
    if QK_L2NORM not in options:
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    gate = GATE in options
    g = rnd(B, T, HV, width) if gate else F.logsigmoid(rnd(B, T, HV, width) + 2.0)
    beta = rnd(B, T, HV) if BETA_SIGMOID in options else torch.sigmoid(rnd(B, T, HV))
    A_log = torch.empty(HV).uniform_(1.0, 16.0, generator=gen).log() if gate else None
    dt_bias = rnd(HV * width) * 0.5 if gate else None
    state = rnd(B, HV, K, V) * 0.1
    return DecodeInputs(q, k, rnd(B, T, HV, V), g, beta, state, A_log, dt_bias)


def decode_part(x: DecodeInputs, seqlens, prefill: int, packed: bool) -> DecodeInputs:
    """The step's tokens (after `prefill` tokens) of every sequence: a batch of equal lengths, or packed
    into one row with cu_seqlens when the lengths differ (FLA's varlen layout)."""
    if not packed:
        T = max(seqlens)
        def cut(t):
            return t[:, prefill:prefill + T]
        return replace(x, q=cut(x.q), k=cut(x.k), v=cut(x.v), g=cut(x.g), beta=cut(x.beta))
    def pack(t):
        return torch.cat([t[b:b + 1, prefill:prefill + n] for b, n in enumerate(seqlens)], 1)
    cu = tuple([0] + list(torch.tensor(seqlens).cumsum(0).tolist()))
    return replace(x, q=pack(x.q), k=pack(x.k), v=pack(x.v), g=pack(x.g), beta=pack(x.beta), cu_seqlens=cu)


def prefill_check(d, full: DecodeInputs, seqlens, s: DecodeSettings, types, options):
    """(the step after a v6 prefill against the fp64 recurrence of all tokens, its final state against the v6
    prefill of the longer sequences)."""
    from kda.driver.chunk_kda import chunk_kda
    from kda.driver.fla_options import beta_sigmoid, kda_gate
    L = s.prefill
    kw: dict = dict(use_qk_l2norm_in_kernel=QK_L2NORM in options, output_final_state=True, version="v6",
                    transfer_dtype=torch.float32)
    g = kda_gate(full.g, full.A_log, full.dt_bias, s.lower_bound) if GATE in options else full.g   # FLA's
    beta = beta_sigmoid(full.beta) if BETA_SIGMOID in options else full.beta    # (GDN's gate is one wide)
    def head(t):
        return t[:, :L]
    _, h = chunk_kda(head(full.q), head(full.k), head(full.v), head(g), head(beta),
                     initial_state=full.initial_state, **kw)
    packed = s.seqlens is not None
    step = replace(decode_part(full, seqlens, L, packed), initial_state=h.float())
    o, S = run_step(d, step, types, options, s.lower_bound)
    whole = _whole(full, seqlens, L, packed)
    o_ref, S_ref = reference(stored(whole, types), options, s.lower_bound)
    o_ref = _tail(o_ref, seqlens, L) if packed else o_ref[:, L:]
    cu = None if whole.cu_seqlens is None else torch.tensor(whole.cu_seqlens)
    w = _whole(replace(full, g=g, beta=beta), seqlens, L, packed)
    _, h_long = chunk_kda(w.q, w.k, w.v, w.g, w.beta, initial_state=w.initial_state, cu_seqlens=cu, **kw)
    return StepParity(compare(o_ref, o), compare(S_ref, S)), compare(h_long.double(), S)


def _whole(full: DecodeInputs, seqlens, L: int, packed: bool) -> DecodeInputs:
    """All tokens of every sequence (prefill and step): the batch as it is, or packed with cu_seqlens."""
    if not packed:
        return full
    def pack(t):
        return torch.cat([t[b:b + 1, :L + n] for b, n in enumerate(seqlens)], 1)
    cu = tuple([0] + list(torch.tensor([L + n for n in seqlens]).cumsum(0).tolist()))
    return replace(full, q=pack(full.q), k=pack(full.k), v=pack(full.v), g=pack(full.g), beta=pack(full.beta),
                   cu_seqlens=cu)


def _tail(o_ref: torch.Tensor, seqlens, L: int) -> torch.Tensor:
    """The step's tokens of a packed reference output, packed the way the step packs them."""
    out, lo = [], 0
    for n in seqlens:
        out.append(o_ref[:, lo + L:lo + L + n])
        lo += L + n
    return torch.cat(out, 1)


@dataclass(frozen=True)
class Crossover:
    launch_bound_until: int | None        # the largest batch whose largest term is the launch
    bandwidth_bound_from: int | None      # the smallest batch from which HBM is the largest term
    floor_passes_launch: int | None       # the smallest batch whose HBM floor exceeds the launch


def crossover(results: list[DecodeResult]) -> Crossover:
    """Where a sweep over the batch of one design changes its bound."""
    rs = sorted(results, key=lambda r: r.batch)
    launch = [r.batch for r in rs if r.run.bound == LAUNCH]
    hbm = [r.batch for r in rs if r.run.bound == FLOOR]
    start = next((r.batch for i, r in enumerate(rs) if all(x.run.bound == FLOOR for x in rs[i:])), None)
    passes = next((r.batch for r in rs if r.run.floor_us > r.run.launch_us), None)
    return Crossover(max(launch) if launch else None, start if hbm else None, passes)


def finite(x: float) -> bool:
    return x is not None and math.isfinite(x)
