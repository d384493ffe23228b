"""The outcome of one simulation (engine.py): its template and profile, the makespan, each unit's busy time,
and the trace when one was kept."""
from __future__ import annotations

from dataclasses import dataclass

from npusim.chip.profile import Profile
from npusim.errors import NpuSimError
from npusim.model.template import Template
from npusim.model.trace import Log, Trace


@dataclass
class Run:
    """The outcome of one simulation."""
    template: Template
    profile: Profile
    serial: bool
    chunks: int
    sequences: int
    cores_used: int
    makespan_us: float                  # first node start to last node end, over all cores
    busy_us: dict[tuple[int, str], float]
    trace: Trace | None
    shared_us: dict[str, float]         # time the chip-wide HBM / L2 bandwidth was busy
    chunk_counts: tuple[int, ...] = ()  # chunks of each sequence (all `chunks` unless variable-length)
    interleave: int = 1                 # sequences a core alternates at a time
    log: "Log | None" = None            # the decisions of the replay, when asked (simulate(record=True))
    timeline: Trace | None = None       # a run timed without a trace: each node's unit, core, sequence, chunk
                                        # and times, in the trace's order (no bytes' slots, stretch, occupancy)

    @property
    def latency_us(self) -> float:
        return self.makespan_us + self.profile.chip.launch_overhead_us

    def traced(self) -> Trace:
        """The run's trace; a run simulated without one (trace=False) is refused by name."""
        if self.trace is None:
            raise NpuSimError("this run was simulated without a trace: simulate(..., trace=True) keeps one")
        return self.trace

    def timed(self) -> Trace:
        """Each node's times: the trace, else the timeline; a run with neither is refused by name."""
        return self.timeline if self.trace is None and self.timeline is not None else self.traced()

    def lanes(self, core: int) -> int:
        """Sequences `core` alternates at a time (it holds sequences core, core + cores_used, ...)."""
        return min(self.interleave, len(range(core, self.sequences, self.cores_used)))

    @property
    def slots(self) -> int:
        """Workspace slots of the busiest core (core 0): the profile's ping/pong for each lane."""
        return self.profile.workspace.slots * self.lanes(0)

    @property
    def waves(self) -> int:
        return -(-self.sequences // self.cores_used)

    @property
    def instances(self) -> int:
        """(sequence, chunk) pairs replayed."""
        return sum(self.chunk_counts) if self.chunk_counts else self.chunks * self.sequences
