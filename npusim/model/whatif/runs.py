"""A design's replay on a profile by the compiled event model (compiled.py), in the shape the event model gives
it (engine.simulate, multipass.simulate_design): each pass's Run with its makespan, every unit's busy time and
the chip-wide bandwidths' use, without a trace or a log (a pipelined run's timeline where asked: each node's
times, in the trace's order, enough for the overlap metrics). The compiled model makes the engine's decisions by the
engine's rules and sums the same durations in the same order, so every number is the event model's.

One design on one shape is timed on any number of profiles (`CompiledRuns.design_run`), each pass's structure
built once for each layout of its work and reused. A replay the compiled model cannot serve (one the event
model refuses or finds deadlocked, a structure past the compiled model's limits) raises NotServed, naming why:
the caller replays it on the event model, which gives its answer or its error.
"""
from __future__ import annotations

import math

import numpy as np

from npusim.chip.profile import Profile
from npusim.model.engine import Run, Template, core_layout
from npusim.model.limits import check_replay
from npusim.model.multipass import DesignRun, PassRun
from npusim.model.schedule import BARRIER, CHUNKS, Design
from npusim.model.template import shared_rate
from npusim.model.trace import Trace
from npusim.model.whatif.retime import SHARED, node_params
from npusim.model.whatif.structure import Model


class NotServed(Exception):
    """The compiled model cannot serve this replay; the text says why."""


class CompiledRuns:
    """One design on one shape (`chunk_counts` per sequence, `heads` consecutive entries the heads of one
    sequence, `interleave` sequences alternating on a core), replayed on any profile by the compiled model."""

    def __init__(self, design: Design, chunk_counts: list[int], *, interleave: int = 1, heads: int = 1):
        self.design, self.counts = design, [int(c) for c in chunk_counts]
        self.interleave, self.heads = interleave, heads
        self.notes: list[str] = []           # what the caller replayed on the event model instead, each said once
        self._models: dict[tuple, Model] = {}

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def design_run(self, tpls: list[Template], profile: Profile, *, serial: bool = False,
                   timeline: bool = False) -> DesignRun:
        """multipass.simulate_design(design, tpls, profile, chunk_counts, serial=serial, trace=False) from the
        compiled model: the same DesignRun, without traces (NotServed where the compiled model cannot serve);
        `timeline`: each pipelined run with its timeline (Run.timeline), the event times its trace would hold."""
        t = 0.0
        out: list[PassRun] = []
        for i, (p, tpl) in enumerate(zip(self.design.passes, tpls)):
            boundary = profile.chip.barrier_us * p.barriers if (i and p.boundary == BARRIER) else \
                profile.chip.launch_overhead_us
            mine = self.counts[::self.heads] if p.all_heads else self.counts
            if p.layout == CHUNKS:
                run = self._run(i, tpl, p.on(profile), 1, [1] * sum(mine), serial, 1, timeline)
            else:
                run = self._run(i, tpl, p.on(profile), mine, mine, serial, p.interleave or self.interleave, timeline)
            t += boundary
            out.append(PassRun(p, run, t, boundary))
            t += run.makespan_us
        return DesignRun(self.design, profile, out, serial, tuple(self.counts), self.interleave)

    def _run(self, i: int, tpl: Template, profile: Profile, chunks, counts: list[int], serial: bool,
             interleave: int, timeline: bool = False) -> Run:
        """engine.simulate(tpl, profile, chunks=chunks, sequences=len(counts), serial=serial, trace=False,
        interleave=interleave) from the compiled model."""
        try:
            check_replay(chunks, len(counts), profile.chip.ai_cores)
        except Exception as err:  # noqa: BLE001 - the event model says it again, in its own words
            raise NotServed(f"a replay the event model refuses ({err})") from None
        if not counts or min(counts) < 1 or interleave < 1 or \
                (interleave > 1 and any(s.next_item for s in tpl.graph.syncs)):
            raise NotServed("a layout the event model refuses")
        layout, members = core_layout(counts, profile.chip.ai_cores)
        cores = [(r, layout[r][1], len(ms)) for r, ms in members.items()]
        model = self._model(i, tpl, profile, counts, serial, interleave, cores)
        params = node_params(tpl, profile, serial, 1)
        span, busy, moved = model.busy_times(params, [0])
        if not math.isfinite(span[0]):
            raise NotServed("the compiled event model did not finish (a dependency cycle)")
        resources = sorted({x.resource for x in tpl.nodes})
        held = {(c, res): float(busy[rank * len(resources) + j, 0])
                for rank, (first, _, _) in enumerate(cores) for c in members[first] for j, res in enumerate(resources)}
        shared = {r: float(moved[SHARED.index(r), 0]) for r in SHARED if math.isfinite(shared_rate(profile, r))}
        events = _timeline(tpl, model, model.times(params, 0), members) if timeline and not serial else None
        return Run(tpl, profile, serial, max(counts), len(counts), min(profile.chip.ai_cores, len(counts)),
                   float(span[0]), held, None, shared, tuple(counts), interleave, timeline=events)

    def _model(self, i: int, tpl: Template, profile: Profile, counts: list[int], serial: bool, interleave: int,
               cores: list) -> Model:
        """Pass i's compiled structure for this layout and template shape (built once, then reused)."""
        shape = (tpl.n, tuple((x.resource, tuple(x.deps)) for x in tpl.nodes), tuple(tpl.state_edges),
                 tuple(tpl.war_edges), tpl.slot_release)
        key = (i, serial, interleave, profile.workspace.slots, profile.chip.ai_cores, tuple(counts), shape)
        if key not in self._models:
            try:
                self._models[key] = Model(tpl, serial=serial, counts=counts, interleave=interleave,
                                          slots=profile.workspace.slots, cores=cores)
            except ValueError as err:
                raise NotServed(str(err)) from None
        return self._models[key]



