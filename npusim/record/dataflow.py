"""The data-flow checker: knows where every tensor lives and turns one recorded chunk into a PhaseGraph.

Where a tensor lives decides who may read it:
  gm        a GM input (Q, K, V, ...): any phase may load it
  state     the state handed from the previous chunk: any phase may read it
  local     made in a phase: that phase only
  kept      made in a phase and declared resident on its unit (`npu.keep`): later phases of that unit
  workspace carried by a sync: both units, from the sync's consumer phase on
A phase that reads a tensor made on the other unit that no sync carried is an error naming the phase,
the tensor and its producer. Hand-offs are never typed in: the sync list is what the data flow needs.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from npusim.errors import DataflowError
from npusim.record.graph import CUBE, UNIT_LABEL, VEC, Local, Payload, Phase, PhaseGraph, StateSpec, Sync, TensorMeta, sync_label
from npusim.record.ops import CONST, HOST, LAYOUT, MATMUL, REDUCE, SEQUENTIAL, UNIT_OF, Op, cost_of
from npusim.record.precision import Precision, itemsize

GM, STATE = "gm", "state"
SAME_TYPE_CASTS = ("to", "float", "double", "half", "bfloat16", "type_as")   # may return their input unchanged


@dataclass
class _Info:
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


@dataclass
class _Buf:
    """A buffer a phase holds on its unit (graph.Local, once the names are known)."""
    infos: list[_Info]
    nbytes: int
    source: str
    first: int
    last: int
    whole: bool = False           # every tile needs all of it (a matmul's left operand, a solve's matrix)


@dataclass
class _PhaseRec:
    name: str
    unit: str
    ops: list[Op] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    gm_read_bytes: int = 0
    gm_write_bytes: int = 0
    step: int = 0                                        # ops seen so far
    bufs: dict[int, _Buf] = field(default_factory=dict)  # buffer key -> what the phase holds


@dataclass
class _SyncRec:
    number: int
    producer: _PhaseRec
    payload: list[tuple[_Info, Payload]]
    consumer: _PhaseRec | None = None


class Checker:
    """Receives the events of one recorded chunk (phases, ops, syncs) and checks them as they happen."""

    def __init__(self, program_name: str, precision: Precision, resident: tuple[str, ...] = ()):
        self.program = program_name
        self.precision = precision
        self.resident = set(resident)
        self.info: dict[int, _Info] = {}
        self._alive: list[torch.Tensor] = []      # keeps ids unique while the chunk is recorded
        self.steps: list[_PhaseRec | _SyncRec] = []
        self.phase: _PhaseRec | None = None
        self.last_phase: _PhaseRec | None = None
        self.pending: _SyncRec | None = None
        self.kept: list[str] = []
        self.state_name: str | None = None
        self.escaped: set[int] = set()            # buffers used after the phase that made them
        self.stored: set[int] = set()             # buffers of the results stored to GM (not the state)

    # ----- registration -------------------------------------------------------------------------
    def register_input(self, name: str, tensor: torch.Tensor, storage: str, is_state: bool = False) -> None:
        origin = STATE if is_state else GM
        if is_state:
            self.state_name = name
        self._track(tensor, _Info(name, origin, "state" if is_state else "GM", itemsize(storage),
                                  tuple(tensor.shape), tensor.numel()))

    def _track(self, tensor: torch.Tensor, info: _Info) -> None:
        info.buf = info.buf or id(tensor)
        self.info[id(tensor)] = info
        self._alive.append(tensor)

    # ----- what a phase holds on its unit (capacity.py) ----------------------------------------
    def _use(self, info: _Info) -> None:
        """The current op of the current phase uses `info`: it is loaded (first use) or stays alive."""
        phase = self.phase
        buf = phase.bufs.get(info.buf)
        if buf is None:
            if info.origin == GM and info.name is None:      # an unnamed constant (a mask): not counted
                return
            source = ("made" if info.producer == phase.name else "gm" if info.origin == GM else
                      "state" if info.origin == STATE else "kept" if info.origin == phase.unit and info.kept
                      else "workspace")
            size = 4 if source == "made" else info.storage_bytes
            phase.bufs[info.buf] = _Buf([info], info.numel * size, source, phase.step, phase.step)
            return
        buf.last = phase.step
        if info not in buf.infos:
            buf.infos.append(info)

    def _whole(self, info: _Info) -> None:
        buf = self.phase.bufs.get(info.buf)
        if buf is not None:
            buf.whole = True

    def _made(self, info: _Info, alias: _Info | None) -> None:
        """The current op made `info`: a view shares `alias`'s buffer, anything else gets its own (fp32)."""
        phase = self.phase
        if alias is not None and alias.buf in phase.bufs:
            info.buf = alias.buf
            self._use(info)
            return
        phase.bufs[info.buf] = _Buf([info], info.numel * 4, "made", phase.step, phase.step)

    def _lookup(self, tensor: torch.Tensor, what: str) -> _Info:
        info = self.info.get(id(tensor))
        if info is None:
            raise DataflowError(f"{what} uses a tensor the runtime does not know: phase programs may only "
                                f"use their inputs and tensors made inside phases")
        return info

    @staticmethod
    def _label(info: _Info) -> str:
        return info.name or f"an unnamed {list(info.shape)} tensor"

    # ----- phases -------------------------------------------------------------------------------
    def begin_phase(self, name: str, unit: str) -> None:
        if self.phase is not None:
            raise DataflowError(f"Phase {name} opens inside Phase {self.phase.name}: phases do not nest")
        if any(isinstance(s, _PhaseRec) and s.name == name for s in self.steps):
            raise DataflowError(f"Phase {name} appears twice in one chunk: phase names must be unique")
        rec = _PhaseRec(name, unit)
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
                                f"add it to npusim/ops.py or express it with known ops")
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
                self._track(out, _Info(None, GM, "GM", out.element_size(), tuple(out.shape), out.numel()))
            return
        if kind not in (LAYOUT, CONST):
            operand = max((self.info[id(t)].storage_bytes for t in inputs[:2] if id(t) in self.info), default=4)
            phase.ops.append(cost_of(kind, name, inputs, outputs, operand))
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
            info = _Info(None, phase.unit, phase.name, storage, tuple(out.shape), out.numel())
            self._track(out, info)
            alias = self.info.get(id(inputs[0])) if kind == LAYOUT and inputs else None
            self._made(info, alias)
        if kind == REDUCE and inputs and outputs and id(inputs[0]) in self.info and (
                outputs[0].dim() == 0 or outputs[0].shape[-1] != inputs[0].shape[-1]):
            self._whole(self.info[id(inputs[0])])        # reduced along its last axis: not split there
        phase.step += 1

    def sequential(self, name: str, inputs: list[torch.Tensor], output: torch.Tensor, steps: int,
                   elements: int) -> None:
        """A sequential op (forward substitution) issued by the runtime, not by a torch call."""
        phase = self.phase
        if phase is None or phase.unit != VEC:
            where = f"Phase {phase.name} (Cube)" if phase else "outside any phase"
            raise DataflowError(f"{name} is a Vector op but runs {where}")
        for t in inputs:
            self.read(t)
            self._use(self.info[id(t)])
            self._whole(self.info[id(t)])
        phase.ops.append(Op(SEQUENTIAL, name, elements=elements, steps=steps, shape=tuple(output.shape)))
        info = _Info(None, phase.unit, phase.name, itemsize(self.precision.transfer), tuple(output.shape),
                     output.numel())
        self._track(output, info)
        self._made(info, None)
        phase.step += 1

    def read(self, tensor: torch.Tensor) -> None:
        phase = self.phase
        info = self._lookup(tensor, f"Phase {phase.name}")
        if info.producer == phase.name:
            return
        if info.origin == GM and info.name is None:      # an unnamed constant
            return
        if info.origin in (GM, STATE):
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
            if info.origin == GM:
                phase.gm_read_bytes += info.numel * info.storage_bytes

    # ----- hand-offs ----------------------------------------------------------------------------
    def sync(self, tensors: tuple[torch.Tensor, ...]) -> _SyncRec:
        number = sum(isinstance(s, _SyncRec) for s in self.steps) + 1
        label = sync_label(number)
        if self.phase is not None:
            raise DataflowError(f"sync {label} is inside Phase {self.phase.name}: syncs go between phases")
        if self.pending is not None:
            raise DataflowError(f"sync {label} follows sync {sync_label(self.pending.number)} with no phase "
                                f"between: put both payloads in one sync")
        if self.last_phase is None:
            raise DataflowError(f"sync {label} comes before any phase: a sync hands over what a phase made")
        producer = self.last_phase
        direction = f"{producer.unit}->{CUBE if producer.unit == VEC else VEC}"
        payload: list[tuple[_Info, Payload]] = []
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
        rec = _SyncRec(number, producer, payload)
        self.steps.append(rec)
        self.pending = rec
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
        for rec in (r for r in self.steps if isinstance(r, _PhaseRec) and r.name in state.readers):
            for b in (b for b in rec.bufs.values() if b.source == "state"):
                b.source = "gm"
            rec.gm_read_bytes += state.nbytes

    def _locals(self, phase: _PhaseRec) -> tuple[Local, ...]:
        out = []
        for key, b in phase.bufs.items():
            name = next((i.name for i in b.infos if i.name), None) or f"an unnamed {list(b.infos[0].shape)} tensor"
            last = phase.step if (b.source == "made" and key in self.escaped) else b.last
            out.append(Local(name, b.infos[0].shape, b.nbytes, b.source, b.first, last, b.whole,
                             key in self.stored))
        return tuple(out)

    # ----- the graph ----------------------------------------------------------------------------
    def finish(self, returns: dict[str, torch.Tensor], state: tuple[str, str] | None,
               shapes: dict[str, int]) -> PhaseGraph:
        if self.phase is not None:
            raise DataflowError(f"Phase {self.phase.name} is still open at the end of the program")
        if self.pending is not None:
            raise DataflowError(f"sync {sync_label(self.pending.number)} ends the program: no phase consumes it")
        if not any(isinstance(s, _PhaseRec) for s in self.steps):
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
                readers = tuple(self.info[k].readers for k in self.info if self.info[k].origin == STATE)
                readers = readers[0] if readers else ()
                st = self.precision.state_type
                state_spec = StateSpec(state[0], name, info.shape, st, info.numel * itemsize(st),
                                       info.producer, tuple(readers))
            else:
                self.stored.add(info.buf)
                rec = next(s for s in self.steps if isinstance(s, _PhaseRec) and s.name == info.producer)
                rec.gm_write_bytes += info.numel * itemsize(self.precision.of(name))

        units = {p.name: p.unit for p in self.steps if isinstance(p, _PhaseRec)}
        if state_spec is not None and units[state_spec.producer] == CUBE and all(
                units[r] == CUBE for r in state_spec.readers):
            self._state_through_gm(state_spec)
        for s in self.steps:         # payloads no phase on the consumer's unit reads
            if isinstance(s, _SyncRec):
                unit = s.consumer.unit
                s.payload = [(i, p if any(units[r] == unit for r in i.readers) else replace(p, unused=True))
                             for i, p in s.payload]

        steps: list[Phase | Sync] = []
        for s in self.steps:
            if isinstance(s, _PhaseRec):
                steps.append(Phase(s.name, s.unit, tuple(s.ops), tuple(s.reads), s.gm_read_bytes, s.gm_write_bytes,
                                   self._locals(s), s.step, int(shapes.get("group", 1))))
            else:
                steps.append(Sync(s.number, s.producer.name, s.consumer.name,
                                  f"{s.producer.unit}->{s.consumer.unit}", tuple(p for _, p in s.payload)))
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

