"""npusim: a discrete-event model of an Ascend AI core's Cube and Vector units, the GM workspace between
them and the cross-core syncs, that executes phase programs with real tensor math.

The folders, in layer order (tests/test_layering.py keeps imports going one way):

record/       a phase program run once with real tensor math, recorded as a per-chunk graph
chip/         the chip's profile numbers, and what a recorded phase costs on them
model/        designs of passes laid out over the cores and replayed in SimPy
output/       reports and traces of what the event model ran
fit/          the model against measurements: the fitted profile and its uncertainty
profiles/     the shipped hardware profiles (TOML, a source for every number)
errors.py     the errors the runtime raises, each one line
command.py    a command's process: Ctrl-C, closed pipes, SIGINT held while workers start
calibrate.py  python -m npusim.calibrate
"""
from npusim.command import quiet_while_starting

quiet_while_starting()          # a command's Ctrl-C during these imports: one line, exit 130 (npusim/command.py)

from npusim.chip.profile import Profile, load_profile, shipped_profiles  # noqa: E402
from npusim.errors import DataflowError, NpuSimError, ProfileError, WorkspaceError  # noqa: E402
from npusim.model.engine import OWN, RIDE, Run, Template, Trace, TraceEvent, build_template, simulate  # noqa: E402
from npusim.output.report import Report, build_report, run_and_report  # noqa: E402
from npusim.record.graph import CUBE, VEC, Payload, Phase, PhaseGraph, StateSpec, Sync  # noqa: E402
from npusim.record.memory import keep_freed_memory  # noqa: E402
from npusim.record.precision import DTYPES, Precision  # noqa: E402
from npusim.record.program import Executor, Nonfinite, Npu, PhaseProgram, phase_program  # noqa: E402

__all__ = [
    "CUBE", "VEC", "OWN", "RIDE", "DTYPES",
    "DataflowError", "NpuSimError", "ProfileError", "WorkspaceError",
    "Executor", "Nonfinite", "Npu", "PhaseProgram", "phase_program",
    "Payload", "Phase", "PhaseGraph", "StateSpec", "Sync", "Precision",
    "Profile", "load_profile", "shipped_profiles",
    "Report", "Run", "Template", "Trace", "TraceEvent", "build_report", "build_template", "run_and_report",
    "simulate", "keep_freed_memory",
]
