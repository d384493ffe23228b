"""The timing replay of a design for a run's settings: pipelined and serial, the per-pass and whole-design
report with the chip's HBM floor. evaluate.py calls it after the numerics (or on a graph recorded on
random inputs, for a timing-only run). And an evaluated design timed under many profiles at once
(npusim/model/whatif/: time_profiles): what `--uncertainty`, the sweeps' profile axes and the benchmarks'
intervals ask for. The design's recorded replays are reused where the run kept its decisions
(Settings.record); otherwise they are recorded once there."""
from __future__ import annotations

from dataclasses import replace

from npusim import WorkspaceError
from npusim.chip.capacity import CapacityError
from npusim.chip.profile import Profile
from npusim.model.multipass import DesignRun, simulate_design, templates
from npusim.model.whatif import DesignTimer, Timings
from npusim.model.whatif.runs import CompiledRuns, NotServed
from npusim.output.report import build_design_report, pass_bound
from npusim.record.precision import itemsize


def chunk_counts(settings) -> list[int]:
    """Chunks of each of the batch x heads sequences (b-major, as the driver flattens them). With grouped
    value heads a work item is one q/k head and its group of value heads (grouped_graphs)."""
    C = settings.chunk_size
    lengths = settings.seqlens or (settings.T,) * settings.batch
    return [-(-n // C) for n in lengths for _ in range(settings.heads)]


def floor_bytes(settings, transfer: str) -> int:
    """The least HBM traffic of any design: q, k (per q/k head), v (per value head; transfer type), g and beta
    (fp32, per value head) read once, o written once (transfer type), the initial state read and the final
    state written (fp32, per value head)."""
    tokens = sum(settings.seqlens) if settings.seqlens else settings.batch * settings.T
    H, HV = settings.heads, getattr(settings, "v_heads", settings.heads)
    K, V = settings.d_k, settings.d_v
    sequences = (len(settings.seqlens) if settings.seqlens else settings.batch) * HV
    return (tokens * (H * 2 * K * itemsize(transfer) + HV * (2 * V * itemsize(transfer) + (K + 1) * 4))
            + 2 * sequences * K * V * 4)


def timing_design(design, settings):
    """The design the run times: with FLA's in-kernel options (settings.in_kernel), their Vector pass in front
    (kda/programs/in_kernel.py)."""
    options = tuple(getattr(settings, "in_kernel", ()) or ())
    if not options:
        return design
    from kda.programs.in_kernel import with_in_kernel
    return with_in_kernel(design, options, lower_bound=getattr(settings, "gate_lower_bound", None))


def timed_graphs(design, settings, precision) -> tuple:
    """(the design the run times, its graphs, the policy used): recorded once, on random inputs of the run's
    shapes (kda.driver.execute.record_graphs), where a full run's numerics graphs do not serve: with grouped value heads
    (group=G) a work item is one q/k head with the G value heads that share it, so its chunk loads the q/k
    tile from GM once for all G; with in-kernel options, their pass in front (timing_design)."""
    from kda.driver.execute import record_graphs
    timed = timing_design(design, settings)
    graphs, precision = record_graphs(timed, chunk_size=settings.chunk_size, d_k=settings.d_k, d_v=settings.d_v,
                                      precision=precision, group=settings.group)
    return timed, graphs, precision


def time_result(result, *, compiled: bool = False, runs: CompiledRuns | None = None) -> None:
    """Fill result.design_run / design_serial / design_report: every design, one pass or several, replayed
    pass after pass, pipelined and serial; each pass of the report carries its per-chunk detail.
    `compiled`: each pass timed by the compiled event model from its layout instead (npusim/model/whatif/),
    the same latencies, serial latency and bounds in the report, without its per-chunk detail, and no
    design_run (no trace, no per-unit busy times). `runs`: the replays from the compiled event model
    (npusim/model/whatif/runs.py, built for this design and shape), the same runs and report as the event
    model's, where it serves them (a kept trace as the pipelined runs' timelines, enough for the overlap
    metrics; not kept decisions): the event model replays the others, and `runs.notes` says so."""
    s, profile, ex, design = result.settings, result.profile, result.execution, result.design
    counts = chunk_counts(s)
    floor = floor_bytes(s, ex.precision.transfer)
    try:
        tpls = templates(design, ex.pass_graphs, profile, s.state_handoff, s.capacity)
    except WorkspaceError as err:
        result.workspace_error = str(err)
        return
    except CapacityError as err:         # the run's numerics stay; the CLI reports it and exits 2
        result.capacity_error = str(err)
        return
    if compiled:
        t = timer(result)
        serial = t.nominal(tpls, serial=True)
        result.design_report = replace(build_design_report(t.nominal(tpls), None, floor), serial_us=serial.latency_us)
        return
    result.design_run = _replayed(result, tpls, counts, runs, serial=False)
    result.design_serial = _replayed(result, tpls, counts, runs, serial=True)
    result.design_report = build_design_report(result.design_run, result.design_serial, floor)


def _replayed(result, tpls, counts: list[int], runs: CompiledRuns | None, *, serial: bool) -> DesignRun:
    """The design replayed on the result's profile: by `runs` where it serves, else by the event model."""
    s, profile = result.settings, result.profile
    if runs is not None:
        if s.record:
            runs.note("a replay that keeps its decisions (to re-time it) is the event model's")
        else:
            try:
                return runs.design_run(tpls, profile, serial=serial, timeline=s.keep_trace)
            except NotServed as why:
                runs.note(f"the compiled event model cannot serve some points ({why}): the event model replays them")
    return simulate_design(result.design, tpls, profile, counts, serial=serial, interleave=s.interleave,
                           trace=s.keep_trace, record=s.record)


def timer(result, *, retime: bool = False) -> DesignTimer:
    """The DesignTimer of an evaluated design (a VersionResult with timing); `retime`: try re-timing the
    recorded order before the compiled replay (npusim/model/whatif/)."""
    s = result.settings
    runs = {False: result.design_run, True: result.design_serial}
    runs = {k: v for k, v in runs.items() if v is not None and all(p.run.log is not None for p in v.passes)}
    return DesignTimer(result.design, result.execution.pass_graphs, result.profile, chunk_counts(s),
                       state_handoff=s.state_handoff, capacity=s.capacity, interleave=s.interleave, runs=runs,
                       bound_of=pass_bound, retime=retime)


def time_profiles(result, profiles: list[Profile], *, serial: bool = True, bound: bool = True) -> Timings:
    """The design's latency (serial latency, bound) under each of `profiles`."""
    return timer(result).time(profiles, serial=serial, bound=bound)
