"""How long a recorded phase or hand-off takes on a profile.

Cube phase:   sum over matmuls of MACs / rate(operand type) + per-matmul overhead
Vector phase: sum over ops of elements / (lanes x Vector units) + per-instruction overhead;
              a sequential op adds its dependent steps x step latency, which the units cannot split
Both:         GM inputs loaded and outputs stored at the per-core GM rate (phase_us: the model without the
              core's pipes; template.py times phases through pipes.py, which splits them into tiles)
Sync:         fixed latency + bytes / bandwidth
With the profile's [isa] table (isa.py) an op costs what the measured instruction tables charge instead.
"""
from __future__ import annotations

from npusim.chip import isa
from npusim.chip.profile import Profile
from npusim.record.graph import CUBE, Phase
from npusim.record.ops import MATMUL, SEQUENTIAL


def op_us(op, unit: str, profile: Profile) -> float:
    if isa.enabled(profile):
        if unit == CUBE:
            return profile.cycles_to_us(isa.cube_op_cycles(op, profile))
        return profile.cycles_to_us(isa.vector_op_cycles(op, profile, profile.chip.vec_per_core))
    if unit == CUBE:
        if op.kind != MATMUL or op.macs == 0:
            return 0.0
        return op.macs / profile.cube_macs_per_us(op.operand_bytes) + profile.cycles_to_us(profile.cube.op_overhead_cycles)
    if op.elements == 0 and op.steps == 0:
        return 0.0
    lanes_per_us = profile.vector.elems_per_cycle * profile.chip.vec_per_core * profile.chip.clock_ghz * 1e3
    t = op.elements / lanes_per_us + profile.cycles_to_us(profile.vector.op_overhead_cycles)
    if op.kind == SEQUENTIAL:
        t += profile.cycles_to_us(op.steps * profile.vector.step_latency_cycles)
    return t


def compute_us(phase: Phase, profile: Profile) -> float:
    return sum(op_us(op, phase.unit, profile) for op in phase.ops)


def phase_us(phase: Phase, profile: Profile) -> float:
    """Time the phase holds its unit: compute plus its own GM traffic."""
    return compute_us(phase, profile) + profile.gm_us(phase.gm_read_bytes + phase.gm_write_bytes)
