"""One evaluation = numerics (phase program on the simulated NPU), parity against the fp64 recurrence,
and the timing replay (pipelined and serial). The CLI, the notebooks and the tests all go through here."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable

import torch

from npusim import Profile, Report, Run, load_profile
from npusim.model.schedule import single_pass
from npusim.model.engine import RIDE
from npusim.record.precision import NAMES, Precision, itemsize

from kda.api import Execution, KdaInputError, execute, program_default_state, record_graphs
from kda.device import resolve_device
from kda.inputs import KdaInputs, make_inputs
from kda.reference.parity import Parity, compare
from kda.programs import get_design, get_program
from kda.studies.timing import grouped_graphs, time_result, timing_design
from kda.studies.work import check_work
from kda.studies.oracle import Reference, _reference_key, reference  # noqa: F401  (kda.studies.evaluate.reference, as before)

if TYPE_CHECKING:
    from kda.studies.attribution import Attribution


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
    cores: int | None = None         # AI cores to spread the sequences over (default: the profile's)
    numerics: bool = True            # False: record the graph on random inputs and replay timing only
    keep_trace: bool = True          # keep every event of the timing runs (for traces and plots)
    record: bool = False             # keep each replay's decisions, to re-time it on other profiles (--uncertainty)
    # precision policy beyond `dtype` (npusim/precision.py): a type per sync payload, the state's type
    # (None: the program's default, else `dtype`), the Cube's accumulation type (None: fp32)
    payload_dtypes: dict = field(default_factory=dict, hash=False)    # tensor name -> "fp32" | "bf16" | "fp16"
    state_dtype: str | None = None
    accumulate_dtype: str | None = None
    attribution: bool = False        # also rank the hand-offs by the accuracy their rounding costs (slower)
    overrides: dict = field(default_factory=dict, hash=False)   # profile fields: {"sync.latency_us": 0.3}
    interleave: int = 1              # sequences a core alternates in its sequential passes
    seqlens: tuple[int, ...] | None = None     # a variable-length batch: tokens of each sequence (batch = 1)
    device: str = "cpu"              # torch device of the numerics: cpu, cuda or npu (kda/device.py)
    capacity: str = "tile"           # a phase over its unit's UB / L1: "tile" it, or "refuse" (npusim/capacity.py)
    core_model: bool = True          # False: the profile's [core] table ignored (no capacities, no pipes)
    value_heads: int | None = None   # grouped value heads: HV, a multiple of `heads` (the q/k heads); None: heads
    in_kernel: tuple[str, ...] = ()  # FLA's in-kernel options (kda/programs/in_kernel.py): "qk_l2norm", "gate",
                                     # "beta_sigmoid"; the numerics apply them to the inputs, the timing as a pass
    gate_lower_bound: float | None = None   # with "gate": FLA's lower_bound (a sigmoid gate in [lb, 0))

    @property
    def v_heads(self) -> int:
        return self.value_heads or self.heads

    @property
    def group(self) -> int:
        """Value heads per q/k head: a work item is one q/k head with its group (timing.grouped_graphs)."""
        return self.v_heads // self.heads

    @property
    def T(self) -> int:
        if self.seqlens:
            return sum(self.seqlens)
        return self.tokens if self.tokens is not None else self.chunks * self.chunk_size


@dataclass
class VersionResult:
    version: str
    settings: Settings
    profile: Profile
    execution: Execution             # with numerics off, only its graph and sizes
    parity_o: Parity | None          # None: numerics off
    parity_state: Parity | None
    chunk_errors: list[float]        # rel RMS error of the output, per chunk
    first_failing_chunk: int | None
    report: Report | None = None
    pipelined: Run | None = None
    serial: Run | None = None
    workspace_error: str | None = None
    capacity_error: str | None = None     # a phase that does not fit its unit's memory: no timing
    note: str | None = None          # e.g. v1's known defect, when parity fails
    attribution: "Attribution | None" = None    # kda/attribution.py, when settings.attribution
    design_run: object = None        # npusim.model.multipass.DesignRun: every design, one pass or several
    design_serial: object = None
    design_report: object = None     # npusim.output.design_report.DesignReport

    @property
    def design(self):
        return self.execution.design or get_design(self.version)

    @property
    def passed(self) -> bool:
        """Parity holds for the output and the final state (True when numerics were not run)."""
        return self.parity_o is None or (self.parity_o.passed and self.parity_state.passed)

    @property
    def verdict(self) -> str | None:
        """The run's one verdict (what --strict turns into exit status 1): None if it holds, else why not:
        parity, an overflow, or a workspace plan that does not fit (no timing)."""
        if self.execution.nonfinite is not None:
            return f"overflow in {self.execution.nonfinite}"
        if not self.passed:
            return "fails parity"
        return f"workspace: {self.workspace_error}" if self.workspace_error else None

    def to_json(self) -> dict:
        """One shape for every design (kda/studies/run_json.py, kda/schema/run.schema.json)."""
        from kda.studies.run_json import SCHEMA_VERSION, layer_json, pipeline_json, programs_json
        s, ex = self.settings, self.execution
        dr = self.design_report
        return {
            "schema_version": SCHEMA_VERSION,
            "version": self.version, "chunks": ex.chunks, "tokens": s.T, "batch": s.batch, "heads": s.heads,
            "value_heads": s.v_heads,
            "chunk_size": s.chunk_size, "d_k": s.d_k, "d_v": s.d_v, "dtype": s.dtype, "gates": s.gates,
            "seed": s.seed, "profile": self.profile.name, "interleave": s.interleave,
            "seqlens": list(s.seqlens) if s.seqlens else None,
            "numerics": self.parity_o is not None,
            "layer": None if dr is None else layer_json(dr, s.batch * s.T, s.v_heads, self.profile.chip.ai_cores),
            "pipeline": None if self.report is None or (dr is not None and len(dr.passes) > 1)
            else pipeline_json(self),
            "programs": programs_json(self),
            "parity": None if self.parity_o is None else {
                **self.parity_o.to_dict(), "state": self.parity_state.to_dict(), "pass": self.passed,
                "first_failing_chunk": self.first_failing_chunk, "note": self.note},
            "errors": None if self.parity_o is None else {
                "o": _json_err(self.parity_o.rel_rms_err), "final_state": _json_err(self.parity_state.rel_rms_err),
                "o_per_chunk": [_json_err(e) for e in self.chunk_errors]},
            "overflow": _overflow(ex),
            "workspace_error": self.workspace_error,
            "capacity_error": self.capacity_error,
            "precision": _policy_json(ex),
            "attribution": self.attribution.to_dict() if self.attribution is not None else None,
            "memory": plans_json(self) if dr is not None else None,
        }


def plans_of(r) -> list[tuple]:
    """(pass name, plan) of every phase of the design's passes ("" for a one-pass design)."""
    dr = r.design_run
    if dr is None:
        return [("", p) for p in r.pipelined.template.plans] if r.pipelined is not None else []
    single = len(dr.passes) == 1
    return [("" if single else pr.pass_.name, p) for pr in dr.passes for p in pr.run.template.plans]


