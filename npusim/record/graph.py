"""The recorded per-chunk phase graph: what one chunk of one sequence does, in program order.

A PhaseGraph is recorded once per shape (see program.py) and replayed by the event model for every
chunk and head, so it holds costs per (sequence, chunk) and no tensor data.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from npusim.record.ops import Op

VEC, CUBE = "vec", "cube"
UNIT_LABEL = {VEC: "Vec", CUBE: "Cube"}
CIRCLED = "①②③④⑤⑥⑦⑧⑨⑩⑪⑫⑬⑭⑮⑯⑰⑱⑲⑳"


def sync_label(number: int) -> str:
    return CIRCLED[number - 1] if 1 <= number <= len(CIRCLED) else f"({number})"


@dataclass(frozen=True)
class Local:
    """A buffer a phase holds on its unit (UB per Vector phase, L1 per Cube phase), for capacity.py.
    Views share their tensor's buffer. Steps count the phase's ops from 0."""
    name: str
    shape: tuple[int, ...]
    nbytes: int                   # on the unit: inputs at their stored type, results in fp32
    source: str                   # "gm" (loaded from GM), "workspace", "state", "kept", "made"
    first: int                    # step where it is loaded or made
    last: int                     # step of its last use (the phase's step count if it outlives the phase)
    whole: bool = False           # needed whole by every tile (a matmul's left operand, a solve's matrix,
                                  # a reduction along the last axis); the rest split along their last axis
    stored: bool = False          # a result the phase stores to GM (O), not a hand-off or the state
    segments: int = 0             # GM row runs one DataCopy of it moves: 1 for rows laid out one after the
                                  # other, its rows for a tile of strided rows; 0: its rows (token-major GM)


@dataclass(frozen=True)
class Phase:
    name: str
    unit: str                     # VEC or CUBE
    ops: tuple[Op, ...]
    reads: tuple[str, ...]        # named tensors made elsewhere (other phases, GM inputs, the state)
    gm_read_bytes: int            # GM inputs this phase loads
    gm_write_bytes: int           # outputs this phase stores to GM
    locals: tuple[Local, ...] = field(default=(), compare=False)   # what it holds on its unit
    steps: int = 0                # ops recorded (compute, views and constants alike)
    group: int = 1                # value heads of the work item sharing one q/k head (grouped heads): the
                                  # leading axis of every buffer made from v, g, beta or the state

    @property
    def macs(self) -> int:
        return sum(op.macs for op in self.ops)

    @property
    def element_ops(self) -> int:
        return sum(op.elements for op in self.ops)

    @property
    def label(self) -> str:
        return f"{self.name} ({UNIT_LABEL[self.unit]})"


@dataclass(frozen=True)
class Payload:
    """One tensor a sync carries through the GM workspace."""
    name: str
    shape: tuple[int, ...]
    dtype: str                    # transfer type: the tensor is rounded to it
    nbytes: int
    placement: str                # "slot" (transient, ping/pong) or "resident"
    producer: str                 # phase name, or "GM" for an input
    redundant: str | None = None  # why the consumer already has it
    unused: bool = False          # no phase on the consumer's unit reads it


@dataclass(frozen=True)
class Sync:
    number: int                   # 1-based, in program order: ① ② ...
    producer: str                 # phase before the sync
    consumer: str                 # phase after it
    direction: str                # "vec->cube" or "cube->vec"
    payload: tuple[Payload, ...]
    next_item: bool = False       # a flag back into the core's next work item: `consumer` is that item's
                                  # phase (a depth-1 ring: Catlass's WithReverse flag at depth 1)

    @property
    def name(self) -> str:
        return f"sync{self.number}"

    @property
    def label(self) -> str:
        return sync_label(self.number)

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.payload)

    @property
    def redundant_bytes(self) -> int:
        return sum(p.nbytes for p in self.payload if p.redundant)

    @property
    def unused_bytes(self) -> int:
        return sum(p.nbytes for p in self.payload if p.unused and not p.redundant)

    @property
    def tensors(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.payload)


@dataclass(frozen=True)
class StateSpec:
    """The tensor handed from one chunk to the next (the KDA state S)."""
    input_name: str               # name the program reads it by (S_prev)
    output_name: str              # name the program returns it as (S_new)
    shape: tuple[int, ...]
    dtype: str                    # type it is kept in between chunks
    nbytes: int
    producer: str                 # phase that makes the next chunk's state
    readers: tuple[str, ...]      # phases that read it, in program order


@dataclass(frozen=True)
class TensorMeta:
    name: str
    shape: tuple[int, ...]
    nbytes: int                   # at its storage type
    origin: str                   # "gm", "state", VEC or CUBE
    producer: str                 # phase name, "GM" or "state"
    placement: str                # "gm", "slot", "resident", "kept" (unit-local across phases), "local"
    readers: tuple[str, ...]      # phases (other than the producer) that read it


@dataclass(frozen=True)
class PhaseGraph:
    program: str
    steps: tuple[Phase | Sync, ...]     # program order
    state: StateSpec | None
    tensors: dict[str, TensorMeta] = field(hash=False)
    kept: tuple[str, ...] = ()          # tensors declared resident on their unit (npu.keep)
    shapes: dict[str, int] = field(default_factory=dict, hash=False)   # e.g. chunk_size, d_k, d_v
    transfer_dtype: str = "fp32"

    @cached_property
    def phases(self) -> tuple[Phase, ...]:
        return tuple(s for s in self.steps if isinstance(s, Phase))

    @cached_property
    def syncs(self) -> tuple[Sync, ...]:
        return tuple(s for s in self.steps if isinstance(s, Sync))

    def phase(self, name: str) -> Phase:
        for p in self.phases:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def sync_bytes(self) -> list[int]:
        return [s.nbytes for s in self.syncs]

    @property
    def redundant_bytes(self) -> int:
        return sum(s.redundant_bytes for s in self.syncs)

    @property
    def unused_bytes(self) -> int:
        return sum(s.unused_bytes for s in self.syncs)

    @property
    def macs(self) -> int:
        return sum(p.macs for p in self.phases)

    def macs_by_phase(self) -> dict[str, int]:
        return {p.name: p.macs for p in self.phases if p.unit == CUBE}

    def element_ops_by_phase(self) -> dict[str, int]:
        return {p.name: p.element_ops for p in self.phases if p.unit == VEC}

    def describe(self) -> str:
        """The graph as text, one line per phase and sync."""
        lines = [f"phase graph {self.program}:"]
        for step in self.steps:
            if isinstance(step, Phase):
                work = f"{step.macs:,} MACs" if step.unit == CUBE else f"{step.element_ops:,} element ops"
                lines.append(f"  Phase {step.label}: {len(step.ops)} ops, {work}")
            else:
                items = ", ".join(p.name + ("*" if p.redundant else "") for p in step.payload)
                into = f" (into the next item's Phase {step.consumer})" if step.next_item else ""
                lines.append(f"    sync {step.label} {step.direction}: {items} = {step.nbytes / 1024:g} KiB{into}")
        if self.state:
            lines.append(f"  state {self.state.output_name} -> {self.state.input_name}: "
                         f"{self.state.nbytes / 1024:g} KiB from Phase {self.state.producer}")
        return "\n".join(lines)
