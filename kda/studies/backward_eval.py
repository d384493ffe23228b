"""One backward evaluation: the gradients on the simulated NPU against the fp64 autograd reference, and
the timing of the backward design (every pass, pipelined and serial) beside the forward design's.

    r = evaluate_backward("v4", Settings(chunks=16, dtype="bf16"), states="recompute")
    r.parity["dq"], r.report.latency_us, r.forward_report.latency_us, r.kept_bytes

do and dht (the output's and the final state's gradients) are randn from the seed, as FLA's tests make
them, unless given. The reference sees exactly what the NPU saw: q, k, v and do rounded to the transfer
type, h0 and dht to the state type.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import torch

from npusim import NpuSimError, Profile
from npusim.model.multipass import simulate_design, templates
from npusim.output.report import DesignReport, build_design_report
from npusim.record.precision import itemsize

from kda.driver.backward import (
    BackwardExecution,
    backward_design,
    execute_backward,
    kept_bytes,
    record_backward_graphs,
    reverse_pass,
)
from kda.driver.checks import KdaInputError
from kda.driver.inputs import KdaInputs
from kda.reference.parity import Parity, compare, tolerance
from kda.reference.recurrence_bwd import GRADS, recurrent_kda_grads
from kda.settings import Settings
from kda.settings.inputs import cu_seqlens, make_settings_inputs, on_device
from kda.settings.precision import precision_for
from kda.settings.profile import checked_profile
from kda.studies.evaluate import evaluate
from kda.studies.probe import Overflow, Probe, probe, probe_inputs, probe_settings, why_unsafe_backward
from kda.studies.timing import chunk_counts


@dataclass
class BackwardResult:
    version: str
    states: str
    settings: Settings
    profile: Profile
    execution: BackwardExecution | None        # None: timing only
    parity: dict[str, Parity] | None           # per gradient, each against its tolerance
    tolerances: dict[str, float]
    report: DesignReport                       # the backward design
    forward_report: DesignReport | None        # the forward design on the same settings
    kept_bytes: int                            # GM the forward keeps for the backward (store), per layer
    graphs: tuple = ()
    design_run: object = None                  # npusim.model.multipass.DesignRun, pipelined (traced if asked)
    design_serial: object = None
    probe: Probe | None = None                 # timing only: the design's numerics on a few chunks (kda.run)

    @property
    def design(self):
        return backward_design(self.version, self.states)

    @property
    def passed(self) -> bool:
        return self.parity is None or all(p.passed for p in self.parity.values())

    @property
    def safe(self) -> bool | None:
        """Stays finite on the run's gates (its numerics, else its probe); None: not checked."""
        why = why_unsafe_backward(self)
        return True if why is None else None if why.startswith("not checked") else False

    @property
    def training_us(self) -> float | None:
        """Forward plus backward latency of the layer."""
        return None if self.forward_report is None else self.forward_report.latency_us + self.report.latency_us

    def to_json(self) -> dict:
        from kda.studies.run_json import SCHEMA_VERSION, layer_json
        s, rep = self.settings, self.report
        return {
            "schema_version": SCHEMA_VERSION,
            "version": self.version, "states": self.states, "tokens": s.T, "heads": s.heads, "batch": s.batch,
            "chunk_size": s.chunk_size, "d_k": s.d_k, "d_v": s.d_v, "dtype": s.dtype, "gates": s.gates,
            "profile": self.profile.name, "profile_overrides": dict(s.overrides),
            "profile_digest": self.profile.digest(),
            "parity": None if self.parity is None else {
                n: {**p.to_dict(), "tolerance": self.tolerances[n]} for n, p in self.parity.items()},
            "pass": self.passed,
            "nonfinite": None if self.execution is None or self.execution.nonfinite is None
            else str(self.execution.nonfinite),
            "backward": layer_json(rep, s.batch * s.T, s.heads, self.profile.chip.ai_cores),
            "forward_latency_us": None if self.forward_report is None else self.forward_report.latency_us,
            "training_us": self.training_us, "kept_bytes": self.kept_bytes,
            "probe": None if self.probe is None else self.probe.to_dict(),
            "safe": self.safe,
        }