def plans_json(r) -> list[dict]:
    return [{**({"pass": name} if name else {}), **p.to_dict()} for name, p in plans_of(r)]


def _overflow(ex: Execution) -> dict | None:
    nf = ex.nonfinite
    if nf is None:
        return None
    meta = ex.graph.tensors.get(nf.tensor)
    phase = meta.producer if meta is not None else None
    return {"phase": phase, "tensor": nf.tensor, "where": nf.where, "chunk": nf.chunk, "sequence": nf.sequence}


def _json_err(x: float):
    return x if math.isfinite(x) else None


def _policy_json(ex: Execution) -> dict:
    p, g = ex.precision, ex.graph
    uniform = uniform_bytes(g, p.transfer)
    return {"transfer": p.transfer, "payloads": {x.name: x.dtype for s in g.syncs for x in s.payload},
            "state": p.state_type, "accumulate": p.accumulate or NAMES[p.compute],
            "bytes_per_chunk": {"syncs": sum(g.sync_bytes), "state": g.state.nbytes if g.state else 0,
                                "uniform_transfer": uniform}}


def uniform_bytes(graph, transfer: str) -> int:
    """Sync + state bytes per chunk and sequence if every hand-off carried `transfer`: what a policy's
    wider types are measured against."""
    size = itemsize(transfer)
    syncs = sum(math.prod(p.shape) * size for s in graph.syncs for p in s.payload)
    return syncs + (math.prod(graph.state.shape) * size if graph.state else 0)


