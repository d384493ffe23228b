"""Kimi Delta Attention as phase programs on the simulated Ascend NPU (npusim).

    chunk_kda(q, k, v, g, beta, ..., version="v6")  -> (o, final_state)   fla-core's whole signature and layout
                                                                          (kda/driver/chunk_kda.py: grouped
                                                                          value heads, in-kernel l2norm, gate,
                                                                          beta sigmoid, ...); differentiable
                                                                          (kda/driver/autograd.py)
    recurrent_kda(...)                              -> (o, final_state)   the ground truth
    fused_recurrent_kda(q, k, v, g, beta, ...)      -> (o, final_state)   a decode step (FLA's shape) by a
                                                                          decode design (kda/decode/)
    simulate(q, k, v, g, beta, ..., version="v6")   -> Simulated          the same call timed on a simulated
                                                                          chip: latency, bound, hand-offs,
                                                                          passes, kda.run's JSON (kda/api/)
    python -m kda.run --chunks 16                                         the command line (v6 unless --version)

A design is a built-in name (kda/programs/) or one of yours, `path/to/file.py:NAME` (a @phase_program or a
Design of passes), or an installed package's entry point in the group `kda.designs`, wherever a name is
accepted (kda/programs/user.py).

The folders, in layer order (tests/test_layering.py keeps imports going one way):

programs/     the designs as phase programs, one file each
reference/    the ground truth every design is held to
driver/       the numerics driver: chunk_kda, execute, the backward and autograd
kernels/      the real kernels' timed shapes and their models
decode/       the one-token decode step: its designs, the measured decode kernels, the decode study
settings/     a run's settings, built and checked once
studies/      what one run, or many, says about a design
api/          the Python calls built on the studies: simulate
views/        tables, plots and traces of the results
cli/          the command lines
sweep/        design-space sweeps
schema/       the run JSON's schema; validation/: the measured Ascend timings (package data)
run.py validate.py attribution.py stability.py   python -m kda.run (.validate, .attribution, .stability)
"""
import npusim.command  # noqa: F401  (first: a command's Ctrl-C while the modules import is one line, exit 130)

from kda.api.simulate import Simulated, simulate
from kda.decode.api import fused_recurrent_kda
from kda.driver.checks import KdaInputError
from kda.driver.chunk_kda import chunk_kda, recurrent_kda
from kda.driver.execute import Execution, execute
from kda.programs import PROGRAMS, get_program

__all__ = ["Execution", "KdaInputError", "PROGRAMS", "Simulated", "chunk_kda", "execute", "fused_recurrent_kda",
           "get_program", "recurrent_kda", "simulate"]
