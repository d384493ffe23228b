"""An evaluated design timed under many profiles at once (npusim/model/whatif.py): what `--uncertainty`,
the sweeps' profile axes and the benchmarks' intervals ask for. The design's recorded replays are reused
where the run kept its decisions (Settings.record); otherwise they are recorded once here."""
from __future__ import annotations

from npusim.chip.profile import Profile
from npusim.model.whatif import DesignTimer, Timings
from npusim.output.report import pass_bound

from kda.studies.timing import chunk_counts


def timer(result) -> DesignTimer:
    """The DesignTimer of an evaluated design (a VersionResult with timing)."""
    s = result.settings
    runs = {False: result.design_run, True: result.design_serial}
    runs = {k: v for k, v in runs.items() if v is not None and all(p.run.log is not None for p in v.passes)}
    return DesignTimer(result.design, result.execution.pass_graphs, result.profile, chunk_counts(s),
                       state_handoff=s.state_handoff, capacity=s.capacity, interleave=s.interleave, runs=runs,
                       bound_of=pass_bound)


def time_profiles(result, profiles: list[Profile], *, serial: bool = True, bound: bool = True) -> Timings:
    """The design's latency (serial latency, bound) under each of `profiles`."""
    return timer(result).time(profiles, serial=serial, bound=bound)
