"""The precision policy of a run: the type of each hand-off, the state and the Cube's accumulation, from
the settings and the program's declared defaults; and what the policy's wider types cost in bytes."""
from __future__ import annotations

import math

from npusim.record.precision import Precision, itemsize

from kda.driver.execute import program_default_state
from kda.settings.settings import Settings


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


def check_policy_names(graphs, settings: Settings, program, foreign_payloads_ok: bool) -> None:
    stored = {n for g in graphs for n, m in g.tensors.items() if m.origin in ("vec", "cube")}
    unknown = [n for n in unknown_payloads(graphs[0], settings.payload_dtypes)
               if all(n in unknown_payloads(g, [n]) for g in graphs) and n not in stored]
    if unknown and not foreign_payloads_ok:
        known = ", ".join(p.name for g in graphs for s in g.syncs for p in s.payload if not p.redundant)
        raise ValueError(f"precision policy: {program.name} hands over no tensor named "
                         f"{', '.join(map(repr, unknown))}; its payloads are {known}")
