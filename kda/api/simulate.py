"""`kda.simulate`: FLA's chunk_kda call, timed on a simulated chip instead of computed.

    rep = kda.simulate(q, k, v, g, beta, cu_seqlens=cu, version="v6", profile="ascend-910b2")
    rep.latency_us, rep.bound_us, rep.syncs_per_chunk, rep.passes, rep.to_json()

Only the tensors' shapes and dtype are read (meta tensors will do): the Settings of the call are built from
them (B, T, H, K, V, grouped value heads, cu_seqlens, the transfer type), and the design's phase graphs are
recorded on random inputs of those shapes and replayed, as `kda.run --no-numerics` does; the JSON is the
one `kda.run --json` prints for the same settings (kda/schema/run.schema.json)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from kda.driver.checks import KdaInputError
from kda.programs import DEFAULT_DESIGN
from kda.settings import Settings
from kda.settings.profile import check_interleave, checked_profile
from kda.studies.evaluate import VersionResult, evaluate

TYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
# Settings a call may add that its tensors do not say (kda.run's options of the same names)
EXTRA = ("interleave", "cores", "overrides", "state_handoff", "workspace", "payload_dtypes", "state_dtype",
         "accumulate_dtype", "capacity", "core_model")
MAX_KEPT_EVENTS = 500_000           # beyond it no trace is kept, as on the command line (kda/cli/run_options.py)


@dataclass(frozen=True)
class Simulated:
    """The simulated report of one call: the layer's latency, bound and hand-offs, each pass, the JSON."""
    result: VersionResult

    @cached_property
    def json(self) -> dict:
        return self.result.to_json()

    @property
    def layer(self) -> dict:
        """The layer on the chip (the JSON's `layer`); KdaInputError where the run has no timing."""
        layer = self.json["layer"]
        if layer is None:        # a workspace plan that does not fit, or a phase its unit cannot hold
            why = self.result.workspace_error or self.result.capacity_error or "no timing"
            raise KdaInputError(f"no timing: {why}")
        return layer

    @property
    def latency_us(self) -> float:
        return self.layer["latency_us"]

    @property
    def serial_us(self) -> float:
        return self.layer["serial_us"]

    @property
    def bound_us(self) -> float:
        return self.layer["bound_us"]

    @property
    def syncs_per_chunk(self) -> int:
        """Cross-core hand-offs one (sequence, chunk) goes through, over every pass."""
        return self.layer["syncs_per_chunk"]

    @property
    def passes(self) -> list[dict]:
        """Each pass: its name, program, cores, makespan, bound, hand-offs and bytes."""
        return self.layer["passes"]

    def to_json(self) -> dict:
        """The JSON of `kda.run --json` for the same settings (a copy)."""
        import copy
        return copy.deepcopy(self.json)


def simulate(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=True, use_qk_l2norm_in_kernel=False,
             use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False, lower_bound=None, cu_seqlens=None, *,
             version: str = DEFAULT_DESIGN, profile: str = "ascend-910b2", chunk_size: int = 64, transfer_dtype=None,
             **options) -> Simulated:
    """The simulated timing of `chunk_kda(q, k, v, g, beta, ...)` by `version` (a design's name or a file's
    `path.py:NAME`) on `profile` (a shipped name or a .toml path). `options`: kda.run's settings the
    tensors do not say (EXTRA, e.g. interleave=2, cores=8, overrides={"sync.latency_us": 0.3}).
    Bad input: KdaInputError (or npusim.NpuSimError), one line."""
    settings = call_settings(q, v, cu_seqlens=cu_seqlens, version=version, profile=profile, chunk_size=chunk_size,
                             transfer_dtype=transfer_dtype, initial_state=initial_state is not None,
                             in_kernel=tuple(name for name, on in (("qk_l2norm", use_qk_l2norm_in_kernel),
                                                                   ("gate", use_gate_in_kernel),
                                                                   ("beta_sigmoid", use_beta_sigmoid_in_kernel)) if on),
                             lower_bound=lower_bound, options=options)
    _check_shapes(q, k, v, g, beta)
    try:
        chip = checked_profile(settings)
        check_interleave(settings, chip.chip.ai_cores)      # as kda.run: no more than a core holds
        result = evaluate(version, settings, profile=chip)
        if not settings.numerics:        # as kda.run: does the design stay finite on the settings' gates?
            from kda.studies.probe import probe_results
            probe_results([result])
        return Simulated(result)
    except KdaInputError:
        raise
    except ValueError as err:
        raise KdaInputError(str(err)) from None


