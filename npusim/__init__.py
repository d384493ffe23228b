"""npusim: a discrete-event model of an Ascend AI core's Cube and Vector units, the GM workspace between
them and the cross-core syncs, that executes phase programs with real tensor math.

    profile.py    hardware profiles (TOML)          ops.py        which unit runs an op, and its cost
    program.py    phase programs, the Npu runtime   dataflow.py   where tensors live; hand-off checks
    graph.py      the recorded per-chunk graph      workspace.py  resident region and ping/pong slots
    cost.py       phase and sync durations          template.py   timed per-chunk nodes and edges
    engine.py     the SimPy event model              trace.py      what the model ran
    report.py     syncs, latency, utilisation, bound
"""
from npusim.command import quiet_while_starting

quiet_while_starting()          # a command's Ctrl-C during these imports: one line, exit 130 (npusim/command.py)

from npusim.model.engine import OWN, RIDE, Run, Template, Trace, TraceEvent, build_template, simulate  # noqa: E402
from npusim.errors import DataflowError, NpuSimError, ProfileError, WorkspaceError
from npusim.record.memory import keep_freed_memory
from npusim.record.graph import CUBE, VEC, Payload, Phase, PhaseGraph, StateSpec, Sync
from npusim.record.precision import DTYPES, Precision
from npusim.chip.profile import Profile, load_profile, shipped_profiles
from npusim.record.program import Executor, Nonfinite, Npu, PhaseProgram, phase_program
from npusim.output.report import Report, build_report, run_and_report

__all__ = [
    "CUBE", "VEC", "OWN", "RIDE", "DTYPES",
    "DataflowError", "NpuSimError", "ProfileError", "WorkspaceError",
    "Executor", "Nonfinite", "Npu", "PhaseProgram", "phase_program",
    "Payload", "Phase", "PhaseGraph", "StateSpec", "Sync", "Precision",
    "Profile", "load_profile", "shipped_profiles",
    "Report", "Run", "Template", "Trace", "TraceEvent", "build_report", "build_template", "run_and_report",
    "simulate", "keep_freed_memory",
]
