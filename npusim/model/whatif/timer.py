"""A design timed under many profiles at once: what `--uncertainty`, intervals, fits and sweeps ask for.

For the samples, every duration comes from one pass of the cost model over a stacked profile (lanes.py:
each sampled field an array over the samples); each pass of the design is then timed by the first way that
serves it, from the layout of its work over the cores (engine.core_layout), or from its replay on its own
profile recorded once (engine.py, `record=True`) where the caller has it (the compiled model is then checked
against it) or re-timing needs it:

  1. re-timed (retime.py, maxplus.py), where asked (`retime=True`): the recorded order with the sample's
     durations, all samples at once, for the samples that keep every decision the replay made;
  2. replayed by the compiled event model (compiled.py), one sample at a time, on every core this process
     may use (threads.py): the default way, being the faster of the two on the designs measured
     (benchmarks/whatif_speed.py times both);
  3. replayed by the event model itself (engine.py), where neither can serve the schedule, or where a
     sampled field shapes the schedule itself (a count of cores, slots or buffers): said once, in `notes`.

Every way gives the event model's times: the tests hold re-timing and the compiled model to the replay.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Callable

import numpy as np

from npusim.chip.capacity import TILE
from npusim.chip.lanes import Diverges, lanes_of, stack, take
from npusim.chip.profile import Chip, Core, Profile, Workspace
from npusim.errors import NpuSimError
from npusim.model.engine import core_layout, simulate
from npusim.model.multipass import DesignRun, PassRun, simulate_design, templates
from npusim.model.run import Run
from npusim.model.schedule import BARRIER, CHUNKS, Design
from npusim.model.whatif.retime import Params, Schedule, compile_schedule, node_params, retime
from npusim.model.whatif.structure import Model

RETIMED, COMPILED, REPLAYED = "re-timed", "compiled replay", "event-model replay"
PROBE = 32           # samples re-timed first; below half of them accepted, the rest go straight to the compiled model


@dataclass
class Ways:
    """How many (sample, pass) timings each way gave."""
    counts: dict[str, int] = field(default_factory=lambda: {RETIMED: 0, COMPILED: 0, REPLAYED: 0})

    def add(self, way: str, n: int) -> None:
        self.counts[way] += int(n)

    def merge(self, other: "Ways") -> None:
        for k, v in other.counts.items():
            self.counts[k] += v

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def share(self, way: str) -> float:
        return self.counts[way] / self.total if self.total else 0.0

    def line(self) -> str:
        if not self.total:
            return "nothing timed"
        return ", ".join(f"{k} {v} ({v / self.total:.0%})" for k, v in self.counts.items() if v)


@dataclass
class Timings:
    """Per sample (NaN where a sample's profile cannot run the design: `errors` says why)."""
    latency_us: np.ndarray
    serial_us: np.ndarray | None
    bound_us: np.ndarray | None
    pass_us: dict[str, np.ndarray]           # each pass: its boundary + makespan
    errors: dict[int, str]
    ways: Ways
    notes: list[str]


# Fields that shape the schedule itself (how many cores, slots, buffers, Vector units; whether the
# instruction tables apply): a sample that changes one is replayed by the event model.
STRUCTURAL = {f"{name}.{f.name}" for name, cls in (("chip", Chip), ("workspace", Workspace), ("core", Core))
              for f in fields(cls) if f.type == "int"} | {"isa.enabled"}


def structural_changes(base: Profile, profiles: list[Profile]) -> np.ndarray:
    """True for each profile that changes a field shaping the schedule."""
    out = np.zeros(len(profiles), bool)
    for key in STRUCTURAL:
        ref = base.value(key)
        out |= np.array([p.value(key) != ref for p in profiles])
    return out


def stacked_templates(design: Design, graphs, profiles: list[Profile], state_handoff: str, capacity: str = TILE):
    """[(sample indices, stacked profile, templates or the error)]: the cost model run once for each group of
    samples that takes the same branches (a tiling chosen, a phase that fits); a sample whose fields cannot
    be stacked is built on its own."""
    out: list[tuple[np.ndarray, Profile, list | NpuSimError]] = []

    def build(idx: np.ndarray, prof: Profile) -> None:
        try:
            out.append((idx, prof, templates(design, graphs, prof, state_handoff, capacity)))
        except Diverges as d:
            mask = d.mask
            build(idx[mask], take(prof, mask))
            build(idx[~mask], take(prof, ~mask))
        except NpuSimError as err:
            if len(idx) == 1:
                out.append((idx, prof, err))
            else:                                  # which samples fail: each on its own
                for j in range(len(idx)):
                    build(idx[j:j + 1], take(prof, np.array([j])))
        except (TypeError, ValueError):
            if len(idx) == 1:
                raise
            for j in range(len(idx)):
                build(idx[j:j + 1], stack([profiles[idx[j]]]))

    build(np.arange(len(profiles)), stack(profiles))
    return out


@dataclass(frozen=True)
class Layout:
    """A pass's work as the event model lays it out (multipass.simulate_design, engine.simulate): each
    sequence's chunks, how many sequences a core interleaves, the simulated cores (core, its sequences, copies)."""
    counts: tuple[int, ...]
    interleave: int
    cores: list
    cores_used: int


def layouts(design: Design, profile: Profile, counts: list[int], heads: int, interleave: int) -> list[Layout]:
    """Each pass's Layout, without replaying it."""
    out = []
    for p in design.passes:
        mine = counts[::heads] if p.all_heads else counts
        seqs, lanes = ((1,) * sum(mine), 1) if p.layout == CHUNKS else (tuple(mine), p.interleave or interleave)
        cores, members = core_layout(seqs, p.on(profile).chip.ai_cores)
        out.append(Layout(seqs, lanes, [(r, cores[r][1], len(ms)) for r, ms in members.items()], len(cores)))
    return out


class DesignTimer:
    """One design on one shape, timed for any number of profiles (`time`): by the compiled event model, from
    the layout of its work, or from its replay recorded once (where the caller has it, and for re-timing)."""

    def __init__(self, design: Design, graphs, profile: Profile, counts: list[int], *, state_handoff: str,
                 capacity: str = TILE, interleave: int = 1, heads: int = 1, runs: dict | None = None,
                 bound_of: Callable | None = None, retime: bool = False):
        """`runs`: recorded DesignRuns by serial flag (recorded here where missing); `bound_of(pass_run,
        chunk_counts)`: a pass's lower bound (design_report's), for `time(bound=True)`; `retime`: try
        re-timing the recorded order before the compiled replay."""
        self.design, self.graphs, self.profile = design, list(graphs), profile
        self.counts, self.state_handoff, self.capacity = list(counts), state_handoff, capacity
        self.interleave, self.heads, self.bound_of = interleave, heads, bound_of
        self.retime = retime
        self.notes: list[str] = []
        self._runs = dict(runs or {})        # serial flag -> a recorded DesignRun
        self._compiled: dict[bool, list] = {}
        self._layouts = layouts(design, profile, self.counts, heads, interleave)

    def recorded(self, serial: bool) -> DesignRun:
        run = self._runs.get(serial)
        if run is None or any(p.run.log is None for p in run.passes):
            tpls = templates(self.design, self.graphs, self.profile, self.state_handoff, self.capacity)
            run = simulate_design(self.design, tpls, self.profile, self.counts, serial=serial,
                                  interleave=self.interleave, trace=False, heads=self.heads, record=True)
            self._runs[serial] = run
        return run

    def _ways(self, serial: bool):
        if serial not in self._compiled:
            out: list[tuple[PassRun, Schedule | None, Model | None]] = []
            for pr in self.recorded(serial).passes:
                sched = compile_schedule(pr.run) if self.retime else None
                built = Model.of_run(pr.run)
                check = built.replay(node_params(pr.run.template, pr.run.profile, serial, 1), [0])[0]
                model = built if check == pr.run.makespan_us else None
                if model is None:
                    self._note(f"pass {pr.pass_.name}: the compiled event model gives {check!r} us against the "
                               f"replay's {pr.run.makespan_us!r} us; its samples are replayed by the event model")
                if sched is not None and sched.problem is not None:
                    self._note(f"pass {pr.pass_.name}: not re-timed ({sched.problem})")
                out.append((pr, sched, model))
            self._compiled[serial] = out
        return self._compiled[serial]

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def time(self, profiles: list[Profile], *, serial: bool = True, bound: bool = True) -> Timings:
        """The design's latency (and serial latency, bound, per-pass times) under each of `profiles`."""
        n = len(profiles)
        names = [p.name for p in self.design.passes]
        lat = np.full(n, np.nan)
        ser = np.full(n, np.nan) if serial else None
        bnd = np.full(n, np.nan) if bound and self.bound_of is not None else None
        per = {name: np.full(n, np.nan) for name in names}
        errors: dict[int, str] = {}
        ways = Ways()
        odd = structural_changes(self.profile, profiles)
        if odd.any():
            self._note(f"{int(odd.sum())} of {n} samples change a field that shapes the schedule "
                       f"({', '.join(sorted(k for k in STRUCTURAL if any(p.value(k) != self.profile.value(k) for p in profiles)))}): "
                       "replayed by the event model")
        idx = np.flatnonzero(~odd)
        if len(idx):
            for group, prof, tpls in stacked_templates(self.design, self.graphs, [profiles[i] for i in idx],
                                                       self.state_handoff, self.capacity):
                where = idx[group]
                if isinstance(tpls, Exception):
                    for i in where:
                        errors[int(i)] = str(tpls)
                    continue
                self._time_group(where, prof, tpls, profiles, lat, ser, bnd, per, ways)
        for i in np.flatnonzero(odd):
            self._replay_one(int(i), profiles[i], lat, ser, bnd, per, errors, ways)
        return Timings(lat, ser, bnd, per, errors, ways, list(self.notes))

    def _time_group(self, where, prof, tpls, profiles, lat, ser, bnd, per, ways) -> None:
        m = len(where)
        for mode in ((False, True) if ser is not None else (False,)):
            total = np.zeros(m)
            recorded = self._ways(mode) if (mode in self._runs or self.retime) else None
            for i, (p, tpl) in enumerate(zip(self.design.passes, tpls)):
                boundary = (prof.chip.barrier_us * p.barriers if (i and p.boundary == BARRIER)
                            else prof.chip.launch_overhead_us)
                params = node_params(tpl, p.on(prof), mode, m)
                _, sched, model = recorded[i] if recorded is not None else (None, None, self._model(tpl, i, mode))
                span = self._makespans(sched, model, params, where, profiles, i, mode, ways)
                total = total + lanes_of(boundary, m)
                if not mode:
                    per[p.name][where] = lanes_of(boundary, m) + span
                total = total + span
            (ser if mode else lat)[where] = total
        if bnd is not None:
            bnd[where] = self._bounds(prof, tpls, m)

    def _model(self, tpl, i: int, serial: bool) -> Model:
        """Pass i's compiled model from its layout (no replay recorded)."""
        lay = self._layouts[i]
        return Model(tpl, serial=serial, counts=lay.counts, interleave=lay.interleave,
                     slots=self.design.passes[i].on(self.profile).workspace.slots, cores=lay.cores)

    def _makespans(self, sched, model, params: Params, where, profiles, i: int, serial: bool, ways: Ways):
        m = params.n
        span = np.full(m, np.nan)
        todo = np.arange(m)
        if sched is not None and sched.problem is None:
            probe = min(PROBE, m)
            first = retime(sched, _lanes(params, todo[:probe]))
            span[:probe][first.ok] = first.makespan_us[first.ok]
            ways.add(RETIMED, first.ok.sum())
            rest = todo[probe:]
            if len(rest) and first.ok.mean() >= 0.5:
                more = retime(sched, _lanes(params, rest))
                span[rest[more.ok]] = more.makespan_us[more.ok]
                ways.add(RETIMED, more.ok.sum())
            todo = np.flatnonzero(np.isnan(span))
        if len(todo) and model is not None:
            got = model.replay(params, todo)
            span[todo] = got[todo]
            ways.add(COMPILED, np.isfinite(got[todo]).sum())
            todo = todo[~np.isfinite(got[todo])]
            if len(todo):
                self._note(f"pass {self.design.passes[i].name}: the compiled event model did not finish some "
                           "samples; they are replayed by the event model")
        lay = self._layouts[i]
        for j in todo:                         # the event model itself
            prof = profiles[where[j]]
            tpl = templates(self.design, self.graphs, prof, self.state_handoff, self.capacity)[i]
            counts = list(lay.counts)
            run = simulate(tpl, self.design.passes[i].on(prof), chunks=counts[0] if len(set(counts)) == 1 else counts,
                           sequences=len(counts), interleave=lay.interleave, serial=serial, trace=False)
            span[j] = run.makespan_us
            ways.add(REPLAYED, 1)
        return span

    def _bound(self, pass_run):
        """A pass's bound, by the caller's `bound_of`."""
        if self.bound_of is None:
            raise ValueError("a bound asked of a timer made without bound_of")
        return self.bound_of(pass_run, tuple(self.counts))

    def _bounds(self, prof: Profile, tpls, m: int) -> np.ndarray:
        """design_report's bound (every pass's, plus its boundary), lane by lane."""
        total = np.zeros(m)
        for i, (p, tpl, lay) in enumerate(zip(self.design.passes, tpls, self._layouts)):
            boundary = (prof.chip.barrier_us * p.barriers if (i and p.boundary == BARRIER)
                        else prof.chip.launch_overhead_us)
            laid = PassRun(p, _laid_out(tpl, prof, lay, float("nan")), float("nan"), float("nan"))
            total = total + lanes_of(self._bound(laid), m) + lanes_of(boundary, m)
        return total

    def nominal(self, tpls, *, serial: bool = False) -> DesignRun:
        """The design on the timer's own profile, each pass's makespan from the compiled event model and the
        pass's layout (no replay; the event model where the compiled one does not finish): a DesignRun that
        carries the makespans, boundaries and layouts a design report reads, and no busy times, trace or log.
        `tpls`: the passes' templates on that profile."""
        t, out = 0.0, []
        for i, (p, tpl, lay) in enumerate(zip(self.design.passes, tpls, self._layouts)):
            boundary = (self.profile.chip.barrier_us * p.barriers if (i and p.boundary == BARRIER)
                        else self.profile.chip.launch_overhead_us)
            params = node_params(tpl, p.on(self.profile), serial, 1)
            span = self._makespans(None, self._model(tpl, i, serial), params, np.array([0]), [self.profile], i,
                                   serial, Ways())
            t += boundary
            out.append(PassRun(p, _laid_out(tpl, p.on(self.profile), lay, float(span[0]), serial), t, boundary))
            t += out[-1].run.makespan_us
        return DesignRun(self.design, self.profile, out, serial, tuple(self.counts), self.interleave)

    def _replay_one(self, i: int, prof: Profile, lat, ser, bnd, per, errors, ways: Ways) -> None:
        """A sample whose profile shapes the schedule: the event model, pass by pass."""
        try:
            tpls = templates(self.design, self.graphs, prof, self.state_handoff, self.capacity)
        except NpuSimError as err:
            errors[i] = str(err)
            return
        run = simulate_design(self.design, tpls, prof, self.counts, interleave=self.interleave, trace=False,
                              heads=self.heads)
        lat[i] = run.latency_us
        for pr in run.passes:
            per[pr.pass_.name][i] = pr.boundary_us + pr.run.makespan_us
        ways.add(REPLAYED, len(run.passes))
        if ser is not None:
            ser[i] = simulate_design(self.design, tpls, prof, self.counts, serial=True, interleave=self.interleave,
                                     trace=False, heads=self.heads).latency_us
            ways.add(REPLAYED, len(run.passes))
        if bnd is not None:
            bnd[i] = sum(self._bound(pr) + pr.boundary_us for pr in run.passes)


def _laid_out(tpl, profile: Profile, lay: Layout, makespan_us: float, serial: bool = False) -> Run:
    """A pass's Run as its layout gives it, with `makespan_us` and no busy times, trace or log."""
    return Run(tpl, profile, serial, max(lay.counts), len(lay.counts), lay.cores_used, makespan_us, {}, None, {},
               lay.counts, lay.interleave)


def _lanes(params: Params, idx: np.ndarray) -> Params:
    """The lanes `idx` of the per-sample durations."""
    out = {}
    for k, v in params.arrays.items():
        out[k] = np.ascontiguousarray(v[..., idx]) if v.ndim == 2 else v
    return Params(out, len(idx))