def call_settings(q, v, *, cu_seqlens, version: str, profile: str, chunk_size: int, transfer_dtype, initial_state: bool,
                  in_kernel: tuple[str, ...], lower_bound, options: dict) -> Settings:
    """The Settings of a call: shapes from q [B, T, H, K] and v [B, T, HV, V], the transfer type from q's dtype
    (or `transfer_dtype`), the lengths from cu_seqlens; KdaInputError naming what is wrong."""
    from kda.programs import resolve
    try:
        resolve(version)
    except ValueError as err:
        raise KdaInputError(str(err)) from None
    unknown = sorted(set(options) - set(EXTRA))
    if unknown:
        raise KdaInputError(f"simulate: unknown option {unknown[0]!r} (besides FLA's: {', '.join(EXTRA)})")
    for name, x in (("q", q), ("v", v)):
        if not isinstance(x, torch.Tensor) or x.dim() != 4:
            raise KdaInputError(f"{name} must be a tensor [B, T, H, {'K' if name == 'q' else 'V'}], got "
                                f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if tuple(v.shape[:2]) != (B, T):
        raise KdaInputError(f"v {tuple(v.shape)} and q {tuple(q.shape)} differ in B, T")
    dtype = _transfer(q, transfer_dtype)
    seqlens = _seqlens(cu_seqlens, B, T)
    shape = dict(batch=1, tokens=None, seqlens=seqlens) if seqlens else dict(batch=B, tokens=T)
    chunks = max(-(-n // chunk_size) for n in (seqlens or (T,))) if chunk_size > 0 else 1
    keep = chunks * B * len(seqlens or (1,)) * HV * 20 <= MAX_KEPT_EVENTS
    try:
        return Settings(**shape, heads=H, value_heads=HV if HV != H else None, d_k=K, d_v=V, chunk_size=chunk_size,
                        dtype=dtype, profile=str(profile), numerics=False, initial_state=initial_state,
                        in_kernel=in_kernel, gate_lower_bound=lower_bound, keep_trace=keep, **options)
    except (TypeError, ValueError) as err:
        raise KdaInputError(str(err).splitlines()[0]) from None


def _check_shapes(q, k, v, g, beta) -> None:
    """k, g and beta shaped as chunk_kda takes them beside q [B, T, H, K] and v [B, T, HV, V] (shapes only:
    meta tensors time as well as real ones); KdaInputError naming the tensor."""
    B, T, H, K = q.shape
    HV = v.shape[2]
    expect = {"k": (k, [[B, T, H, K]]), "g": (g, [[B, T, HV, K], [B, T, HV, 1]]), "beta": (beta, [[B, T, HV]])}
    for name, (x, shapes) in expect.items():
        shape = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        if shape not in shapes:
            raise KdaInputError(f"{name} must have shape {shapes[0]} to match q {list(q.shape)} and v "
                                f"{list(v.shape)}, got {shape}")


def _transfer(q, transfer_dtype) -> str:
    if transfer_dtype is not None:
        name = TYPES.get(transfer_dtype, transfer_dtype)
        if name not in TYPES.values():
            raise KdaInputError(f"transfer_dtype: simulate times {', '.join(TYPES.values())} hand-offs, got "
                                f"{transfer_dtype!r:.40}")
        return name
    if q.dtype not in TYPES:
        raise KdaInputError(f"q is {q.dtype}: simulate times {', '.join(TYPES.values())} hand-offs "
                            f"(transfer_dtype= names one)")
    return TYPES[q.dtype]


def _seqlens(cu_seqlens, B: int, T: int) -> tuple[int, ...] | None:
    """Each sequence's tokens from FLA's cu_seqlens (B = 1), or None."""
    if cu_seqlens is None:
        return None
    cu = [int(x) for x in (cu_seqlens.tolist() if isinstance(cu_seqlens, torch.Tensor) else cu_seqlens)]
    if B != 1 or len(cu) < 2 or cu[0] != 0 or cu[-1] != T or any(b <= a for a, b in zip(cu, cu[1:])):
        raise KdaInputError(f"cu_seqlens {cu[:8]}{'...' if len(cu) > 8 else ''}: with B = 1, it must rise from 0 to "
                            f"T = {T}, each sequence at least one token (B is {B})")
    return tuple(b - a for a, b in zip(cu, cu[1:]))

