"""What the AI core's instructions and transfers cost, from measured tables (the profile's [isa] table).

The figures come from msKPP's measured 910B tables (Ascend/mskpp, csrc/prof_data/resource910b.cpp), each
field's source in the profile. The model, per instruction:

  Vector   one recorded op is one instruction on each Vector unit (AIV) that splits the phase, over its
           share of the elements: repeats = ceil(bytes / 256), and
               cycles = max(vec_min, class cycles x repeats) + vec_dependent
           The class: two tensors in (add, mul, select: 2 per repeat), a tensor and a scalar or one tensor
           (adds, muls, casts, copies: 1), exp and ln (2), div and sqrt (4), a row sum (3). An op that
           broadcasts a smaller tensor first expands it (one more pass at 1 per repeat). vec_dependent is the
           wait of an instruction for the one before it (`pipe_barrier(PIPE_V)`), which msKPP does not time.
           An instruction whose repeat count the kernel sets (a mask narrower than a repeat, one row of a
           tile a repeat: Op.repeats) costs that many repeats, however few lanes each one fills.
           A scan along the chunk (cumsum) is one dependent add per row; a forward substitution is one
           dependent multiply, row sum and subtract per row.
  Cube     a matmul moves its operands L1 -> L0A / L0B (MTE1), runs one fractal (16 x 16 x 16) per cycle
           (16-bit operands) and drains its fp32 result through the FixPipe: one after the other with one
           L0 buffer (core.buffer_num = 1, as MegaGDN's gemm_v0), the loads hidden under the MMAD with two.
  Transfer t0 + bytes / rate per DataCopy (MTE2 GM -> L1 or UB, MTE3 UB -> GM), and a cost per row after
           the first when the rows are strided: a GM input or output tile of C rows is one head's chunk in
           FLA's [B, T, H, D] layout, its rows H x D apart (a [C] vector, g or beta, is taken as laid out
           per head, [H, T], as the kernels transpose it first); hand-offs through the workspace are
           contiguous. The FixPipe takes the larger of its minimum and bytes / rate.

A Vector unit computes in fp32: a 16-bit tensor it loads is cast up first, a 16-bit result it stores is
cast down (one unary pass each). A program that declares its barriers records what an AscendC kernel's
source issues instead (barrier walls, row-wise repeats, UB copies, Brcb, scalar loops): issue.py times it.
"""
from __future__ import annotations

import math

from npusim.chip import issue
from npusim.chip.lanes import larger
from npusim.chip.profile import Profile
from npusim.record.ops import MATMUL, REDUCE, SEQUENTIAL, Op

BINARY = set("add sub rsub mul maximum minimum fmax fmin where masked_fill lt le gt ge eq ne logical_and "
             "logical_or addcmul addcdiv lerp tril triu pow".split())
EXP = set("exp exp2 expm1 log log2 log10 log1p".split())
DIV = set("div true_divide floor_divide sqrt".split())
COMPOSITE = {"sigmoid": ("exp", "unary", "div"), "logsigmoid": ("exp", "unary", "exp"),
             "softplus": ("exp", "unary", "exp"), "silu": ("exp", "unary", "div", "binary"),
             "normalize": ("binary", "reduce", "unary", "binary"), "tanh": ("exp", "unary", "div")}


def enabled(profile: Profile) -> bool:
    return profile.isa.enabled >= 0.5


def _class_cycles(profile: Profile, cls: str) -> float:
    isa = profile.isa
    return {"binary": isa.vec_binary_cycles, "unary": isa.vec_unary_cycles, "exp": isa.vec_exp_cycles,
            "div": isa.vec_div_cycles, "reduce": isa.vec_reduce_cycles}[cls]


def instruction_cycles(profile: Profile, cls: str, elements: float, itemsize: float = 4.0, repeats: int = 0) -> float:
    """One Vector instruction of class `cls` over `elements` (on one AIV), with its dependent wait;
    `repeats` > 0: the repeat count the kernel gives it (by its bytes otherwise)."""
    isa = profile.isa
    if not repeats:
        repeats = math.ceil(elements * itemsize / isa.vec_repeat_bytes - 1e-9) if elements > 0 else 0
    issues = max(1, math.ceil(repeats / 255))             # at most 255 repeats per instruction
    return larger(isa.vec_min_cycles * issues, _class_cycles(profile, cls) * repeats) + issues * isa.vec_dependent_cycles