def backward_floor_bytes(settings: Settings, transfer: str) -> int:
    """The least HBM traffic of any backward: q, k, v, do read and dq, dk, dv written once (transfer type),
    g and beta read and dg, dbeta written once (fp32), dht read and dh0 written (fp32)."""
    tokens = sum(settings.seqlens) if settings.seqlens else settings.batch * settings.T
    ht, K, V = tokens * settings.heads, settings.d_k, settings.d_v
    sequences = (len(settings.seqlens) if settings.seqlens else settings.batch) * settings.heads
    return ht * ((2 * K + 2 * V + 2 * K + V) * itemsize(transfer) + 2 * (K + 1) * 4) + 2 * sequences * K * V * 4


def grad_outputs(x: KdaInputs, seed: int, sequences: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """do [B, T, H, V] and dht [B, H, K, V] (one per sequence of a variable-length batch: `sequences`): randn
    from the seed on the CPU (FLA's tests use randn_like), then on the inputs' device."""
    gen = torch.Generator().manual_seed(seed + 1000)
    B, T, H, K = x.q.shape
    V = x.v.shape[-1]
    do, dht = torch.randn(B, T, H, V, generator=gen), torch.randn(sequences or B, H, K, V, generator=gen)
    return do.to(x.q.device), dht.to(x.q.device)


def evaluate_backward(version: str, settings: Settings, states: str = "recompute", inputs: KdaInputs | None = None,
                      do: torch.Tensor | None = None, dht: torch.Tensor | None = None, *,
                      forward: bool = True, progress=None, check_names: bool = True,
                      profile: Profile | None = None) -> BackwardResult:
    """Numerics (unless settings.numerics is off), parity of every gradient, and the timing. `profile`: the
    run's, loaded and its work checked once by the caller (kda.settings.profile.checked_profile); else here."""
    design = backward_design(version, states)
    profile = profile or checked_profile(settings)
    C = settings.chunk_size
    precision = precision_for(settings, reverse_pass(design).program)
    if check_names:
        check_policy_names(version, settings)
    ex, parity, tol = None, None, {}
    if settings.numerics:
        x = on_device(inputs or make_settings_inputs(settings), settings.device)
        if do is None:
            do, dht_seeded = grad_outputs(x, settings.seed, len(settings.seqlens) if settings.seqlens else None)
            dht = dht_seeded if dht is None else dht
        def to_dev(t):
            return None if t is None else t.to(x.q.device)
        do, dht = to_dev(do), to_dev(dht)
        ex = execute_backward(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, do, dht, version=version,
                              chunk_size=C, precision=precision, states=states, progress=progress,
                              cu_seqlens=cu_seqlens(settings))
        ref = reference_grads(x, do, dht, ex.precision, settings.seqlens)
        tol = {n: tolerance(n, ex.precision.transfer) for n in GRADS}
        parity = {n: compare(ref[n], ex.grads[n], tol[n]) for n in GRADS}
        graphs = list(ex.graphs)
        if states == "store":
            graphs, _ = record_backward_graphs(version, states, chunk_size=C, d_k=settings.d_k, d_v=settings.d_v,
                                               precision=ex.precision)
        precision = ex.precision
    else:
        graphs, precision = record_backward_graphs(version, states, chunk_size=C, d_k=settings.d_k,
                                                   d_v=settings.d_v, precision=precision)
    report, run, serial = time_backward(design, graphs, profile, settings, precision.transfer)
    fwd = None
    if forward:
        fwd = evaluate(version, replace(settings, numerics=False, keep_trace=False, attribution=False),
                       profile=profile).design_report
    counts = chunk_counts(settings)
    kept = kept_bytes(version, states, sum(counts), 1, settings.d_k, settings.d_v, precision, C)
    return BackwardResult(version, states, settings, profile, ex, parity, tol, report, fwd, kept, tuple(graphs),
                          run, serial)


def time_backward(design, graphs, profile: Profile, settings: Settings, transfer: str):
    """The backward design's passes on the event model, pipelined and serial: (report with its bound and
    floor, pipelined DesignRun, serial DesignRun); traced when settings.keep_trace."""
    tpls = templates(design, list(graphs), profile, settings.state_handoff)
    counts = chunk_counts(settings)
    run = simulate_design(design, tpls, profile, counts, interleave=settings.interleave, trace=settings.keep_trace)
    serial = simulate_design(design, tpls, profile, counts, serial=True, interleave=settings.interleave,
                             trace=settings.keep_trace)
    return build_design_report(run, serial, backward_floor_bytes(settings, transfer)), run, serial


def reference_grads(x: KdaInputs, do, dht, precision, seqlens=None) -> dict[str, torch.Tensor]:
    """The fp64 autograd gradients on the inputs as the NPU's GM held them; with `seqlens` (FLA's varlen
    layout [1, total, ...]) each sequence through the recurrence on its own, put back in place."""
    cd = precision.compute
    def stored(t):
        return precision.round(t.to(cd), precision.transfer)
    def state(t):
        return None if t is None else precision.round(t.to(cd), precision.state_type)
    args = (stored(x.q), stored(x.k), stored(x.v), x.g.to(cd), x.beta.to(cd))
    h0, dO, dS = state(x.initial_state), stored(do), state(dht)
    if not seqlens:
        return recurrent_kda_grads(*args, None, h0, dO, dS)
    parts, start = [], 0
    for i, n in enumerate(seqlens):
        def cut(t):
            return t[:, start:start + n]
        def one(t):
            return None if t is None else t[i:i + 1]
        q, k, v, g, beta = (cut(t) for t in args)
        parts.append(recurrent_kda_grads(q, k, v, g, beta, None, initial_state=one(h0), do=cut(dO), dht=one(dS)))
        start += n
    return {g: torch.cat([p[g] for p in parts], 0 if g == "dh0" else 1) for g in GRADS}


def check_policy_names(versions: str | list[str], settings: Settings) -> None:
    """--precision names must be payloads or stored intermediates of (one of) the backward design(s)."""
    if not settings.payload_dtypes:
        return
    from kda.studies.backward_attribution import payload_names
    versions = [versions] if isinstance(versions, str) else versions
    known = sorted({n for v in versions for n in payload_names(v, settings.chunk_size, settings.d_k, settings.d_v)})
    unknown = [n for n in settings.payload_dtypes if n not in known]
    if unknown:
        which = f"the {versions[0]} backward hands" if len(versions) == 1 else "no backward design hands"
        raise KdaInputError(f"--precision: {which} over no tensor named {', '.join(map(repr, unknown))}; "
                            f"the payloads are {', '.join(known)}")


def probe_backward(version: str, states: str, settings: Settings) -> Probe:
    """The probe of a backward design: its forward's probe, then the backward's own numerics (every gradient,
    do and dht from the seed) on the same few chunks; the first overflow of either."""
    forward = probe(version, settings)
    if not forward.checked or forward.overflow is not None:
        return forward
    return _probe_backward(version, states, probe_settings(settings))


@functools.lru_cache(maxsize=64)
def _probe_backward(version: str, states: str, s: Settings) -> Probe:
    x = probe_inputs(s)
    do, dht = grad_outputs(x, s.seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        precision = precision_for(s, reverse_pass(backward_design(version, states)).program)
        ex = execute_backward(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, do, dht, version=version,
                              chunk_size=s.chunk_size, precision=precision, states=states)
    except (KdaInputError, NpuSimError, ValueError) as err:
        return Probe(version, 0, s.chunk_size, s.gates, s.dtype, error=str(err))
    finally:
        torch.set_num_threads(threads)
    nf = ex.nonfinite
    overflow = None if nf is None else Overflow(nf.tensor, nf.where, None, nf.chunk, nf.sequence)
    return Probe(version, s.chunks, s.chunk_size, s.gates, s.dtype, overflow)

