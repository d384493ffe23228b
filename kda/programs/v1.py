"""v1 of the design document: v2's phases with the defect v2 fixed (section 9.2, "状态衰减 ❌"): the state
decays along the value axis, S_prev * gamma_C, instead of the key axis, Diag(gamma_C) S_prev.

With a zero initial state the first chunk leaves a right state and the second chunk reads it, so outputs
go wrong from the third chunk on (from the second with a nonzero initial state). The defect only shows
when the state survives a chunk: with the document's gates it decays by ~e^-50 per 64-token chunk along
either axis, and v1 passes (see kda/driver/inputs.py, gate family "slow").
"""
from functools import partial

from npusim import phase_program

from kda.programs.v2 import kda_chunk_v2_body

kda_chunk_v1 = phase_program(
    "v1", returns=("O", "S_new"), state=("S_prev", "S_new"), resident=("K_div", "Q_scaled"),
    known_defect="v1's known defect: the state decays along the value axis instead of the key axis, "
                 "so the state leaving every chunk after the first is wrong",
)(partial(kda_chunk_v2_body, state_decay_axis="value"))
