"""What leaves a phase for later ones, for the data-flow checker (dataflow.py): hand-offs to the other unit
(`npu.sync`, from the last phase or an earlier one), tensors kept on their unit (`npu.keep`), tensors stored
to GM and loaded again (`npu.spill`), parts of GM tensors loaded as one DataCopy each (`npu.load`), and a
Cube-only state that goes through GM between chunks.

A phase loads a GM tensor (an input or a spilled one) whole on its first use, or only a part of it
(`npu.load(t, index)`: one DataCopy of that part; a part narrower than the tensor's rows is a tile of
strided rows). A program whose inputs are laid out head by head (`gm_layout="head-major"`, as BNSD/NTD)
loads a whole tile's rows as one contiguous run; otherwise a tile's rows are strided (FLA's [B, T, H, D]).
"""
from __future__ import annotations

from typing import Callable

import torch

from npusim.errors import DataflowError
from npusim.record.graph import CUBE, UNIT_LABEL, VEC, Payload, StateSpec, sync_label
from npusim.record.precision import Precision, itemsize
from npusim.record.records import GM, STATE, Info, PhaseRec, SyncRec


class HandOffs:
    """The Checker's hand-off events (a mixin: the Checker holds the state they read and change)."""

    # the Checker's state and methods these events use (dataflow.Checker sets and defines them)
    precision: Precision
    resident: set[str]
    head_major: bool
    info: dict[int, Info]
    steps: list[PhaseRec | SyncRec]
    phase: PhaseRec | None
    last_phase: PhaseRec | None
    pending: SyncRec | None
    kept: list[str]
    escaped: set[int]
    spilled: set[tuple[str, int]]
    _lookup: Callable[[torch.Tensor, str], Info]
    _label: Callable[[Info], str]
    _track: Callable[[torch.Tensor, Info], None]
    _use: Callable[[Info], None]
    read: Callable[[torch.Tensor], None]

    # ----- parts of GM tensors, and tensors through GM -------------------------------------------
    def load(self, view: torch.Tensor, base: torch.Tensor, strided: bool | None = None) -> None:
        """The current phase loads `view`, a part of the GM tensor `base` (an input or a spilled tensor), as
        one DataCopy of its own: a part narrower than base's rows is a tile of strided rows (`strided`: say
        so where the kernel keeps base inside a wider matrix)."""
        phase = self.phase
        if phase is None:
            raise DataflowError("npu.load runs outside any phase: a phase loads what it uses")
        info = self._lookup(base, f"npu.load in Phase {phase.name}")
        if not (info.origin in (GM, STATE) or info.spilled) or (info.origin == GM and info.name is None):
            raise DataflowError(f"npu.load in Phase {phase.name}: {self._label(info)} is not in GM (an input "
                                f"or a tensor stored with npu.spill)")
        narrower = view.dim() >= 2 and view.shape[-1] < base.shape[-1] if strided is None else strided
        rows = view.shape[-2] if view.dim() >= 2 else 1
        part = Info(f"{info.name}[part]" if info.name else None, info.origin, info.producer, info.storage_bytes,
                     tuple(view.shape), view.numel(), spilled=info.spilled,
                     segments=rows if (narrower or not (self.head_major or info.spilled)) else 1)
        self._track(view, part)
        self.read(view)
        self._use(part)

    def spill(self, tensors: tuple[torch.Tensor, ...]) -> None:
        """After the phase that made them: that phase stores `tensors` to GM (in their stored type) and any
        later phase, of either unit, loads them from there."""
        if self.phase is not None:
            raise DataflowError(f"npu.spill is inside Phase {self.phase.name}: call it after the phase that "
                                f"makes the tensors, as npu.keep")
        for t in tensors:
            info = self._lookup(t, "npu.spill")
            if info.origin not in (VEC, CUBE):
                raise DataflowError(f"npu.spill({self._label(info)}): only tensors made in a phase go to GM")
            if info.name is None:
                raise DataflowError(f"npu.spill of an unnamed {list(info.shape)} tensor: bind it to a variable")
            if info.spilled:
                continue
            rec = next(s for s in self.steps if isinstance(s, PhaseRec) and s.name == info.producer)
            info.spilled = True
            info.storage_bytes = itemsize(self.precision.of(info.name))
            self.spilled.add((rec.name, info.buf))
            self.escaped.add(info.buf)
            rec.gm_write_bytes += info.numel * info.storage_bytes

    # ----- hand-offs ----------------------------------------------------------------------------
    def sync(self, tensors: tuple[torch.Tensor, ...], after: str | None = None, next_item: bool = False) -> SyncRec:
        """A hand-off from the last phase (or from the earlier phase `after`, whose unit flags the next phase
        while the other unit went on) to the next phase; `next_item`: a flag with no payload into the core's
        next work item, whose first phase on the other unit waits for it."""
        number = sum(isinstance(s, SyncRec) for s in self.steps) + 1
        label = sync_label(number)
        if self.phase is not None:
            raise DataflowError(f"sync {label} is inside Phase {self.phase.name}: syncs go between phases")
        if self.pending is not None:
            raise DataflowError(f"sync {label} follows sync {sync_label(self.pending.number)} with no phase "
                                f"between: put both payloads in one sync")
        if self.last_phase is None:
            raise DataflowError(f"sync {label} comes before any phase: a sync hands over what a phase made")
        producer: PhaseRec | None = self.last_phase
        if after is not None:
            producer = next((s for s in self.steps if isinstance(s, PhaseRec) and s.name == after), None)
        if producer is None:
            raise DataflowError(f"sync {label} comes after Phase {after}, which no phase of the program is")
        direction = f"{producer.unit}->{CUBE if producer.unit == VEC else VEC}"
        if next_item:
            return self._flag_into_next_item(number, producer, tensors)
        payload: list[tuple[Info, Payload]] = []
        seen: set[int] = set()
        for t in tensors:
            if not isinstance(t, torch.Tensor):
                raise DataflowError(f"sync {label} carries {type(t).__name__}, not a tensor")
            info = self._lookup(t, f"sync {label}")
            if id(t) in seen:
                raise DataflowError(f"sync {label} carries {self._label(info)} twice")
            seen.add(id(t))
            if info.name is None:
                raise DataflowError(f"sync {label} carries an unnamed {list(info.shape)} tensor: bind it to a "
                                    f"variable inside its phase")
            dtype = self.precision.of(info.name)
            nbytes = info.numel * itemsize(dtype)
            redundant = None
            if info.origin == GM:
                redundant = "already in GM (an input)"
            elif info.origin == STATE:
                redundant = "the state is already in the workspace"
            elif info.synced_in is not None:
                redundant = f"already carried by sync {sync_label(info.synced_in)}"
            elif info.origin != producer.unit:
                raise DataflowError(f"sync {label} goes {direction} but carries {info.name}, made on "
                                    f"{UNIT_LABEL[info.origin]} by Phase {info.producer}")
            placement = "resident" if info.name in self.resident else "slot"
            self.escaped.add(info.buf)
            if redundant is None:
                info.synced_in = number
                info.storage_bytes = itemsize(dtype)
            payload.append((info, Payload(info.name, info.shape, dtype, nbytes, placement,
                                          "GM" if info.origin == GM else info.producer, redundant)))
        rec = SyncRec(number, producer, payload)
        self.steps.append(rec)
        self.pending = rec
        return rec

    def _flag_into_next_item(self, number: int, producer: PhaseRec, tensors: tuple) -> SyncRec:
        label = sync_label(number)
        if tensors:
            raise DataflowError(f"sync {label} into the next item carries tensors: it is a flag (the next item "
                                f"reads its inputs from GM)")
        unit = CUBE if producer.unit == VEC else VEC
        consumer = next((s for s in self.steps if isinstance(s, PhaseRec) and s.unit == unit), None)
        if consumer is None:
            raise DataflowError(f"sync {label} into the next item: the program has no {UNIT_LABEL[unit]} phase "
                                f"to wait for it")
        rec = SyncRec(number, producer, [], consumer, next_item=True)
        self.steps.append(rec)
        return rec

    def keep(self, tensors: tuple[torch.Tensor, ...]) -> None:
        for t in tensors:
            info = self._lookup(t, "npu.keep")
            if info.origin not in (VEC, CUBE):
                raise DataflowError(f"npu.keep({self._label(info)}): only tensors made in a phase can be kept")
            if info.name is None:
                raise DataflowError(f"npu.keep of an unnamed {list(info.shape)} tensor: bind it to a variable")
            info.kept = True
            self.escaped.add(info.buf)
            if info.name not in self.kept:
                self.kept.append(info.name)

    def _state_through_gm(self, state: StateSpec) -> None:
        """A state made and read on the Cube alone goes L0C -> FixPipe -> GM -> L1 between chunks (A2 has no
        L0C -> L1: asc-devkit's asc_copy_l0c2l1 lists A3 only): its readers load it from GM."""
        for rec in (r for r in self.steps if isinstance(r, PhaseRec) and r.name in state.readers):
            for b in (b for b in rec.bufs.values() if b.source == "state"):
                b.source = "gm"
            rec.gm_read_bytes += state.nbytes
