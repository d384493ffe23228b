"""Recording a measured kernel's stages on one chunk, for designs whose stages read more than FLA's inputs:
a pass over [C, H] tiles of every head's gate (MegaGDN's cumsum) and stages that read the cumulative gate of
one head directly. Timing only: the graphs are what the event model replays.

    record_kernel(design, C, d_k, d_v, dtype, heads) -> one PhaseGraph per pass

The inputs, per chunk: Q, K [C, d_k] and V [C, d_v] and beta [C] in the kernel's operand type; the log
decay g, its cumulative sum gc [C, 1] (one decay per head: GDN) and g_heads [C, H] (one chunk of every
head, the layout [T, H] of the gate in GM) in fp32. A design whose notes say `gate = channel` (a KDA kernel)
reads g [C, d_k] (its key gate, already summed within the chunk) and beta in fp32; H [d_k, d_v] is the state
a chunk's stages read back from GM (the h a state pass stored), in the operand type.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from npusim.record.precision import Precision

from kda.driver.execute import check_recording, design_precision, program_default_state
from kda.driver.multipass import record_passes


def record_kernel(design, chunk_size: int, d_k: int, d_v: int, dtype: str, heads: int) -> list:
    check_recording(chunk_size, d_k, d_v, max(heads, 1))
    state_program = (design.state_pass or design.passes[0]).program
    precision = design_precision(design, Precision(dtype, {}, state=program_default_state(state_program, dtype)))
    gen = torch.Generator().manual_seed(0)
    C, cd = chunk_size, precision.compute

    def rnd(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=cd)

    channel = design.notes.get("gate") == "channel"
    g = F.logsigmoid(rnd(1, 1, C, d_k if channel else 1))
    pool = {"Q": F.normalize(rnd(1, 1, C, d_k), dim=-1), "K": F.normalize(rnd(1, 1, C, d_k), dim=-1),
            "V": rnd(1, 1, C, d_v), "beta": torch.sigmoid(rnd(1, 1, C)), "g": g.cumsum(-2) if channel else g,
            "gc": g.cumsum(-2), "g_heads": F.logsigmoid(rnd(1, 1, C, max(heads, 1))), "scale": d_k ** -0.5,
            "H": rnd(1, 1, d_k, d_v) * 0.1, "H_in": rnd(1, 1, d_k, d_v) * 0.1}
    types = {"g": "fp32", "gc": "fp32", "g_heads": "fp32", "beta": "fp32" if channel else dtype}
    graphs, _ = record_passes(design, pool, torch.zeros(1, d_k, d_v, dtype=cd), precision, types,
                              {"chunk_size": C, "d_k": d_k, "d_v": d_v})
    return graphs
