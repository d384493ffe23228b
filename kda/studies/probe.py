"""Does a design stay finite on the run's gates? A timing-only run computes no tensor math, so nothing in it
says whether the design it times overflows. The probe answers that cheaply: the design's real numerics on a
few chunks of one sequence, with the run's gate family, seed, chunk size, d_k, d_v, transfer and precision
policy and FLA's in-kernel options (the overflows of the chunk form happen inside the first chunk:
kda/studies/stability.py). A run with numerics is its own check.

Every answer that ranks designs ranks only the safe ones (`safe_and_apart`): a design that overflows, or
that nothing checked, is listed apart with the reason, never counted as a winner.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from npusim import NpuSimError

from kda.driver.checks import KdaInputError
from kda.settings import Settings


@dataclass(frozen=True)
class Overflow:
    """Where inf/NaN first appeared: the tensor, the phase or sync that made it, the chunk."""
    tensor: str
    where: str                   # "Phase A", "sync ④ (fp16)", "state hand-off (bf16)"
    phase: str | None            # the phase that produces the tensor
    chunk: int
    sequence: int

    @classmethod
    def of(cls, execution) -> "Overflow | None":
        nf = execution.nonfinite
        if nf is None:
            return None
        meta = execution.graph.tensors.get(nf.tensor) if execution.graph is not None else None
        return cls(nf.tensor, nf.where, meta.producer if meta is not None else None, nf.chunk, nf.sequence)

    def short(self) -> str:
        return f"{self.tensor} in {self.where}, chunk {self.chunk}"

    def to_dict(self) -> dict:
        return {"phase": self.phase, "tensor": self.tensor, "where": self.where, "chunk": self.chunk,
                "sequence": self.sequence}


@dataclass(frozen=True)
class Probe:
    """The probe of one design: `chunks` chunks of numerics (0: not checked, `error` may say why)."""
    version: str
    chunks: int
    chunk_size: int
    gates: str
    dtype: str
    overflow: Overflow | None = None
    error: str | None = None

    @property
    def checked(self) -> bool:
        return self.chunks > 0 and self.error is None

    @property
    def finite(self) -> bool | None:
        return None if not self.checked else self.overflow is None

    def text(self) -> str:
        """The overflow row's cell: what the probe found, or 'not checked'."""
        if not self.checked:
            return "not checked"
        return "finite (probe)" if self.overflow is None else \
            f"{self.overflow.short()} (probe)"

    def to_dict(self) -> dict:
        return {"chunks": self.chunks, "chunk_size": self.chunk_size, "gates": self.gates, "dtype": self.dtype,
                "finite": self.finite, "overflow": None if self.overflow is None else self.overflow.to_dict(),
                "error": self.error}


def probe_settings(settings: Settings) -> Settings:
    """The run's settings cut to the probe: `probe_chunks` chunks of one sequence, numerics on, nothing timed;
    what decides the numbers (gates, seed, sizes, types, in-kernel options) unchanged."""
    return replace(settings, batch=1, heads=1, value_heads=None, tokens=None, seqlens=None,
                   chunks=settings.probe_chunks, numerics=True, keep_trace=False, record=False, attribution=False,
                   interleave=1, cores=None, resident=None, workspace={}, overrides={})


def probe(version: str, settings: Settings) -> Probe:
    """The probe of `version` under the run's `settings` (settings.probe_chunks chunks; 0: not checked)."""
    if settings.probe_chunks == 0:
        return Probe(version, 0, settings.chunk_size, settings.gates, settings.dtype)
    return _probe(version, probe_settings(settings))


@functools.lru_cache(maxsize=256)
def _probe(version: str, s: Settings) -> Probe:
    """One probe per design and probe settings in a process (sweeps ask again for every timing point): the
    design's numerics alone, on one torch thread (chunk-sized matmuls gain nothing from more)."""
    import torch

    from kda.studies.evaluate import numerics
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ex = numerics(version, s, probe_inputs(s), foreign_payloads_ok=True)
    except (KdaInputError, NpuSimError, ValueError) as err:
        return Probe(version, 0, s.chunk_size, s.gates, s.dtype, error=str(err))
    finally:
        torch.set_num_threads(threads)
    return Probe(version, s.chunks, s.chunk_size, s.gates, s.dtype, Overflow.of(ex))


@functools.lru_cache(maxsize=8)
def probe_inputs(s: Settings):
    from kda.settings.inputs import make_settings_inputs
    return make_settings_inputs(s)


def probe_results(results) -> None:
    """Probe every timing-only result that has no probe yet (in place); a run with numerics is its own check."""
    for r in results:
        if r.parity_o is None and r.probe is None:
            r.probe = probe(r.version, r.settings)


def why_unsafe(r) -> str | None:
    """None if the result is known to stay finite on its run's gates; else why it is not ranked."""
    if r.parity_o is not None:
        o = Overflow.of(r.execution)
        return None if o is None else f"overflows: {o.short()}"
    if r.probe is None or not r.probe.checked:
        return "not checked" + (f" ({r.probe.error})" if r.probe is not None and r.probe.error else "")
    return None if r.probe.overflow is None else f"overflows in the probe: {r.probe.overflow.short()}"


def safe_and_apart(results) -> tuple[list, dict[str, str]]:
    """(the results that stay finite, fastest first by layer latency; version -> why each other is not
    ranked). Results without timing are in neither."""
    timed = [r for r in results if r.design_report is not None]
    apart = {r.version: why for r in timed if (why := why_unsafe(r)) is not None}
    safe = sorted((r for r in timed if r.version not in apart), key=lambda r: r.design_report.latency_us)
    return safe, apart


def why_unsafe_backward(r) -> str | None:
    """As why_unsafe, for a backward result (kda.studies.backward_eval.BackwardResult): its own numerics
    (forward and backward), else its probe."""
    if r.execution is not None:
        nf = r.execution.nonfinite
        return None if nf is None else f"overflows: {nf.tensor} in {nf.where}, chunk {nf.chunk}"
    if r.probe is None or not r.probe.checked:
        return "not checked" + (f" ({r.probe.error})" if r.probe is not None and r.probe.error else "")
    return None if r.probe.overflow is None else f"overflows in the probe: {r.probe.overflow.short()}"
