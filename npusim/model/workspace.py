"""The GM/L2 workspace plan (design document, section 4.2): a resident region and ping/pong slots.

Tensors a sync carries live in the workspace from that sync until the last phase that reads them.
Resident ones (the state, and tensors the program declares resident) take the resident region, one copy
each; the rest are a chunk's transient tensors and live in the chunk's slot. The slot's peak is the
largest set of transient tensors alive at once, in program order. What does not fit is an error.

The plan's regions are per value head: a work item of G grouped value heads sharing one q/k head (the
graph's shapes["group"]) hands over G value heads' tensors, and its core plans G times each region (the
192 MB L2 holds 8 MiB per core, far more than any plan here).
"""
from __future__ import annotations

from dataclasses import dataclass

from npusim.chip.profile import Workspace
from npusim.errors import WorkspaceError
from npusim.record.graph import Phase, PhaseGraph, Sync


@dataclass(frozen=True)
class Lifetime:
    name: str
    nbytes: int
    placement: str        # "slot" or "resident"
    start: int            # step index of the sync that writes it
    end: int              # step index of the last phase that reads it


@dataclass(frozen=True)
class WorkspaceUse:
    lifetimes: tuple[Lifetime, ...]
    resident: dict[str, int]          # name -> bytes (the state included)
    slot_peak: int                    # bytes
    slot_peak_step: int               # step index where the peak is reached
    slot_release_step: int | None     # step after which a chunk's slot is free again (None: no slot use)

    @property
    def resident_bytes(self) -> int:
        return sum(self.resident.values())

    def live_at(self, step: int) -> list[Lifetime]:
        return [lt for lt in self.lifetimes if lt.placement == "slot" and lt.start <= step <= lt.end]


def analyse(graph: PhaseGraph) -> WorkspaceUse:
    index = {s.name: i for i, s in enumerate(graph.steps) if isinstance(s, Phase)}
    lifetimes: list[Lifetime] = []
    resident: dict[str, int] = {}
    for i, step in enumerate(graph.steps):
        if not isinstance(step, Sync):
            continue
        for p in step.payload:
            if p.redundant and p.producer != "GM":     # already in the workspace
                continue
            readers = [index[r] for r in graph.tensors[p.name].readers if index.get(r, -1) > i]
            end = max(readers, default=index[step.consumer])
            lifetimes.append(Lifetime(p.name, p.nbytes, p.placement, i, end))
            if p.placement == "resident":
                resident[p.name] = max(resident.get(p.name, 0), p.nbytes)
    if graph.state is not None:
        resident[graph.state.input_name] = graph.state.nbytes
    peak, peak_step = 0, 0
    for i, step in enumerate(graph.steps):
        if isinstance(step, Sync):
            live = sum(lt.nbytes for lt in lifetimes if lt.placement == "slot" and lt.start <= i <= lt.end)
            if live > peak:
                peak, peak_step = live, i
    slot_ends = [lt.end for lt in lifetimes if lt.placement == "slot"]
    return WorkspaceUse(tuple(lifetimes), resident, peak, peak_step, max(slot_ends) if slot_ends else None)


def check_fits(graph: PhaseGraph, use: WorkspaceUse, plan: Workspace) -> None:
    """Raise WorkspaceError, naming the payload, if the plan cannot hold what the program writes."""
    kib = 1024
    group = int(graph.shapes.get("group", 1))
    per = f" ({group} value heads x {{:g}} KiB)" if group > 1 else ""
    if use.resident_bytes > plan.resident_kib * kib * group:
        items = ", ".join(f"{n} {b / kib:g}" for n, b in use.resident.items())
        raise WorkspaceError(f"{graph.program}: the resident region needs {use.resident_bytes / kib:g} KiB "
                             f"({items} KiB) but the plan has {plan.resident_kib * group:g} KiB"
                             + per.format(plan.resident_kib))
    if use.slot_peak > plan.slot_kib * kib * group:
        step = graph.steps[use.slot_peak_step]
        items = ", ".join(f"{lt.name} {lt.nbytes / kib:g}" for lt in use.live_at(use.slot_peak_step))
        raise WorkspaceError(f"{graph.program}: sync {step.label} needs {use.slot_peak / kib:g} KiB live in a "
                             f"{plan.slot_kib * group:g} KiB ping/pong slot{per.format(plan.slot_kib)} ({items} KiB)")
