"""Decode designs: one file per program, each laid over the chip in one or more ways (kda/decode/design.py).

    step       Vector only, the recurrent form; a block per AI core, its two AIVs split each state's value
               columns, two states in flight (the next one loads while this one computes)
    step_aiv   the same program on a Vector-only launch: every AIV a worker with whole states
    chunked    Cube + Vector: the T tokens of an MTP step as one chunk (matmuls on the Cube); up to 16 tokens
               (its pairwise decays [T, T, K] sit in UB whole)

    recurrent.py  the recurrent step (step, step_aiv)
    chunked.py    the chunked MTP step
    steps.py      the Vector work they share (TCOLSUM, row broadcasts, FLA's in-kernel options)
"""
from kda.decode.design import AIVS, CORES, DOUBLE, DecodeDesign
from kda.decode.programs.chunked import decode_chunked
from kda.decode.programs.recurrent import decode_recurrent

STEP = DecodeDesign("step", decode_recurrent, "Vector only; a block per AI core, its two AIVs split each state's "
                    "value columns; two states in flight", workers=CORES, loop=DOUBLE)
STEP_AIV = DecodeDesign("step_aiv", decode_recurrent, "Vector only on a Vector-only launch: every AIV a worker "
                        "with whole states; two in flight where UB holds them", workers=AIVS, loop=DOUBLE)
CHUNKED = DecodeDesign("chunked", decode_chunked, "Cube + Vector: the step's T tokens as one chunk (MTP); the "
                       "state read by both units", workers=CORES, buffers=None, tokens=(1, 16))

DESIGNS = {d.name: d for d in (STEP, STEP_AIV, CHUNKED)}
