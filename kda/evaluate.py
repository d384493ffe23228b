"""One evaluation = numerics (phase program on the simulated NPU), parity against the fp64 recurrence,
and the timing replay (pipelined and serial). The CLI, the notebooks and the tests all go through here."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

import torch

from npusim import Profile, Report, Run, WorkspaceError, build_report, build_template, load_profile, simulate
from npusim.engine import RIDE

from .api import Execution, execute
from .inputs import KdaInputs, make_inputs
from .parity import Parity, compare
from .programs import get_program
from .reference import naive_recurrent_kda


@dataclass(frozen=True)
class Settings:
    """Everything a run depends on; the same settings always give the same numbers and trace."""
    batch: int = 1
    heads: int = 1
    chunks: int = 16
    chunk_size: int = 64
    d_k: int = 128
    d_v: int = 128
    dtype: str = "bf16"              # transfer type of every hand-off (and of q, k, v in GM)
    gates: str = "seed"
    seed: int = 0
    profile: str = "ascend-910b2"
    state_handoff: str = RIDE        # "ride" on an existing sync where one fits, or "own"
    initial_state: bool = False      # randn initial state instead of zeros
    tokens: int | None = None        # default chunks x chunk_size; any T works (the last chunk is padded)
    workspace: dict = field(default_factory=dict, hash=False)   # overrides, e.g. {"slot_kib": 96}
    resident: tuple[str, ...] | None = None    # replaces the program's resident tensors (workspace plan)

    @property
    def T(self) -> int:
        return self.tokens if self.tokens is not None else self.chunks * self.chunk_size


@dataclass
class Reference:
    o: torch.Tensor                  # fp64
    state: torch.Tensor              # fp64


@dataclass
class VersionResult:
    version: str
    settings: Settings
    profile: Profile
    execution: Execution
    parity_o: Parity
    parity_state: Parity
    chunk_errors: list[float]        # rel RMS error of the output, per chunk
    first_failing_chunk: int | None
    report: Report | None = None
    pipelined: Run | None = None
    serial: Run | None = None
    workspace_error: str | None = None
    note: str | None = None          # e.g. v1's known defect, when parity fails

    @property
    def passed(self) -> bool:
        return self.parity_o.passed and self.parity_state.passed

    def to_json(self) -> dict:
        s, r, ex = self.settings, self.report, self.execution
        out = {
            "version": self.version, "chunks": ex.chunks, "tokens": s.T, "batch": s.batch, "heads": s.heads,
            "chunk_size": s.chunk_size, "d_k": s.d_k, "d_v": s.d_v, "dtype": s.dtype, "gates": s.gates,
            "seed": s.seed, "profile": self.profile.name,
            "parity": {**self.parity_o.to_dict(), "state": self.parity_state.to_dict(),
                       "pass": self.passed, "first_failing_chunk": self.first_failing_chunk,
                       "note": self.note},
            "overflow": _overflow(ex),
            "workspace_error": self.workspace_error,
        }
        g = ex.graph
        out.update(syncs_per_chunk=len(g.syncs), sync_bytes_per_chunk=g.sync_bytes,
                   sync_tensors=[list(x.tensors) for x in g.syncs],
                   redundant_bytes_per_chunk=g.redundant_bytes, unused_bytes_per_chunk=g.unused_bytes,
                   macs_by_phase=g.macs_by_phase(), element_ops_by_phase=g.element_ops_by_phase())
        if r is not None:
            out["state_handoffs"] = {"per_chunk": 1 if r.state.mode else 0, "total": r.state.handoffs,
                                     "mode": r.state.mode, "rides_on": r.state.rides_on, "bytes": r.state.nbytes}
            out["latency_us"] = {"serial": r.serial_us, "pipelined": r.pipelined_us, "bound": r.bound_us,
                                 "sync": r.sync_us_per_chunk, "state_sync": r.state.time_us,
                                 "bound_unit": r.bound_unit_us, "bound_chain": r.bound_chain_us,
                                 "launch": r.launch_us}
            out["speedup"] = r.speedup
            out["efficiency"] = r.efficiency
            out["utilization"] = {"cube": r.utilization.get("cube", 0.0), "vec": r.utilization.get("vec", 0.0),
                                  **{k: v for k, v in r.utilization.items() if k.startswith("link")}}
            out["phase_us"] = r.phase_us
            out["cores"] = r.cores
        return out


def _overflow(ex: Execution) -> dict | None:
    nf = ex.nonfinite
    if nf is None:
        return None
    meta = ex.graph.tensors.get(nf.tensor)
    phase = meta.producer if meta is not None else None
    return {"phase": phase, "tensor": nf.tensor, "where": nf.where, "chunk": nf.chunk, "sequence": nf.sequence}


def profile_for(settings: Settings) -> Profile:
    profile = load_profile(settings.profile)
    if settings.workspace:
        profile = profile.replace(**{f"workspace__{k}": v for k, v in settings.workspace.items()})
    return profile


def make_settings_inputs(s: Settings) -> KdaInputs:
    return make_inputs(s.batch, s.T, s.heads, s.d_k, s.d_v, s.gates, s.seed, s.initial_state)


def reference(ex: Execution) -> Reference:
    """The fp64 recurrence on exactly the inputs the NPU saw (rounded to their GM types)."""
    q, k, v, g, beta, h0 = ex.inputs_as_stored
    o, S = naive_recurrent_kda(q, k, v, g, beta, None, h0, True, dtype=torch.float64)
    return Reference(o, S)


def evaluate(version: str, settings: Settings, inputs: KdaInputs | None = None, ref: Reference | None = None,
             progress: Callable[[int, int], None] | None = None, timing: bool = True,
             program=None) -> VersionResult:
    program = program or get_program(version)
    if settings.resident is not None:
        program = replace(program, resident=tuple(settings.resident))
    profile = profile_for(settings)
    x = inputs or make_settings_inputs(settings)
    ex = execute(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, chunk_size=settings.chunk_size,
                 transfer_dtype=settings.dtype, program=program, progress=progress)
    ref = ref or reference(ex)
    p_o, p_s = compare(ref.o, ex.o), compare(ref.state, ex.final_state)
    C = settings.chunk_size
    errs = [compare(ref.o[:, t:t + C], ex.o[:, t:t + C]) for t in range(0, settings.T, C)]
    first_bad = next((i for i, e in enumerate(errs) if not e.passed), None)
    result = VersionResult(version, settings, profile, ex, p_o, p_s, [e.rel_rms_err for e in errs], first_bad)
    if not result.passed and "known_defect" in program.notes:
        result.note = program.notes["known_defect"]
    if timing:
        sequences = settings.batch * settings.heads
        try:
            tpl = build_template(ex.graph, profile, settings.state_handoff)
        except WorkspaceError as err:
            result.workspace_error = str(err)
            return result
        result.pipelined = simulate(tpl, profile, chunks=ex.chunks, sequences=sequences)
        result.serial = simulate(tpl, profile, chunks=ex.chunks, sequences=sequences, serial=True)
        result.report = build_report(result.pipelined, result.serial)
    return result
