"""The ground truth a run is held to: the fp64 recurrence (reference.py) on exactly the inputs the NPU saw,
q, k, v rounded to their GM type and the initial state to the state's type; a variable-length batch runs
each sequence on its own."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from kda.driver.execute import Execution
from kda.reference.recurrence import naive_recurrent_kda


@dataclass
class Reference:
    o: torch.Tensor                  # fp64
    state: torch.Tensor              # fp64
    key: tuple = ()                  # what the stored inputs depend on (see reference_key)


def reference(ex: Execution) -> Reference:
    """The fp64 recurrence on exactly the inputs the NPU saw (rounded to their GM types)."""
    if ex.seqlens:
        return _varlen_reference(ex)
    q, k, v, g, beta, h0 = ex.inputs_as_stored
    if q.device.type == "npu":          # Ascend has no fp64 matmul: the ground truth runs on the host
        q, k, v, g, beta, h0 = (None if x is None else x.cpu() for x in (q, k, v, g, beta, h0))
    o, S = naive_recurrent_kda(q, k, v, g, beta, None, h0, True, dtype=torch.float64)
    return Reference(o, S, reference_key(ex))


def _varlen_reference(ex: Execution) -> Reference:
    """The recurrence over each sequence of a variable-length batch on its own."""
    if ex.inputs is None or ex.seqlens is None:
        raise ValueError("the variable-length reference needs the execution's inputs and its sequence lengths")
    q, k, v, g, beta, h0 = ex.inputs
    p, cd = ex.precision, ex.precision.compute
    def stored(x):
        return p.round(x.to(cd), p.transfer)
    outs, states, a = [], [], 0
    for i, n in enumerate(ex.seqlens):
        def part(x):
            return x[:, a:a + n]
        init = None if h0 is None else p.round(h0[i:i + 1].to(cd), p.state_type)
        o, S = naive_recurrent_kda(stored(part(q)), stored(part(k)), stored(part(v)), part(g).to(cd),
                                   part(beta).to(cd), None, init, True, dtype=torch.float64)
        outs.append(o)
        states.append(S)
        a += n
    return Reference(torch.cat(outs, 1), torch.cat(states, 0), reference_key(ex))


def reference_key(ex: Execution) -> tuple:
    """GM holds q, k, v in the transfer type and the initial state in the state type: a reference made
    for one policy serves another only if these agree (v4 keeps its state in fp32 by default)."""
    has_h0 = ex.inputs is not None and ex.inputs[5] is not None
    return (ex.precision.transfer, ex.precision.state_type if has_h0 else None)

