"""The data-flow checker: knows where every tensor lives and turns one recorded chunk into a PhaseGraph.

Where a tensor lives decides who may read it:
  gm        a GM input (Q, K, V, ...): any phase may load it
  state     the state handed from the previous chunk: any phase may read it
  local     made in a phase: that phase only
  kept      made in a phase and declared resident on its unit (`npu.keep`): later phases of that unit
  workspace carried by a sync: both units, from the sync's consumer phase on
  spilled  made in a phase and stored to GM by it (`npu.spill`): any later phase loads it from GM again
A phase that reads a tensor made on the other unit that no sync carried is an error naming the phase,
the tensor and its producer. Hand-offs are never typed in: the sync list is what the data flow needs
(handoffs.py: syncs, kept and spilled tensors, parts of GM tensors).
"""
from __future__ import annotations

from dataclasses import replace

import torch

from npusim.errors import DataflowError
from npusim.record.graph import CUBE, UNIT_LABEL, VEC, Local, Phase, PhaseGraph, StateSpec, Sync, TensorMeta, sync_label
from npusim.record.handoffs import HandOffs
from npusim.record.ops import CONST, HOST, LAYOUT, MATMUL, REDUCE, UNIT_OF, Issued, cost_of
from npusim.record.precision import Precision, itemsize
from npusim.record.records import GM, STATE, Buf, Info, PhaseRec, SyncRec

SAME_TYPE_CASTS = ("to", "float", "double", "half", "bfloat16", "type_as")   # may return their input unchanged