def precision_for(settings: Settings, program) -> Precision:
    """The policy a run uses: `dtype` for every hand-off, the per-payload types, the state type (the
    program's declared default where the settings give none), the accumulation type."""
    state = settings.state_dtype or program_default_state(program, settings.dtype)
    return Precision(settings.dtype, dict(settings.payload_dtypes), state=state,
                     accumulate=settings.accumulate_dtype)


def unknown_payloads(graph, names) -> list[str]:
    """Names of a precision policy that no sync of the graph hands over."""
    known = {p.name for s in graph.syncs for p in s.payload}
    return [n for n in names if n not in known]


def _check_policy_names(graphs, settings: Settings, program, foreign_payloads_ok: bool) -> None:
    stored = {n for g in graphs for n, m in g.tensors.items() if m.origin in ("vec", "cube")}
    unknown = [n for n in unknown_payloads(graphs[0], settings.payload_dtypes)
               if all(n in unknown_payloads(g, [n]) for g in graphs) and n not in stored]
    if unknown and not foreign_payloads_ok:
        known = ", ".join(p.name for g in graphs for s in g.syncs for p in s.payload if not p.redundant)
        raise ValueError(f"precision policy: {program.name} hands over no tensor named "
                         f"{', '.join(map(repr, unknown))}; its payloads are {known}")


def profile_for(settings: Settings) -> Profile:
    profile = load_profile(settings.profile)
    if settings.workspace:
        profile = profile.replace(**{f"workspace__{k}": v for k, v in settings.workspace.items()})
    if settings.overrides:
        profile = profile.replace(**{k.replace(".", "__", 1): v for k, v in settings.overrides.items()})
    if settings.cores is not None:
        if settings.cores > profile.chip.ai_cores:        # a chip the profile does not describe
            raise KdaInputError(f"--cores {settings.cores}: profile {profile.name} has {profile.chip.ai_cores} "
                                f"AI cores (use at most that, or --set chip.ai_cores=N for another chip)")
        profile = profile.replace(chip__ai_cores=settings.cores)
    if not settings.core_model:
        profile = profile.without_core()
    return profile


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
        shared = lambda t: t[:, :, ::s.group].repeat_interleave(s.group, dim=2)
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
    """The inputs as the design sees them after FLA's in-kernel options (kda/fla_options.py's formulas)."""
    if not s.in_kernel:
        return x
    from kda.fla_options import beta_sigmoid, kda_gate, l2norm
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
    move = lambda t: None if t is None else t.to(dev)
    return KdaInputs(move(x.q), move(x.k), move(x.v), move(x.g), move(x.beta), move(x.initial_state))


