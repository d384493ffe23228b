"""Replaying a design of several passes: each pass on the event model with its own work layout, one
after the other, with a launch or an all-core barrier between them (schedule.py).

    CHUNKS pass       every (sequence, chunk) is an item of its own: items go round-robin over all cores,
                      each core pipelines its items through its ping/pong slots;
    SEQUENTIAL/FUSED  each sequence's chunks in order on one core, carrying the state; `interleave`
                      sequences alternate on a core.

A pass ends when its last core is done; the next one starts after the boundary. GM traffic of every pass
(inputs, intermediates written by one pass and read by the next, outputs, FLA's per-chunk states) goes
through the shared HBM model.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from npusim.chip.capacity import TILE
from npusim.chip.profile import Profile
from npusim.model.engine import Run, Template, build_template, simulate
from npusim.model.schedule import BARRIER, CHUNKS, Design, Pass
from npusim.model.trace import Trace
from npusim.record.graph import PhaseGraph


@dataclass
class PassRun:
    pass_: Pass
    run: Run
    start_us: float           # when the pass's work starts, from the design's start (its boundary before it)
    boundary_us: float        # launch or barrier cost paid before it

    @property
    def end_us(self) -> float:
        return self.start_us + self.run.makespan_us

    @property
    def items(self) -> int:
        return self.run.instances


@dataclass
class DesignRun:
    design: Design
    profile: Profile
    passes: list[PassRun]
    serial: bool
    chunk_counts: tuple[int, ...]      # per sequence
    interleave: int

    @property
    def latency_us(self) -> float:
        return self.passes[-1].end_us if self.passes else 0.0

    @property
    def sequences(self) -> int:
        return len(self.chunk_counts)

    @property
    def hbm_bytes(self) -> int:
        """GM bytes every phase of every pass loaded and stored, over the whole run."""
        total = 0
        for p in self.passes:
            tpl = p.run.template
            per_item = sum(ph.gm_read_bytes + ph.gm_write_bytes for ph in tpl.graph.phases)
            total += per_item * p.run.instances
        return total

    def shifted_runs(self) -> list[Run]:
        """Each pass's run with its trace moved to the design's time axis (for traces and plots)."""
        return [_shifted(p.run, p.start_us) for p in self.passes]


def templates(design: Design, graphs: list[PhaseGraph], profile: Profile, state_handoff: str,
              capacity: str = TILE) -> list[Template]:
    """One timed template per pass; raises WorkspaceError naming the pass's program if it does not fit, and
    CapacityError if a phase does not fit its unit's memory and is refused (`capacity` "refuse") or no
    tiling fits. A pass's program may declare how its state travels (`@phase_program(..., state_handoff="own")`);
    otherwise `state_handoff` applies."""
    return [build_template(g, p.on(profile), p.program.notes.get("state_handoff", state_handoff), capacity=capacity)
            for g, p in zip(graphs, design.passes)]


def simulate_design(design: Design, tpls: list[Template], profile: Profile, chunk_counts: list[int], *,
                    serial: bool = False, interleave: int = 1, trace: bool = True, heads: int = 1,
                    record: bool = False) -> DesignRun:
    """Replay every pass of `design` for sequences of `chunk_counts` chunks each (`heads` consecutive
    entries are the heads of one sequence: a pass whose items hold every head counts each sequence once)."""
    counts = [int(c) for c in chunk_counts]
    t = 0.0
    out: list[PassRun] = []
    for i, (p, tpl) in enumerate(zip(design.passes, tpls)):
        boundary = profile.chip.barrier_us * p.barriers if (i and p.boundary == BARRIER) else \
            profile.chip.launch_overhead_us
        on = p.on(profile)
        mine = counts[::heads] if p.all_heads else counts
        if p.layout == CHUNKS:
            items = sum(mine)
            run = simulate(tpl, on, chunks=1, sequences=items, serial=serial, trace=trace, record=record)
        else:
            run = simulate(tpl, on, chunks=mine, sequences=len(mine), serial=serial, trace=trace,
                           interleave=p.interleave or interleave, record=record)
        t += boundary
        out.append(PassRun(p, run, t, boundary))
        t += run.makespan_us
    return DesignRun(design, profile, out, serial, tuple(counts), interleave)


def _shifted(run: Run, offset: float) -> Run:
    if run.trace is None or offset == 0.0:
        return run
    tr = run.trace
    moved = Trace(tr.template, list(tr.node), list(tr.core), list(tr.seq), list(tr.chunk),
                  [x + offset for x in tr.start], [x + offset for x in tr.busy_end], [x + offset for x in tr.end],
                  list(tr.nbytes), list(tr.slot), [(x + offset, c, s, b) for x, c, s, b in tr.occupancy],
                  list(tr.stretch))
    return replace(run, trace=moved)
