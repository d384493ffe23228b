"""Measured kernels as the simulator models them: a kernel name and a shape -> predicted latency on a profile.

Kernel names are `<gate>_<design>`: gate `kda` (one decay per key channel) or `gdn` (Gated DeltaNet, one
decay per head: the same phase programs with g broadcast over the channels, so the gate's Vector work
shrinks from C x d_k to C values per chunk); design one of kda/programs. A shape is written
`BxTxHxKxV` (simple CSV) or as msprof's Input Shapes `q;k;v;g;beta` (q [B, T, Hg, K], v [B, T, H, V]).
The latency is the kernel's pipelined makespan plus the profile's launch overhead, what msprof's Task
Duration measures for one kernel.

npusim.calibrate and kda.validate read kernels through `resolve`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from npusim import build_template, simulate
from npusim.measurements import Measurement, MeasurementError
from npusim.precision import Precision
from npusim.profile import Profile

from .api import program_default_state, record_graph
from .programs import PROGRAMS

GATES = ("kda", "gdn")


def kernel_names() -> list[str]:
    return [f"{gate}_{design}" for gate in GATES for design in PROGRAMS]


@dataclass(frozen=True)
class KernelShape:
    batch: int
    tokens: int
    heads: int               # value heads: one state per (sequence, head)
    d_k: int
    d_v: int

    def text(self) -> str:
        return f"{self.batch}x{self.tokens}x{self.heads}x{self.d_k}x{self.d_v}"


def parse_shape(text: str, form: str = "simple") -> KernelShape:
    """'1x4096x32x128x128' or msprof's '1,4096,16,128;1,4096,16,128;1,4096,32,128;...'; ValueError says why."""
    try:
        if form == "msprof":
            parts = [[int(x) for x in p.split(",") if x.strip()] for p in text.split(";")]
            if len(parts) < 3 or len(parts[0]) != 4 or len(parts[2]) != 4:
                raise ValueError
            (B, T, _, K), (_, _, H, V) = parts[0], parts[2]
        else:
            dims = [int(x) for x in text.lower().split("x")]
            if len(dims) != 5:
                raise ValueError
            B, T, H, K, V = dims
    except ValueError:
        want = "q;k;v;... with q [B,T,Hg,K] and v [B,T,H,V]" if form == "msprof" else "BxTxHxKxV, e.g. 1x4096x32x128x128"
        raise ValueError(f"shape {text!r} is not {want}") from None
    if min(B, T, H, K, V) < 1:
        raise ValueError(f"shape {text!r}: every dimension must be >= 1")
    return KernelShape(B, T, H, K, V)


@lru_cache(maxsize=64)
def _graph(design: str, gate: str, chunk_size: int, d_k: int, d_v: int, dtype: str):
    program = PROGRAMS[design]
    precision = Precision(dtype, {}, state=program_default_state(program, dtype))
    return record_graph(program, chunk_size=chunk_size, d_k=d_k, d_v=d_v, precision=precision,
                        gate_width=1 if gate == "gdn" else None)


@dataclass(frozen=True)
class KernelModel:
    name: str
    shape: KernelShape
    dtype: str
    chunk_size: int = 64

    @property
    def gate(self) -> str:
        return self.name.split("_", 1)[0]

    @property
    def design(self) -> str:
        return self.name.split("_", 1)[1]

    def predict(self, profile: Profile) -> float:
        """Latency in us of the kernel on `profile` (timing only, the graph recorded once)."""
        graph = _graph(self.design, self.gate, self.chunk_size, self.shape.d_k, self.shape.d_v, self.dtype)
        tpl = build_template(graph, profile)
        run = simulate(tpl, profile, chunks=math.ceil(self.shape.tokens / self.chunk_size),
                       sequences=self.shape.batch * self.shape.heads, trace=False)
        return run.latency_us


def model(kernel: str, shape: str, dtype: str, form: str = "simple") -> KernelModel:
    """ValueError naming the kernel or shape when it cannot be modelled."""
    if kernel not in kernel_names():
        raise ValueError(f"unknown kernel {kernel!r} (known: {', '.join(kernel_names())})")
    return KernelModel(kernel, parse_shape(shape, form), dtype)


def resolve(m: Measurement) -> KernelModel:
    """The model of a measured row; MeasurementError naming the row otherwise."""
    try:
        return model(m.kernel, m.shape, m.dtype, m.form)
    except ValueError as err:
        raise MeasurementError(f"{m.where()}: {err}") from None