def evaluate(version: str, settings: Settings, inputs: KdaInputs | None = None, ref: Reference | None = None,
             progress: Callable[[int, int], None] | None = None, timing: bool = True,
             program=None, foreign_payloads_ok: bool = False) -> VersionResult:
    """`foreign_payloads_ok`: payload types naming tensors this program does not hand over are ignored
    (for --version all) instead of an error."""
    design = get_design(version) if program is None else None
    if design is not None and not design.single:
        if settings.resident is not None:
            raise ValueError(f"--resident names a per-chunk workspace plan: {version} has "
                             f"{len(design.passes)} passes")
        program = (design.state_pass or design.passes[-1]).program
    else:
        program = program or get_program(version)
        if settings.resident is not None:
            program = replace(program, resident=tuple(settings.resident))
        design = single_pass(program)
    if settings.interleave < 1:
        raise ValueError(f"--interleave must be >= 1, got {settings.interleave}")
    if settings.v_heads % settings.heads:
        raise ValueError(f"value_heads {settings.v_heads} must be a multiple of heads {settings.heads}")
    profile = profile_for(settings)
    check_work(settings, profile)          # one line before hours of work (kda/studies/work.py)
    if not settings.numerics:
        return _timing_only(version, settings, profile, program, design, foreign_payloads_ok)
    x = apply_in_kernel(on_device(inputs or make_settings_inputs(settings), settings.device), settings)
    precision = precision_for(settings, program)
    ex = execute(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, chunk_size=settings.chunk_size,
                 precision=precision, program=program if design.single else None, design=design,
                 progress=progress, cu_seqlens=_cu(settings))
    _check_policy_names(ex.pass_graphs, settings, program, foreign_payloads_ok)
    if ref is None or (ref.key and ref.key != _reference_key(ex)):
        ref = reference(ex)
    p_o, p_s = compare(ref.o, ex.o), compare(ref.state, ex.final_state)
    C = settings.chunk_size
    errs = [compare(ref.o[:, t:t + C], ex.o[:, t:t + C]) for t in range(0, settings.T, C)]
    first_bad = None if p_o.passed else next((i for i, e in enumerate(errs) if not e.passed), None)  # one verdict
    result = VersionResult(version, settings, profile, ex, p_o, p_s, [e.rel_rms_err for e in errs], first_bad)
    if not result.passed and "known_defect" in program.notes:
        result.note = program.notes["known_defect"]
    if settings.attribution:
        from kda.studies.attribution import attribute
        result.attribution = attribute(ex, ref.o, ref.state, program)
    if timing:
        if settings.group > 1 or settings.in_kernel:   # one q/k head and its value heads; the options' pass
            result.execution = grouped_graphs(ex, settings, design)
        _time(result)
    return result


def _timing_only(version: str, settings: Settings, profile: Profile, program, design,
                 foreign_payloads_ok: bool = False) -> VersionResult:
    """Record the phase graphs on random inputs of the right shapes and replay them: no tensor math for the
    chunks, the same graphs and so the same timeline as a full run."""
    precision = precision_for(settings, program)
    design = timing_design(design, settings)
    graphs, precision = record_graphs(design, chunk_size=settings.chunk_size, d_k=settings.d_k,
                                      d_v=settings.d_v, precision=precision, group=settings.group)
    _check_policy_names(graphs, settings, program, foreign_payloads_ok)
    chunks = max(-(-n // settings.chunk_size) for n in (settings.seqlens or (settings.T,)))
    main = graphs[[p.program for p in design.passes].index(program)] if program in [p.program for p in design.passes] else graphs[-1]
    ex = Execution(None, None, main, None, precision, chunks, settings.chunk_size, graphs=tuple(graphs),
                   design=design, seqlens=settings.seqlens)
    return _time(VersionResult(version, settings, profile, ex, None, None, [], None))


def _cu(settings: Settings):
    if not settings.seqlens:
        return None
    cu = [0]
    for n in settings.seqlens:
        cu.append(cu[-1] + n)
    return cu


def retime(result: VersionResult, profile: Profile) -> VersionResult:
    """A copy of `result` with its timing replayed on `profile` from the same recorded graph (no numerics):
    what uncertainty studies and calibration run per sample."""
    return _time(replace(result, profile=profile, report=None, pipelined=None, serial=None, workspace_error=None, capacity_error=None,
                         design_run=None, design_serial=None, design_report=None))


def _time(result: VersionResult) -> VersionResult:
    """The timing replay, pipelined and serial, and the reports (kda/timing.py)."""
    time_result(result)
    return result
