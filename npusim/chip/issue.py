"""How an AscendC kernel issues its Vector work, where the source says more than one instruction per op.

isa.py times a recorded op as one Vector instruction with a wait after it. A program that declares its
barriers (`@phase_program(..., barriers="explicit")`, npusim/record/program.py) records what the kernel's
source does instead, and this module times it:

  walls        pipe_barrier(PIPE_V) after an instruction, and a WaitFlag<V_S> (the scalar unit waiting for
               the Vector pipe to drain): each costs isa.vec_dependent_cycles. Counted from the source
               (npu.pipe_barrier); an instruction with none after it costs its issue alone.
  row repeats  an instruction issued one repeat per row, with a mask narrower than a repeat (the 16-wide fp32
               rows of a 16 x 16 tile fill 64 B of a 256-B repeat): repeats = rows, whatever the bytes
               (npu.repeats).
  ub copy      DataCopy UB -> UB on the Vector pipe: bytes / isa.ub_ub_bytes_per_cycle (msKPP UB_TO_UB), at
               least isa.vec_min_cycles (npu.ub_copy).
  brcb         Brcb: a repeat reads 8 elements and writes 8 blocks (256 B), one cycle a repeat (msKPP VBRCB),
               at least isa.vec_min_cycles (npu.brcb).
  dup          Duplicate (vector_dup) of a scalar: one cycle a repeat (msKPP VECTORDUP) (npu.dup).
  cast         a repeat is 256 B of the source: a 16-bit source 128 elements, an fp32 one 64 (msKPP
               VCONV_BF16_FP32 / VCONV_FP32_BF16) (npu.cast).
  scalar       a loop of GetValue / SetValue (or a pointer store) on UB by the scalar unit:
               isa.scalar_access_cycles each, on the Vector unit's time: it issues nothing meanwhile
               (npu.scalar). pto-isa's TROWEXPAND on A2 reads each row's value this way.
  flag         a CrossCoreBarrier between a core's two Vector units: one cross-core flag hop,
               sync.latency_us, that both wait on (npu.flag).
"""
from __future__ import annotations

import math

from npusim.chip.profile import Profile
from npusim.record.ops import BRCB, CAST, DUP, FLAG, SCALAR, UB_COPY, Op

NAMES = (UB_COPY, BRCB, CAST, DUP)


def declared(op: Op) -> bool:
    """Whether the op is timed here: its walls come from the source (a program that declares its barriers),
    or it is one of the instructions isa.py does not know. A repeat count alone (npu.repeats) is isa.py's."""
    return op.walls is not None or op.kind in (SCALAR, FLAG) or op.name in NAMES


def walls_cycles(profile: Profile, walls: int) -> float:
    return walls * profile.isa.vec_dependent_cycles


def scalar_cycles(profile: Profile, accesses: float) -> float:
    return accesses * profile.isa.scalar_access_cycles


def op_cycles(op: Op, profile: Profile, units: int, cls: str, class_cycles) -> float:
    """Cycles on each of `units` Vector units that split the op; `cls` is its class in isa.py (its first
    instruction's: a broadcast operand is a stride here, Brcb'd before) and `class_cycles(cls)` isa.py's
    cost of a repeat of a class."""
    isa = profile.isa
    walls = walls_cycles(profile, op.walls or 0)
    if op.kind == FLAG:
        return profile.sync.latency_us * profile.chip.clock_ghz * 1e3 + walls
    if op.kind == SCALAR:          # each unit runs its matrices' loops (op.elements matrices in all)
        return scalar_cycles(profile, op.steps * max(1.0, op.elements / units)) + walls
    per_unit = op.elements / units
    if op.name == UB_COPY:
        return max(isa.vec_min_cycles, per_unit * 4 / isa.ub_ub_bytes_per_cycle) + walls
    itemsize = op.operand_bytes if op.name == CAST else 4
    repeats = op.repeats or math.ceil(per_unit * itemsize / isa.vec_repeat_bytes - 1e-9)
    cls = "unary" if op.name in (BRCB, CAST, DUP) else cls
    return max(isa.vec_min_cycles, class_cycles(cls) * repeats) + walls
