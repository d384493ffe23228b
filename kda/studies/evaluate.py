"""One evaluation = numerics (phase program on the simulated NPU), parity against the fp64 recurrence,
and the timing replay (pipelined and serial). The CLI, the notebooks and the tests all go through here."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

from npusim import Profile, Report, Run
from npusim.model.multipass import DesignRun
from npusim.model.schedule import Design, single_pass
from npusim.model.whatif.runs import CompiledRuns
from npusim.output.report import DesignReport

from kda.driver.execute import Execution, Types, execute
from kda.driver.inputs import KdaInputs
from kda.programs import get_design, resolve
from kda.reference.parity import Parity, compare
from kda.settings import Settings
from kda.settings.inputs import apply_in_kernel, cu_seqlens, make_settings_inputs, on_device
from kda.settings.precision import check_policy_names, precision_for
from kda.settings.profile import checked_profile
from kda.studies.oracle import Reference, reference, reference_key
from kda.studies.timing import time_result, timed_graphs

if TYPE_CHECKING:
    from kda.studies.attribution import Attribution
    from kda.studies.probe import Probe


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
    workspace_error: str | None = None
    capacity_error: str | None = None     # a phase that does not fit its unit's memory: no timing
    note: str | None = None          # e.g. v1's known defect, when parity fails
    attribution: "Attribution | None" = None    # kda/attribution.py, when settings.attribution
    design_run: DesignRun | None = None          # every design, one pass or several: its passes' runs
    design_serial: DesignRun | None = None
    design_report: DesignReport | None = None    # each pass with its per-chunk detail
    probe: "Probe | None" = None     # timing only: a few chunks of numerics on the run's gates (kda/studies/probe.py)

    @property
    def report(self) -> Report | None:
        """A one-pass design's per-chunk report (its pass's detail); None with several passes."""
        rep = self.design_report
        return rep.passes[0].detail if rep is not None and len(rep.passes) == 1 else None

    def timed_report(self) -> Report:
        """The per-chunk report of a timed one-pass design (ValueError for a run without one)."""
        if self.report is None:
            raise ValueError(f"{self.version}: no per-chunk report (timing off, or a design of several passes)")
        return self.report

    @property
    def pipelined(self) -> Run | None:
        """A one-pass design's pipelined run; None with several passes."""
        dr = self.design_run
        return dr.passes[0].run if dr is not None and len(dr.passes) == 1 else None

    @property
    def serial(self) -> Run | None:
        dr = self.design_serial
        return dr.passes[0].run if dr is not None and len(dr.passes) == 1 else None

    @property
    def design(self) -> Design:
        return self.execution.design or get_design(self.version)

    def parities(self) -> tuple[Parity, Parity]:
        """The parity of the output and of the final state: a run with numerics only."""
        if self.parity_o is None or self.parity_state is None:
            raise ValueError(f"{self.version}: parity asked of a run without numerics")
        return self.parity_o, self.parity_state

    @property
    def passed(self) -> bool:
        """Parity holds for the output and the final state (True when numerics were not run)."""
        return self.parity_o is None or all(p.passed for p in self.parities())

    @property
    def safe(self) -> bool | None:
        """Stays finite on the run's gates: by its own numerics, else by its probe; None: nothing checked."""
        if self.parity_o is not None:
            return self.execution.nonfinite is None
        return None if self.probe is None else self.probe.finite

    @property
    def verdict(self) -> str | None:
        """The run's one verdict (what --strict turns into exit status 1): None if it holds, else why not:
        parity, an overflow (in the run, or in the probe of a timing-only run), or a workspace plan that does
        not fit (no timing)."""
        if self.execution.nonfinite is not None:
            return f"overflow in {self.execution.nonfinite}"
        if self.probe is not None and self.probe.overflow is not None:
            return f"overflow in the probe: {self.probe.overflow.short()}"
        if not self.passed:
            return "fails parity"
        return f"workspace: {self.workspace_error}" if self.workspace_error else None

    def to_json(self) -> dict:
        """One shape for every design (kda/studies/run_json.py, kda/schema/run.schema.json)."""
        from kda.studies.run_json import result_json
        return result_json(self)


