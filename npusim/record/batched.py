"""The fast replay with the chunk-parallel work batched over many chunks: only the state's own chain walks.

A sequential pass's chunk step (the fast step, `Replay.eager_step`) does three kinds of work:
  - what does not depend on the carried state (`Tape.ahead`, npusim/record/hoist.py): in v6's backward Phases A-C,
    R, M and the products of the forward's operands; in v3's forward Phases A-C;
  - the state's chain: the state-dependent calls the next chunk's state is made from (v6's backward: dVp,
    dV, dS_part, dS_prev and their roundings; a forward: W S, V_pseudo, S_delta, S_new);
  - the rest, which depends on the state but feeds no later chunk (a backward's dQ, dK, dg, dbeta; a
    forward's output O).
The first and the last are chunk-parallel once each chunk's incoming state is known. So, per block of `b`
chunks, their inputs stacked on a new dim 0 ([b, N, ...]): the state-independent calls run once for the
whole block (stage A); the chain alone walks the block chunk by chunk, reading stage A's values at [j]
(the walk); then every state-dependent call runs once for the whole block, with each chunk's incoming state
(stage B). A GPU then launches a few kernels per chunk (v6's training: 31 against ~900) and the rest
once per block; on the CPU, whose caches favour a chunk at a time, it is not faster, and not used.

Two tapes are captured: one of a real chunk (N items) for the walk, whose split and chain it finds, and one
at the block's batch on the meta device (no memory, no arithmetic; its factories' `device=` set back to the
inputs' device). They are the same program, so the same calls in the same order, which is checked. Each
call computes on the same values as in the chunk-by-chunk step, and each chunk's slice of a block has the
chunk's own memory layout (the caller hands views of its [N, chunks, ...] tensors, `BlockIO`, else the
chunks are copied into that layout), so the kernels take the same paths: the same bits on the CPU
(tests/kda/test_batched_designs.py; a GPU's libraries may pick other kernels for a larger batch). A value the
walk reads that does not scale with the batch is read whole; any other shape makes the step unbatchable.

The inf/NaN watch: stage B's flag covers the block. The flags are read every `check_every` chunks (the
Replay's: every block on the CPU; elsewhere each read waits for the device); where one is set, the run goes
on from that block's first chunk chunk by chunk on the usual fast path, which names where inf/NaN first
appears (the blocks after it are computed again).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from npusim.record.hoist import Slot, Tape, Untapeable

BLOCK_ITEMS = 2048        # items (chunks x sequences) a block holds at once: memory stays bounded


@dataclass
class BlockIO:
    """How a caller that holds every chunk's inputs in one tensor hands blocks over: `inputs(t0, t1)` gives
    chunks t0..t1-1's inputs stacked on a new dim 0 (views: each chunk then has its own strides), `emit(t0,
    outputs)` takes their outputs stacked the same way."""
    inputs: Callable[[int, int], dict]
    emit: Callable[[int, dict], None]


class ChainTape(Tape):
    """A Tape that also knows the state's chain (`chain`: the state-dependent calls the new state is made
    from), what the chain reads of the rest (`boundary`), which of those it writes (`clobbered`) and
    every slot's shape (`shapes`). `like`: a tape of the same calls captured at another batch whose split
    is taken as it is (a capture on the meta device, which has no memory to tell views apart)."""

    like: "ChainTape | None" = None

    def _split(self) -> None:
        self.shapes = [tuple(v.shape) if isinstance(v, torch.Tensor) else None for v in self.values]
        if self.like is not None:
            position = {id(c): p for p, c in enumerate(self.like.calls)}
            self.ahead = [self.calls[position[id(c)]] for c in self.like.ahead]
            self.after = [self.calls[position[id(c)]] for c in self.like.after]
            self.size, self.values, self.slot = len(self.values), [], {}
            return
        storage = [v.untyped_storage().data_ptr() if isinstance(v, torch.Tensor) else None for v in self.values]
        super()._split()
        self.chain, self.boundary, self.clobbered = [], [], set()
        if self.state is None or not isinstance(self.new_state, Slot):
            return
        slots, mem = {self.new_state.i}, {storage[self.new_state.i]}
        for c in reversed(self.after):
            outs = [i for i in (c.outs or ()) if i is not None]
            if any(i in slots or storage[i] in mem for i in (*outs, *c.writes)):
                self.chain.append(c)
                slots.update(c.reads)
                mem.update(storage[i] for i in c.reads)
        self.chain.reverse()
        made = {i for c in self.chain for i in (c.outs or ()) if i is not None}
        read = {i for c in self.chain for i in c.reads}
        self.boundary = sorted(read - made - {self.state})
        written = {storage[i] for c in self.chain for i in c.writes}
        self.clobbered = {i for i in self.boundary if storage[i] in written}


def _signature(tape: Tape) -> list:
    """The calls, by name and slots: the same at every batch, or the step cannot be batched."""
    return [(c.name, tuple(c.reads), tuple(c.writes), tuple(c.outs or ())) for c in tape.calls]


def _on_device(x, device: torch.device):
    """A recorded constant argument with the meta device replaced by the real one (factories' `device=`)."""
    if isinstance(x, torch.device) and x.type == "meta":
        return device
    if isinstance(x, (tuple, list)) and any(isinstance(y, torch.device) for y in x):
        return type(x)(_on_device(y, device) for y in x)
    return x


class BatchedReplay:
    """Runs chunks 0..chunks-1 by blocks (see the module docstring). `run` returns the final state, or
    (chunk, state) where a block's inf/NaN flag was set: the caller runs on from there chunk by chunk."""

    def __init__(self, replay, inputs_of, state, chunks: int, io: BlockIO | None = None,
                 block_items: int | None = None):
        self.replay, self.inputs_of, self.chunks, self.io = replay, inputs_of, chunks, io
        self.step = step = lambda i, s: replay.eager_step(i, s, True)
        replay.eyes.clear()          # every tape makes its identities (a cached one is not a call)
        self.walk, _ = ChainTape.capture(step, inputs_of(0), state)
        replay.eyes.clear()
        if not self.walk.chain:
            raise Untapeable("the new state is not made from the state")
        self.device = state.device
        self.block = max(1, min(chunks, (block_items or BLOCK_ITEMS) // max(1, state.shape[0])))
        self.tapes: dict[int, tuple] = {}
        for b in sorted({self.block, chunks % self.block} - {0}):          # a whole block, the last one
            self._tape(b, state)

    def _tape(self, b: int, state) -> tuple:
        """The block tape for b chunks, captured on the meta device (no memory, no arithmetic), with, per
        boundary slot, whether the walk reads it row by row; and when ahead values are last read."""
        if b not in self.tapes:
            def meta(x):
                return x.to("meta") if isinstance(x, torch.Tensor) else x
            inputs = {k: meta(v) for k, v in self.inputs_of(0).items()}
            inputs = {k: (v[None].expand(b, *v.shape) if isinstance(v, torch.Tensor) else v)
                      for k, v in inputs.items()}
            walk = self.walk
            class BlockTape(ChainTape):
                like = walk
            try:
                tape, _ = BlockTape.capture(self.step, inputs, meta(state)[None].expand(b, *state.shape))
            except Untapeable:
                raise
            except Exception as err:             # an op without a meta kernel: the step runs unbatched
                raise Untapeable(f"the step cannot be traced on the meta device ({type(err).__name__})")
            finally:
                self.replay.eyes.clear()
            if _signature(tape) != _signature(walk):
                raise Untapeable("the step's calls change with the batch")
            for c in tape.calls:
                c.args = tuple(_on_device(a, self.device) for a in c.args)
                c.kwargs = {k: _on_device(a, self.device) for k, a in c.kwargs.items()}
            rows = []
            for i in walk.boundary:
                one, many = walk.shapes[i], tape.shapes[i]
                if many != one and many != (b, *one):
                    raise Untapeable(f"a value the state's chain reads does not scale with the batch "
                                     f"({list(one)} at one chunk, {list(many)} at {b})")
                rows.append(many != one)
            for r in tape.outputs.values():
                if not isinstance(r, Slot) or tape.shapes[r.i] != (b, *walk.shapes[r.i]):
                    raise Untapeable("an output does not scale with the batch")
            self.tapes[b] = (tape, rows, _last_uses(tape.ahead, tape.after, tape),
                             _last_uses(tape.after, [], tape))
        return self.tapes[b]

    def _block_inputs(self, t0: int, t1: int) -> dict:
        if self.io is not None:
            return self.io.inputs(t0, t1)
        per = [self.inputs_of(t) for t in range(t0, t1)]
        return {k: (_stacked([p[k] for p in per]) if isinstance(v, torch.Tensor) else v)
                for k, v in per[0].items()}

    # -- the run ----------------------------------------------------------------------------------------
    def run(self, state, emit, on_state=None):
        walk = self.walk
        pending = []                 # (first chunk, incoming state, flag) of the blocks not checked yet
        for t0 in range(0, self.chunks, self.block):
            t1 = min(self.chunks, t0 + self.block)
            b = t1 - t0
            tape, rows, last_a, last_b = self._tape(b, state)
            inputs = self._block_inputs(t0, t1)
            values = [None] * tape.size
            for name, i in tape.inputs.items():
                values[i] = inputs[name]
            del inputs
            _run_calls(tape.ahead, values, last_a, protect=set(walk.boundary))        # stage A
            start, states = state, []
            for j in range(b):                                                       # the walk
                states.append(state)
                if on_state is not None:
                    on_state(t0 + j, state)
                state = self._walk_one(values, rows, j, state)
            values[tape.state] = torch.stack(states)
            del states
            _run_calls(tape.after, values, last_b)                                   # stage B
            if isinstance(tape.flag, Slot):
                pending.append((t0, start, values[tape.flag.i]))
                if t1 - pending[0][0] >= self.replay.check_every or t1 == self.chunks:
                    hit = torch.stack([f for _, _, f in pending]).nonzero()       # one read for them all
                    if hit.numel():
                        return pending[int(hit[0, 0])][:2]
                    pending = []
            outputs = {k: values[v.i] if isinstance(v, Slot) else v for k, v in tape.outputs.items()}
            del values
            if self.io is not None:
                self.io.emit(t0, outputs)
            else:
                for j in range(b):
                    emit(t0 + j, {k: v[j] for k, v in outputs.items()})
            del outputs
        return state

    def _walk_one(self, block_values: list, rows: list, j: int, state):
        walk = self.walk
        values = [None] * walk.size
        for i, row in zip(walk.boundary, rows):
            v = block_values[i]
            if row:
                v = v[j]
                if i in walk.clobbered:
                    v = v.clone()
            values[i] = v
        values[walk.state] = state
        for c in walk.chain:
            c.run(values)
        return values[walk.new_state.i]


def _stacked(parts: list[torch.Tensor]) -> torch.Tensor:
    """The chunks' inputs stacked on a new dim 0, each laid out in memory as the chunk's own is (a chunk of
    FLA's [B, T, H, d] has its heads interleaved): the kernels then take the same paths, so the same bits."""
    x = parts[0]
    strides = x.stride()
    order = sorted(range(x.dim()), key=lambda d: (-strides[d], d))
    out = x.new_empty([len(parts)] + [x.shape[d] for d in order]).permute(
        [0] + [1 + order.index(d) for d in range(x.dim())])
    for j, p in enumerate(parts):
        out[j] = p
    return out


def _last_uses(calls: list, later_calls: list, tape: Tape) -> dict[int, list[int]]:
    """Per position in `calls`, the slots read there for the last time (not by `later_calls`, not results):
    let go there, so that a block holds only what is still to be read."""
    last: dict[int, int] = {}
    for pos, c in enumerate(calls):
        for i in c.reads:
            last[i] = pos
    later = {i for c in later_calls for i in c.reads}
    later.update(r.i for r in (*tape.outputs.values(), tape.new_state, tape.flag) if isinstance(r, Slot))
    by_pos: dict[int, list[int]] = {}
    for i, pos in last.items():
        if i not in later:
            by_pos.setdefault(pos, []).append(i)
    return by_pos


def _run_calls(calls, values: list, last: dict, protect: set[int] | frozenset[int] = frozenset()) -> None:
    for pos, c in enumerate(calls):
        c.run(values)
        for i in last.get(pos, ()):
            if i not in protect:
                values[i] = None
