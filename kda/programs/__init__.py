"""The phase programs, one file per design. A new design is a new file registered here."""
from .v1 import kda_chunk_v1
from .v2 import kda_chunk_v2
from .v3 import kda_chunk_v3
from .v4 import kda_chunk_v4

PROGRAMS = {p.name: p for p in (kda_chunk_v1, kda_chunk_v2, kda_chunk_v3, kda_chunk_v4)}


def get_program(version: str):
    if version not in PROGRAMS:
        raise ValueError(f"unknown version {version!r}: choose from {', '.join(PROGRAMS)}")
    return PROGRAMS[version]