def evaluate(version: str, settings: Settings, inputs: KdaInputs | None = None, ref: Reference | None = None,
             progress: Callable[[int, int], None] | None = None, timing: bool = True,
             program=None, foreign_payloads_ok: bool = False, profile: Profile | None = None,
             compiled: bool = False) -> VersionResult:
    """`foreign_payloads_ok`: payload types naming tensors this program does not hand over are ignored
    (for --version all) instead of an error. `profile`: the run's, loaded and its work checked once by a
    caller that evaluates several versions (kda.settings.profile.checked_profile); else loaded here.
    `version`: a design's name or a file's `path.py:NAME` (the result names the design); with `program`,
    any name for it. `compiled`, timing only: the report's latencies and bounds from the compiled event model
    (kda/studies/timing.py time_result), without a per-chunk detail or a design_run. `timing=False`: no
    timing replay (a timing-only run: its graphs alone, for `retime`)."""
    given = program
    if program is None:
        version = resolve(version)
    design, program = _design(version, settings, program)
    profile = profile or checked_profile(settings)
    if not settings.numerics:
        return _timing_only(version, settings, profile, program, design, foreign_payloads_ok, compiled, timing)
    ex = numerics(version, settings, inputs, progress, given, foreign_payloads_ok)
    if ref is None or (ref.key and ref.key != reference_key(ex)):
        ref = reference(ex)
    o, final_state = ex.computed()
    p_o, p_s = compare(ref.o, o), compare(ref.state, final_state)
    C = settings.chunk_size
    errs = [compare(ref.o[:, t:t + C], o[:, t:t + C]) for t in range(0, settings.T, C)]
    first_bad = None if p_o.passed else next((i for i, e in enumerate(errs) if not e.passed), None)  # one verdict
    result = VersionResult(version, settings, profile, ex, p_o, p_s, [e.rel_rms_err for e in errs], first_bad)
    if not result.passed and "known_defect" in program.notes:
        result.note = program.notes["known_defect"]
    if settings.attribution:
        from kda.studies.attribution import attribute
        result.attribution = attribute(ex, ref.o, ref.state, program)
    if timing:
        if settings.group > 1 or settings.in_kernel:   # one q/k head and its value heads; the options' pass
            result.execution = _timed_execution(ex, settings, design)
        _time(result)
    return result


def numerics(version: str, settings: Settings, inputs: KdaInputs | None = None,
             progress: Callable[[int, int], None] | None = None, program=None,
             foreign_payloads_ok: bool = False) -> Execution:
    """The design's numerics alone (no reference, no parity, no timing): what evaluate runs first, and all
    that the overflow probe (kda/studies/probe.py) needs."""
    design, program = _design(version, settings, program)
    x = apply_in_kernel(on_device(inputs or make_settings_inputs(settings), settings.device), settings)
    precision = precision_for(settings, program)
    ex = execute(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, chunk_size=settings.chunk_size, design=design,
                 types=Types(policy=precision), progress=progress, cu_seqlens=cu_seqlens(settings))
    ex = replace(ex, design=ex.design or design)      # the design it ran, registered by name or not
    check_policy_names(ex.pass_graphs, settings, program, foreign_payloads_ok)
    return ex


def _design(version: str, settings: Settings, program) -> tuple[Design, object]:
    """The design a version runs, and the program that carries its state (a one-pass design's only one)."""
    design = get_design(version) if program is None else None
    if design is not None and not design.single:
        if settings.resident is not None:
            raise ValueError(f"--resident names a per-chunk workspace plan: {version} has "
                             f"{len(design.passes)} passes")
        return design, (design.state_pass or design.passes[-1]).program
    if design is None:
        design = single_pass(program)
    program = design.passes[0].program          # one pass: its layout as the design gives it
    if settings.resident is not None:
        program = replace(program, resident=tuple(settings.resident))
        design = replace(design, passes=(replace(design.passes[0], program=program),))
    return design, program


def _timed_execution(ex: Execution, settings: Settings, design: Design) -> Execution:
    """The Execution with the graphs the timing replays: for grouped value heads a work item is one q/k head
    with the value heads that share it, and FLA's in-kernel options run as a pass in front
    (timing.timed_graphs; the numerics ran each value head with its group's q and k, and applied the
    options' formulas to the inputs)."""
    timed, graphs, _ = timed_graphs(design, settings, ex.precision)
    if timed.single:
        return replace(ex, graph=graphs[0], graphs=())
    main = [p.program.name for p in timed.passes].index(ex.graph.program)
    return replace(ex, graph=graphs[main], graphs=tuple(graphs), design=timed)


def _timing_only(version: str, settings: Settings, profile: Profile, program, design: Design,
                 foreign_payloads_ok: bool = False, compiled: bool = False, timing: bool = True) -> VersionResult:
    """Record the phase graphs on random inputs of the right shapes and replay them (`timing`; else the
    graphs alone, to time later with `retime`): no tensor math for the chunks, the same graphs and so the
    same timeline as a full run."""
    design, graphs, precision = timed_graphs(design, settings, precision_for(settings, program))
    check_policy_names(graphs, settings, program, foreign_payloads_ok)
    chunks = max(-(-n // settings.chunk_size) for n in (settings.seqlens or (settings.T,)))
    programs = [p.program for p in design.passes]
    main = graphs[programs.index(program)] if program in programs else graphs[-1]
    ex = Execution(None, None, main, None, precision, chunks, settings.chunk_size, graphs=tuple(graphs),
                   design=design, seqlens=settings.seqlens)
    result = VersionResult(version, settings, profile, ex, None, None, [], None)
    return _time(result, compiled) if timing else result


def retime(result: VersionResult, profile: Profile, *, compiled: bool = False,
           runs: CompiledRuns | None = None) -> VersionResult:
    """A copy of `result` with its timing replayed on `profile` from the same recorded graph (no numerics):
    what uncertainty studies and calibration run per sample. `compiled`, `runs`: as timing.time_result's."""
    return _time(replace(result, profile=profile, workspace_error=None, capacity_error=None,
                         design_run=None, design_serial=None, design_report=None), compiled, runs)


def _time(result: VersionResult, compiled: bool = False, runs: CompiledRuns | None = None) -> VersionResult:
    """The timing replay, pipelined and serial, and the reports (timing.py)."""
    time_result(result, compiled=compiled, runs=runs)
    return result