def _timeline(tpl: Template, model: Model, times: np.ndarray, members: dict[int, list[int]]) -> Trace:
    """The trace's columns that the compiled model's times give, as engine.simulate keeps them: each simulated
    core's nodes in the order they completed, copied to the other cores of its class as copy_trace does (core
    by core, sequences renumbered). `times`: Model.times. No slots (-1), stretch (1.0) or occupancy: the
    timeline holds when each node ran, not what it held."""
    done = np.argsort(times[:, 3], kind="stable")
    inst, node = np.divmod(done, tpl.n)
    core = np.concatenate([np.full(len(seq), c, np.int64) for c, seq, _ in model.instances])[inst]
    seq = np.concatenate([s for _, s, _ in model.instances])[inst]
    chunk = np.concatenate([t for _, _, t in model.instances])[inst]
    rows, cores = np.arange(len(done)), core
    if any(len(ms) > 1 for ms in members.values()):
        rep = {c: r for r, ms in members.items() for c in ms}
        parts = [(np.flatnonzero(core == rep[c]), c) for c in sorted(rep)]
        rows = np.concatenate([p for p, _ in parts])
        cores = np.concatenate([np.full(len(p), c, np.int64) for p, c in parts])
        seq = np.concatenate([seq[p] - rep[c] + c for p, c in parts])
    else:
        seq = seq[rows]
    at = done[rows]
    start = times[at, 0].tolist()
    for j in np.flatnonzero(times[at, 4] == 1).tolist():
        start[j] = 0                                     # SimPy's clock before its first event: the integer 0
    first = np.array([x.nbytes_first for x in tpl.nodes], np.int64)
    later = np.array([x.nbytes for x in tpl.nodes], np.int64)
    k, c = node[rows], chunk[rows]
    return Trace(tpl, node=k.tolist(), core=cores.tolist(), seq=seq.tolist(), chunk=c.tolist(), start=start,
                 busy_end=(times[at, 0] + times[at, 1]).tolist(), end=times[at, 2].tolist(),
                 nbytes=np.where(c == 0, first[k], later[k]).tolist(), slot=[-1] * len(at), stretch=[1.0] * len(at))
