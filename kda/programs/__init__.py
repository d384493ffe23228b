"""The designs, one file per design. A new design is a new file registered here.

v1.py v2.py v3.py v4.py v6.py  per-chunk phase programs, one fused pass each
v5.py mform.py         designs of several passes (npusim/model/schedule.py): v5's two, the state on the Cube
fla.py                 flash-linear-attention's six-kernel forward as passes
v4_bwd.py v6_bwd.py    the backward of v4, and of v5 and v6
fla_bwd.py             FLA's backward decomposition as passes
in_kernel.py           FLA's in-kernel input options as a Vector phase of a design
user.py                designs from outside the package: a file and a NAME in it, or an entry point of
                       the group `kda.designs`, registered for the process
"""
from npusim.model.schedule import Design, single_pass

from kda.programs import user
from kda.programs.fla import FLA
from kda.programs.mform import MFORM
from kda.programs.v1 import kda_chunk_v1
from kda.programs.v2 import kda_chunk_v2
from kda.programs.v3 import kda_chunk_v3
from kda.programs.v4 import kda_chunk_v4
from kda.programs.v5 import V5
from kda.programs.v6 import kda_chunk_v6

DEFAULT_DESIGN = "v6"       # the API's and the command line's: every exponent <= 0, so finite on every gate family
PROGRAMS = {p.name: p for p in (kda_chunk_v1, kda_chunk_v2, kda_chunk_v3, kda_chunk_v4, kda_chunk_v6)}
DESIGNS: dict[str, Design] = {**{name: single_pass(p) for name, p in PROGRAMS.items()}, FLA.name: FLA, V5.name: V5,
                               MFORM.name: MFORM}


def resolve(version: str) -> str:
    """The name a design runs under: a built-in name as it is; a file's `path.py:NAME`, an installed
    package's entry point (group kda.designs) or a name registered before, loaded and checked once
    (user.py); ValueError (one line) for anything else."""
    if isinstance(version, str) and version in DESIGNS:
        return version
    name = user.resolve(version, DESIGNS) if isinstance(version, str) else None
    if name is None:
        raise ValueError(f"unknown version {version!r:.80}: choose from {', '.join(names())}, or a design in a "
                         f"file, path/to/file.py:NAME")
    return name


def names() -> list[str]:
    """The built-in designs' names, then those registered in this process."""
    return [*DESIGNS, *user.REGISTERED]


def get_program(version: str):
    """The per-chunk program of a one-pass design (v1-v4, v6, or one registered from outside)."""
    name = resolve(version)
    program = PROGRAMS.get(name) or user.PROGRAMS.get(name)
    if program is None:
        raise ValueError(f"{version} is a design of {len(get_design(name).passes)} passes, not one "
                         f"per-chunk program")
    return program


def get_design(version: str) -> Design:
    name = resolve(version)
    return DESIGNS.get(name) or user.REGISTERED[name]


# Backward designs (training): a design name -> {"recompute": Design, "store": Design}. Each is a
# design of passes; a reverse pass walks the chunks from the last to the first (kda/driver/backward.py).
from kda.programs.fla_bwd import FLA_BACKWARD  # noqa: E402
from kda.programs.v4_bwd import V4_BACKWARD  # noqa: E402
from kda.programs.v6_bwd import V6_BACKWARD  # noqa: E402

# v5 computes v6's forward math (in two passes): v6's backward is its backward too.
BACKWARD: dict[str, dict[str, Design]] = {"v4": V4_BACKWARD, "v6": V6_BACKWARD, "v5": V6_BACKWARD, "fla": FLA_BACKWARD}
STATES = ("recompute", "store")


def get_backward_design(version: str, states: str = "recompute") -> Design:
    """The backward design of a forward design; ValueError (one line) for a design without one."""
    if version not in BACKWARD:
        known = f"unknown design {version!r}" if version not in names() else f"design {version!r} has no backward program"
        raise ValueError(f"{known}: backward runs for {', '.join(BACKWARD)}")
    if states not in STATES:
        raise ValueError(f"states must be one of {', '.join(STATES)}, got {states!r}")
    return BACKWARD[version][states]
