"""What the data-flow checker (dataflow.py) records of one chunk: each tensor it knows (where it lives, who made
and read it, the buffer it lives in), the buffers a phase holds on its unit, the phases and the syncs."""
from __future__ import annotations

from dataclasses import dataclass, field

from npusim.errors import DataflowError
from npusim.record.graph import Payload, sync_label
from npusim.record.ops import Op

GM, STATE = "gm", "state"


@dataclass
class Info:
    name: str | None
    origin: str                   # GM, STATE, VEC, CUBE
    producer: str                 # phase name, "GM" or "state"
    storage_bytes: int            # element size where it lives now
    shape: tuple[int, ...]
    numel: int
    synced_in: int | None = None  # number of the sync that carried it
    kept: bool = False
    readers: list[str] = field(default_factory=list)
    buf: int = 0                  # the buffer it lives in: its own id, or the viewed tensor's buffer
    spilled: bool = False         # stored to GM by its producer phase (npu.spill): later phases load it
    segments: int = 0             # GM row runs of one DataCopy of it (0: its rows; see Local.segments)


@dataclass
class Buf:
    """A buffer a phase holds on its unit (graph.Local, once the names are known)."""
    infos: list[Info]
    nbytes: int
    source: str
    first: int
    last: int
    whole: bool = False           # every tile needs all of it (a matmul's left operand, a solve's matrix)
    segments: int = 0             # GM row runs of its DataCopy (0: its rows)


@dataclass
class PhaseRec:
    name: str
    unit: str
    ops: list[Op] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    gm_read_bytes: int = 0
    gm_write_bytes: int = 0
    step: int = 0                                        # ops seen so far
    bufs: dict[int, Buf] = field(default_factory=dict)  # buffer key -> what the phase holds


@dataclass
class SyncRec:
    number: int
    producer: PhaseRec
    payload: list[tuple[Info, Payload]]
    consumer: PhaseRec | None = None          # set when the next phase opens
    next_item: bool = False                   # a flag into the next work item's phase `consumer`

    @property
    def into(self) -> PhaseRec:
        """The phase the sync hands over to."""
        if self.consumer is None:
            raise DataflowError(f"sync {sync_label(self.number)} ends the program: no phase consumes it")
        return self.consumer
