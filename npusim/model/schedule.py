"""Designs of one or more passes, and how their work is laid out over the chip.

A design is a short list of passes; each pass is an ordinary per-chunk phase program (program.py) and
declares how its work is laid out:

    CHUNKS      (sequence, chunk) items with no state between them, spread over all AI cores
                (FLA's intra-chunk kernels: chunk_local_cumsum, scaled_dot_kkt, solve_tril, ...);
    SEQUENTIAL  the chunks of each sequence in order, carrying the state (FLA's fwd_h);
    FUSED       the same on the engine, for a design that is one such loop (v1-v4).

A SEQUENTIAL or FUSED pass may walk the chunks from the last to the first (`reverse=True`: a backward
pass carrying the state's gradient); the timing is the same either way. A design has at most one state
pass in each direction.

and how it starts after the pass before it:

    LAUNCH      a kernel launch of its own (the profile's chip.launch_overhead_us);
    BARRIER     an all-core barrier inside one kernel (SyncAll: chip.barrier_us).

    FLA = Design("fla", (
        Pass("cumsum_kkt", kkt_program, CHUNKS),
        Pass("fwd_h", fwd_h_program, SEQUENTIAL),
        Pass("fwd_o", fwd_o_program, CHUNKS),
    ))

A pass reads the GM inputs and the outputs of earlier passes by argument name, and returns named
outputs that later passes read; everything between passes goes through GM (HBM), and the event model
counts it in the shared HBM bandwidth. The first pass pays a launch; the design's latency is the sum
of its passes' makespans and boundaries (every pass ends on all cores before the next one starts).
A design may also say what its Python wrappers do on the host (`host`, host.py), for measured kernels
whose timed region holds them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from dataclasses import replace as _replace

from npusim.chip.profile import Profile
from npusim.model.host import Host
from npusim.record.program import PhaseProgram

FUSED, CHUNKS, SEQUENTIAL = "fused", "chunks", "sequential"
LAYOUTS = (FUSED, CHUNKS, SEQUENTIAL)
LAUNCH, BARRIER = "launch", "barrier"
BOUNDARIES = (LAUNCH, BARRIER)


@dataclass(frozen=True)
class Pass:
    name: str
    program: PhaseProgram
    layout: str = FUSED
    boundary: str = LAUNCH            # how the pass starts after the previous one (the first always launches)
    reverse: bool = False             # walk the chunks from the last to the first (backward passes)
    slots: int | None = None          # workspace slots the kernel gives a core (None: the profile's ping/pong)
    vec_units: int | None = None      # Vector units of a core the kernel uses (None: all; 1: AIV0 only)
    all_heads: bool = False           # an item is one chunk of every head at once (a [C, H] tile), not one head
    barriers: int = 1                 # with boundary BARRIER: SyncAlls before it (0: runs on straight away)
    buffers: int | None = None        # the kernel's BUFFER_NUM (None: the profile's); 1 also serialises a
                                      # matmul's MTE1 loads and its MMAD (a single L0A/L0B buffer)
    interleave: int | None = None     # SEQUENTIAL: sequences a core alternates, as the kernel streams them
                                      # (None: the run's --interleave)

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise ValueError(f"pass {self.name}: unknown layout {self.layout!r}; choose from {', '.join(LAYOUTS)}")
        if self.boundary not in BOUNDARIES:
            raise ValueError(f"pass {self.name}: unknown boundary {self.boundary!r}; choose from "
                             f"{', '.join(BOUNDARIES)}")
        if self.layout == CHUNKS and self.program.state is not None:
            raise ValueError(f"pass {self.name}: a {CHUNKS} pass has independent items, but program "
                             f"{self.program.name} carries a state")
        if self.reverse and self.layout == CHUNKS:
            raise ValueError(f"pass {self.name}: a {CHUNKS} pass has no order to reverse")
        if self.interleave is not None and (self.layout == CHUNKS or self.interleave < 1):
            raise ValueError(f"pass {self.name}: interleave is a number >= 1 of sequences a core alternates, "
                             f"for a pass that walks sequences")

    @property
    def carries_state(self) -> bool:
        return self.layout != CHUNKS

    def on(self, profile: Profile) -> Profile:
        """The chip as this pass's kernel uses it: its workspace slots, buffers and Vector units, and
        contiguous GM rows when an item holds every head."""
        if self.slots is not None:
            profile = _replace(profile, workspace=_replace(profile.workspace, slots=self.slots))
        if self.buffers is not None:
            profile = _replace(profile, core=_replace(profile.core, buffer_num=self.buffers))
        if self.vec_units is not None:
            profile = _replace(profile, chip=_replace(profile.chip, vec_per_core=min(self.vec_units,
                                                                                    profile.chip.vec_per_core)))
        if self.all_heads:               # a chunk of every head is a [C, H] block of [T, H]: contiguous rows
            profile = _replace(profile, isa=_replace(profile.isa, gm_burst_cycles=0.0))
        return profile


@dataclass(frozen=True)
class Design:
    name: str
    passes: tuple[Pass, ...]
    description: str = ""
    notes: dict[str, str] = field(default_factory=dict, hash=False)
    host: Host | None = field(default=None, compare=False)   # its wrappers as a benchmark times them (host.py)

    def __post_init__(self):
        if not self.passes:
            raise ValueError(f"design {self.name} has no passes")
        names = [p.name for p in self.passes]
        if len(set(names)) != len(names):
            raise ValueError(f"design {self.name}: pass names repeat ({', '.join(names)})")
        for reverse in (False, True):
            if sum(p.program.state is not None and p.reverse == reverse for p in self.passes) > 1:
                raise ValueError(f"design {self.name}: more than one pass carries the state"
                                 + (" backwards" if reverse else ""))
        if self.host is not None:   # every pass launched once by a wrapper (one of them would time as 0 us
            launched = self.host.launched()     # otherwise), or the whole design as one kernel
            if launched != [""] and (len(set(launched)) < len(launched) or not set(names) <= set(launched)):
                raise ValueError(f"design {self.name}: its wrappers launch {', '.join(map(repr, launched))}, "
                                 f"not each of its passes ({', '.join(names)}) once")

    @property
    def single(self) -> bool:
        """One pass: the per-chunk template of v1-v4."""
        return len(self.passes) == 1

    @property
    def state_pass(self) -> Pass | None:
        return next((p for p in self.passes if p.program.state is not None and not p.reverse), None)

    @property
    def reverse_state_pass(self) -> Pass | None:
        """The pass that carries a state from the last chunk to the first (a backward design's gradient)."""
        return next((p for p in self.passes if p.program.state is not None and p.reverse), None)

    @property
    def launches(self) -> int:
        return 1 + sum(p.boundary == LAUNCH for p in self.passes[1:])

    @property
    def barriers(self) -> int:
        return sum(p.barriers for p in self.passes[1:] if p.boundary == BARRIER)


def single_pass(program: PhaseProgram) -> Design:
    """A per-chunk program as a design of one fused pass (v1-v4)."""
    return Design(program.name, (Pass(program.name, program, FUSED),), program.description, dict(program.notes))
