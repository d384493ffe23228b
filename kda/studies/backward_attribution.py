"""Which backward hand-offs must stay fp32: each payload of the backward design rounded alone to a narrow
type (the rest, and the states, fp32), every gradient's rel RMS error against the fp64 autograd reference,
ranked by the worst error relative to FLA's tolerance for that gradient. Then the recommended policy: the
narrow type everywhere except the payloads whose rounding alone uses more than `share` of a tolerance.

    rank = attribute_backward("fla", x, do, dht, chunk_size=64)
    rank[0].name, rank[0].worst       # the payload whose rounding costs the most
"""
from __future__ import annotations

from dataclasses import dataclass

from npusim import Precision

from kda.driver.backward import backward_design, execute_backward, record_backward_graphs
from kda.driver.multipass import stored_types
from kda.reference.parity import compare, tolerance
from kda.reference.recurrence_bwd import GRADS, recurrent_kda_grads

STATE = "state"


@dataclass(frozen=True)
class BackwardItem:
    name: str                       # a payload, or "state" (both directions' states in the narrow type)
    errors: dict[str, float]        # gradient -> rel RMS error with only this item rounded

    @property
    def worst(self) -> float:
        """max over the gradients of error / FLA's tolerance (>= 1: this rounding alone fails parity)."""
        return max(self.errors[n] / tolerance(n, "bf16") for n in GRADS)


def payload_names(version: str, chunk_size: int, d_k: int, d_v: int) -> list[str]:
    """Every non-redundant sync payload and every GM-stored pass output of the backward design."""
    graphs, _ = record_backward_graphs(version, "recompute", chunk_size=chunk_size, d_k=d_k, d_v=d_v,
                                       precision=Precision("fp32"))
    design = backward_design(version)
    names = {p.name for g in graphs for s in g.syncs for p in s.payload if not p.redundant}
    names |= {r for p in design.passes[:-1] for r in p.program.returns
              if p.program.state is None or r != p.program.state[1]}
    return sorted(names)


def attribute_backward(version: str, x, do, dht, *, chunk_size: int = 64, narrow: str = "bf16") -> list[BackwardItem]:
    """Rank the backward's hand-offs by the gradient error their rounding to `narrow` costs, alone."""
    ref = recurrent_kda_grads(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, do, dht)
    keep = {n: "fp32" for n in stored_types(backward_design(version))}     # the design's own fp32 GM types

    def run(overrides: dict, state: str = "fp32") -> dict[str, float]:
        p = Precision("fp32", {**keep, **overrides}, state=state)
        bx = execute_backward(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, do, dht, version=version,
                              chunk_size=chunk_size, precision=p)
        return {n: compare(ref[n], bx.grads[n]).rel_rms_err for n in GRADS}

    items = [BackwardItem(STATE, run({}, state=narrow))]
    items += [BackwardItem(n, run({n: narrow})) for n in payload_names(version, chunk_size, x.q.shape[-1],
                                                                      x.v.shape[-1])]
    return sorted(items, key=lambda it: -it.worst)


def must_stay_fp32(items: list[BackwardItem], share: float = 0.5) -> list[str]:
    """Items whose rounding alone uses more than `share` of some gradient's tolerance."""
    return [it.name for it in items if it.worst > share]