class Checker(HandOffs, Issued):
    """Receives the events of one recorded chunk (phases, ops, syncs) and checks them as they happen."""

    def __init__(self, program_name: str, precision: Precision, resident: tuple[str, ...] = (),
                 gm_layout: str = ""):
        self.program = program_name
        self.precision = precision
        self.resident = set(resident)
        self.head_major = gm_layout == "head-major"   # a whole [C, D] tile of an input is one run of rows
        self.repeats = 0                               # > 0: ops recorded now issue this many repeats (npu.repeats)
        self.info: dict[int, Info] = {}
        self._alive: list[torch.Tensor] = []      # keeps ids unique while the chunk is recorded
        self.steps: list[PhaseRec | SyncRec] = []
        self.phase: PhaseRec | None = None
        self.last_phase: PhaseRec | None = None
        self.pending: SyncRec | None = None
        self.kept: list[str] = []
        self.state_name: str | None = None
        self.escaped: set[int] = set()            # buffers used after the phase that made them
        self.stored: set[int] = set()             # buffers of the results stored to GM (not the state)
        self.spilled: set[tuple[str, int]] = set()  # (phase, buffer) stored to a GM workspace (npu.spill)

    # ----- registration -------------------------------------------------------------------------
    def register_input(self, name: str, tensor: torch.Tensor, storage: str, is_state: bool = False) -> None:
        origin = STATE if is_state else GM
        if is_state:
            self.state_name = name
        self._track(tensor, Info(name, origin, "state" if is_state else "GM", itemsize(storage),
                                  tuple(tensor.shape), tensor.numel()))

    def _track(self, tensor: torch.Tensor, info: Info) -> None:
        info.buf = info.buf or id(tensor)
        self.info[id(tensor)] = info
        self._alive.append(tensor)

    # ----- what a phase holds on its unit (capacity.py) ----------------------------------------
    def _open(self) -> PhaseRec:
        """The phase now open: a tensor is used, made or read inside one."""
        if self.phase is None:
            raise DataflowError(f"program {self.program}: a tensor is used outside any phase")
        return self.phase

    def _use(self, info: Info) -> None:
        """The current op of the current phase uses `info`: it is loaded (first use) or stays alive."""
        phase = self._open()
        buf = phase.bufs.get(info.buf)
        if buf is None:
            if info.origin == GM and info.name is None:      # an unnamed constant (a mask): not counted
                return
            spilled = info.spilled and info.producer != phase.name
            source = ("gm" if spilled else "made" if info.producer == phase.name else "gm" if info.origin == GM else
                      "state" if info.origin == STATE else "kept" if info.origin == phase.unit and info.kept
                      else "workspace")
            size = 4 if source == "made" else info.storage_bytes
            segments = info.segments or (1 if source == "gm" and (spilled or self.head_major) else 0)
            phase.bufs[info.buf] = Buf([info], info.numel * size, source, phase.step, phase.step,
                                        segments=segments)
            return
        buf.last = phase.step
        if info not in buf.infos:
            buf.infos.append(info)

    def _whole(self, info: Info) -> None:
        buf = self._open().bufs.get(info.buf)
        if buf is not None:
            buf.whole = True

    def _made(self, info: Info, alias: Info | None) -> None:
        """The current op made `info`: a view shares `alias`'s buffer, anything else gets its own (fp32)."""
        phase = self._open()
        if alias is not None and alias.buf in phase.bufs:
            info.buf = alias.buf
            self._use(info)
            return
        phase.bufs[info.buf] = Buf([info], info.numel * 4, "made", phase.step, phase.step)

    def _lookup(self, tensor: torch.Tensor, what: str) -> Info:
        info = self.info.get(id(tensor))
        if info is None:
            raise DataflowError(f"{what} uses a tensor the runtime does not know: phase programs may only "
                                f"use their inputs and tensors made inside phases")
        return info

    @staticmethod
    def _label(info: Info) -> str:
        return info.name or f"an unnamed {list(info.shape)} tensor"

    # ----- phases -------------------------------------------------------------------------------
    def begin_phase(self, name: str, unit: str) -> None:
        if self.phase is not None:
            raise DataflowError(f"Phase {name} opens inside Phase {self.phase.name}: phases do not nest")
        if any(isinstance(s, PhaseRec) and s.name == name for s in self.steps):
            raise DataflowError(f"Phase {name} appears twice in one chunk: phase names must be unique")
        rec = PhaseRec(name, unit)
        if self.pending is not None:
            sync = self.pending
            if sync.producer.unit == unit:
                raise DataflowError(f"sync {sync_label(sync.number)} goes from Phase {sync.producer.name} to "
                                    f"Phase {name}, both on {UNIT_LABEL[unit]}: a sync hands data to the other unit")
            sync.consumer = rec
            self.pending = None
        self.steps.append(rec)
        self.phase = rec

    def end_phase(self, names: dict[int, str]) -> None:
        """Close the current phase; `names` maps tensor ids to the program's variable names."""
        for tid, name in names.items():
            info = self.info.get(tid)
            if info is not None and info.name is None:
                info.name = name
        self.last_phase, self.phase = self.phase, None

    # ----- ops ----------------------------------------------------------------------------------
    def before_op(self, kind: str | None, name: str, inputs: list[torch.Tensor], func) -> None:
        phase = self.phase
        if kind == HOST:
            where = f"Phase {phase.name}" if phase else "the program"
            raise DataflowError(f"{where} reads a tensor value back to the host ({name}): phase programs "
                                f"must not branch on data, so one recorded chunk stands for all")
        if phase is None:
            if kind == CONST:
                return
            raise DataflowError(f"{name} runs outside any phase: put tensor work inside "
                                f"`with npu.vec(...)` or `with npu.cube(...)`")
        if kind is None:
            raise DataflowError(f"Phase {phase.name} calls {name}, which the cost model does not know: "
                                f"add it to npusim/record/ops.py or express it with known ops")
        if kind in UNIT_OF and UNIT_OF[kind] != phase.unit:
            what = "a matmul" if kind == MATMUL else f"{kind} math ({name})"
            shape = " x ".join(str(list(t.shape)) for t in inputs[:2])
            raise DataflowError(f"Phase {phase.name} is a {UNIT_LABEL[phase.unit]} phase but does {what} on "
                                f"{shape}: {'matmuls run on the Cube unit' if kind == MATMUL else 'element-wise math runs on the Vector unit'}")
        left = inputs[1] if name == "__rmatmul__" and len(inputs) > 1 else inputs[0] if inputs else None
        for t in inputs:
            self.read(t)
            info = self.info.get(id(t))
            if info is not None:
                self._use(info)
                if kind == MATMUL and t is left:
                    self._whole(info)

    def after_op(self, kind: str, name: str, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
        phase = self.phase
        if phase is None:           # a constant made outside phases (a mask): belongs to nobody
            for out in outputs:
                self._track(out, Info(None, GM, "GM", out.element_size(), tuple(out.shape), out.numel()))
            return
        if kind not in (LAYOUT, CONST):
            operand = max((self.info[id(t)].storage_bytes for t in inputs[:2] if id(t) in self.info), default=4)
            op = cost_of(kind, name, inputs, outputs, operand)
            op = replace(op, repeats=self.repeats) if self.repeats and kind != MATMUL else op
            phase.ops.append(self._issued(op))
        # A view keeps the element size of what it views; anything computed is stored in the transfer type.
        storage = (self.info[id(inputs[0])].storage_bytes if kind == LAYOUT and inputs and id(inputs[0]) in self.info
                   else itemsize(self.precision.transfer))
        for out in outputs:
            in_place = name == "__setitem__" or (inputs and out is inputs[0] and name not in SAME_TYPE_CASTS)
            if in_place and kind != LAYOUT and id(out) in self.info:   # x[...] = y, x.mul_(y): x's own buffer
                info = self.info[id(out)]
                if info.producer != phase.name:
                    raise DataflowError(f"Phase {phase.name} writes into {self._label(info)}, made by "
                                        f"{info.producer}: write a new tensor instead")
                self._use(info)
                continue
            info = Info(None, phase.unit, phase.name, storage, tuple(out.shape), out.numel())
            self._track(out, info)
            alias = self.info.get(id(inputs[0])) if kind == LAYOUT and inputs else None
            self._made(info, alias)
        if kind == REDUCE and inputs and outputs and id(inputs[0]) in self.info and (
                outputs[0].dim() == 0 or outputs[0].shape[-1] != inputs[0].shape[-1]):
            self._whole(self.info[id(inputs[0])])        # reduced along its last axis: not split there
        phase.step += 1

    def _result(self, output: torch.Tensor) -> None:
        """`output` is made by the current phase's last op, not by a torch call."""
        info = Info(None, VEC, self.phase.name, itemsize(self.precision.transfer), tuple(output.shape), output.numel())
        self._track(output, info)
        self._made(info, None)
        self.phase.step += 1

    def read(self, tensor: torch.Tensor) -> None:
        phase = self._open()
        info = self._lookup(tensor, f"Phase {phase.name}")
        if info.producer == phase.name:
            return
        if info.origin == GM and info.name is None:      # an unnamed constant
            return
        if info.origin in (GM, STATE) or info.spilled:
            pass
        elif info.origin == phase.unit:
            if not (info.kept or info.synced_in):
                raise DataflowError(
                    f"Phase {phase.name} ({UNIT_LABEL[phase.unit]}) reads {self._label(info)}, made by Phase "
                    f"{info.producer} on the same unit, but it was neither kept there (npu.keep) nor synced to "
                    f"the workspace")
        elif info.synced_in is None:
            raise DataflowError(
                f"missing sync: Phase {phase.name} ({UNIT_LABEL[phase.unit]}) reads {self._label(info)}, made by "
                f"Phase {info.producer} ({UNIT_LABEL[info.origin]}), but no sync carried it")
        if info.origin in (VEC, CUBE):
            self.escaped.add(info.buf)
        if phase.name not in info.readers:
            info.readers.append(phase.name)
            if info.name:
                phase.reads.append(info.name)
            if info.origin == GM or info.spilled:
                phase.gm_read_bytes += info.numel * info.storage_bytes

    def set_repeats(self, repeats: int) -> None:
        self.repeats = repeats

    def _locals(self, phase: PhaseRec) -> tuple[Local, ...]:
        out = []
        for key, b in phase.bufs.items():
            spilled = (phase.name, key) in self.spilled
            name = next((i.name for i in b.infos if i.name), None) or f"an unnamed {list(b.infos[0].shape)} tensor"
            last = phase.step if (b.source == "made" and key in self.escaped) else b.last
            # a result stored to a workspace, or to an output laid out head by head, is one run of rows
            runs = b.segments or (1 if spilled or (key in self.stored and self.head_major) else 0)
            out.append(Local(name, b.infos[0].shape, b.nbytes, b.source, b.first, last, b.whole,
                             key in self.stored or spilled, runs))
        return tuple(out)

    # ----- the graph ----------------------------------------------------------------------------
    def finish(self, returns: dict[str, torch.Tensor], state: tuple[str, str] | None,
               shapes: dict[str, int]) -> PhaseGraph:
        if self.phase is not None:
            raise DataflowError(f"Phase {self.phase.name} is still open at the end of the program")
        if self.pending is not None:
            raise DataflowError(f"sync {sync_label(self.pending.number)} ends the program: no phase consumes it")
        if not any(isinstance(s, PhaseRec) for s in self.steps):
            raise DataflowError(f"program {self.program} has no phases")
        state_spec = None
        for name, tensor in returns.items():
            info = self._lookup(tensor, f"the program's result {name}")
            if info.origin not in (VEC, CUBE):
                raise DataflowError(f"the program returns {name}, which no phase computed")
            self.escaped.add(info.buf)
            if info.name is None:
                info.name = name
            if state is not None and name == state[1]:
                state_readers = [i.readers for i in self.info.values() if i.origin == STATE]
                readers = tuple(state_readers[0]) if state_readers else ()
                st = self.precision.state_type
                state_spec = StateSpec(state[0], name, info.shape, st, info.numel * itemsize(st),
                                       info.producer, tuple(readers))
            elif not info.spilled:                   # a spilled result is stored already
                self.stored.add(info.buf)
                rec = next(s for s in self.steps if isinstance(s, PhaseRec) and s.name == info.producer)
                rec.gm_write_bytes += info.numel * itemsize(self.precision.of(name))

        units = {p.name: p.unit for p in self.steps if isinstance(p, PhaseRec)}
        if state_spec is not None and units[state_spec.producer] == CUBE and all(
                units[r] == CUBE for r in state_spec.readers):
            self._state_through_gm(state_spec)
        for s in self.steps:         # payloads no phase on the consumer's unit reads
            if isinstance(s, SyncRec):
                unit = s.into.unit
                s.payload = [(i, p if any(units[r] == unit for r in i.readers) else replace(p, unused=True))
                             for i, p in s.payload]

        steps: list[Phase | Sync] = []
        for s in self.steps:
            if isinstance(s, PhaseRec):
                steps.append(Phase(s.name, s.unit, tuple(s.ops), tuple(s.reads), s.gm_read_bytes, s.gm_write_bytes,
                                   self._locals(s), s.step, int(shapes.get("group", 1))))
            else:
                steps.append(Sync(s.number, s.producer.name, s.into.name,
                                  f"{s.producer.unit}->{s.into.unit}", tuple(p for _, p in s.payload), s.next_item))
        tensors = {}
        for info in self.info.values():
            if info.name is None or info.name in tensors:
                continue
            if info.origin == GM:
                placement = "gm"
            elif info.origin == STATE:
                placement = "state"
            elif info.synced_in is not None:
                placement = "resident" if info.name in self.resident else "slot"
            else:
                placement = "kept" if info.kept else "local"
            tensors[info.name] = TensorMeta(info.name, info.shape, info.numel * info.storage_bytes, info.origin,
                                            info.producer, placement, tuple(info.readers))
        unknown = self.resident - set(tensors)
        if unknown:
            raise DataflowError(f"the workspace plan makes {sorted(unknown)[0]} resident, but the program has "
                                f"no tensor of that name")
        return PhaseGraph(self.program, tuple(steps), state_spec, tensors, tuple(self.kept), dict(shapes),
                          self.precision.transfer)