def _classes(op: Op) -> tuple[str, ...]:
    if op.name in COMPOSITE:
        return COMPOSITE[op.name]
    if op.kind == REDUCE:
        return ("reduce",)
    if op.name in EXP:
        return ("exp",)
    if op.name in DIV:
        return ("div",)
    if op.name in BINARY and not op.scalar_operand:
        return ("binary", "unary") if op.broadcast else ("binary",)
    return ("unary",)


def vector_op_cycles(op: Op, profile: Profile, units: int) -> float:
    """Cycles on each of `units` Vector units that split the op."""
    if issue.declared(op):                               # as the kernel's source issues it (issue.py)
        return issue.op_cycles(op, profile, units, _classes(op)[0], lambda cls: _class_cycles(profile, cls))
    if op.elements == 0 and op.steps == 0:
        return 0.0
    per_unit = op.elements / units
    if op.kind == SEQUENTIAL:                            # a forward substitution: three dependent instructions a row
        width = per_unit / max(op.steps, 1)
        return op.steps * (instruction_cycles(profile, "binary", width) + instruction_cycles(profile, "reduce", width)
                           + instruction_cycles(profile, "binary", width))
    if op.name in ("cumsum", "cumprod", "logcumsumexp") and len(op.shape) >= 2:
        rows = op.shape[-2]
        return rows * instruction_cycles(profile, "binary", per_unit / max(rows, 1))
    return sum(instruction_cycles(profile, c, per_unit, repeats=op.repeats) for c in _classes(op))


def cube_op_cycles(op: Op, profile: Profile) -> float:
    """A matmul: MTE1 in, the fractals, the FixPipe out; a batched one (or a tiled phase's share of one,
    op.macs scaled down) as that many matmuls."""
    if op.kind != MATMUL or op.macs == 0:
        return 0.0
    isa = profile.isa
    m, n, k = op.shape
    share = op.macs / (m * n * k)                        # batch elements (fractional for a tile)
    fractals = math.ceil(m / 16) * math.ceil(n / 16) * math.ceil(k / 16) * share
    per_fractal = isa.mmad_fractal_cycles * (profile.cube.macs_per_cycle / profile.cube.fp32_macs_per_cycle
                                             if op.operand_bytes >= 4 else 1.0)
    a_bytes, b_bytes = m * k * op.operand_bytes * share, k * n * op.operand_bytes * share
    mte1 = 2 * isa.mte1_fixed_cycles * share + a_bytes / isa.mte1_l0a_bytes_per_cycle + b_bytes / isa.mte1_l0b_bytes_per_cycle
    fixpipe = fixpipe_cycles(profile, m * n * 4) * share
    mmad = isa.mmad_fixed_cycles * share + fractals * per_fractal
    if profile.core.buffer_num >= 2:                    # two L0A/L0B buffers: the next operands load meanwhile
        return larger(mte1, mmad) + fixpipe
    return mte1 + mmad + fixpipe


def fixpipe_cycles(profile: Profile, nbytes: float) -> float:
    isa = profile.isa
    return larger(isa.fixpipe_min_cycles, nbytes / isa.fixpipe_bytes_per_cycle) if nbytes > 0 else 0.0


def load_cycles(profile: Profile, nbytes: float, to_l1: bool, rows: float = 1) -> float:
    """One MTE2 DataCopy from GM into L1 (Cube) or UB (Vector), of `rows` strided rows."""
    if nbytes <= 0:
        return 0.0
    isa = profile.isa
    bursts = max(rows - 1, 0) * isa.gm_burst_cycles
    if to_l1:
        return isa.gm_l1_fixed_cycles + nbytes / isa.gm_l1_bytes_per_cycle + bursts
    return isa.gm_ub_fixed_cycles + nbytes / isa.gm_ub_bytes_per_cycle + bursts


def store_cycles(profile: Profile, nbytes: float, from_l0c: bool, rows: float = 1) -> float:
    """One store to GM: MTE3 from UB (Vector), of `rows` strided rows, or the FixPipe from L0C (Cube,
    nbytes as stored)."""
    if nbytes <= 0:
        return 0.0
    if from_l0c:
        return fixpipe_cycles(profile, nbytes)
    isa = profile.isa
    return isa.ub_gm_fixed_cycles + nbytes / isa.ub_gm_bytes_per_cycle + max(rows - 1, 0) * isa.gm_burst_cycles


def cast_cycles(profile: Profile, elements: float) -> float:
    """A 16-bit tensor cast to or from fp32 on one Vector unit (one unary pass over its 16-bit bytes)."""
    return instruction_cycles(profile, "unary", elements, 2.0) if elements > 0 else 0.0
