"""The host's part of a timed region: what NPU events around a kernel's Python wrapper see besides the kernel.

A wrapper runs on the host between the start event and the launch: allocations, small device ops,
blocking copies (`.tolist()`), the launch itself. Where the device starts idle (a host sync just before
the start event) or the wrapper blocks on the device, that host time lies inside the timed region; where
the host runs ahead of the device, only the blocking steps show. A wrapper is a list of steps read from
its source, each stage its own list:

    Op("A = torch.zeros(T, H, C) fp16", ("T", "H", "C", 2))   an eager call: host.op_us on the host; with a
                                              size (the product of dimensions and bytes), a device op after it:
                                              a launch and the bytes at the HBM rate (a zero-fill, a copy)
    Sync("cu_seqlens.tolist()")               waits for the device to finish, then host.sync_us
    Launch("kkt")                             the pass's kernel: host.launch_us (a Triton launcher; `via="ctypes"`:
                                              host.op_us), then the pass's simulated time on the device

Two clocks, host and device. A step starts on the host when the one before it ends there; its device part
starts when the host has issued it and the device is free. The region ends when both are done (the end
event is queued by the host and recorded by the device). With the profile's host fields at 0 (every
profile but a calibrated one) a region is its kernels' time and its device ops.

Dimensions a size may name: T tokens of the batch, H value heads, C the chunk, K and V the head dims,
NC chunks of one head over the batch, N sequences.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from npusim.chip.profile import Profile

DIMS = ("T", "H", "C", "K", "V", "NC", "N")


@dataclass(frozen=True)
class Op:
    what: str
    size: tuple = ()          # dimension names and numbers multiplied: the bytes its device op moves

    def __post_init__(self):
        unknown = [x for x in self.size if isinstance(x, str) and x not in DIMS]
        if unknown:
            raise ValueError(f"op {self.what!r}: size names {unknown[0]!r}, not one of {', '.join(DIMS)}")

    def nbytes(self, dims: Mapping[str, float]) -> float:
        return math.prod(dims[x] if isinstance(x, str) else x for x in self.size) if self.size else 0.0


@dataclass(frozen=True)
class Sync:
    what: str


@dataclass(frozen=True)
class Launch:
    name: str                 # the pass it launches; "" every pass of the design (one fused kernel)
    via: str = "triton"       # "triton": host.launch_us; "ctypes": a plain call, host.op_us

    def __post_init__(self):
        if self.via not in ("triton", "ctypes"):
            raise ValueError(f"launch of {self.name!r}: via must be 'triton' or 'ctypes', got {self.via!r}")


Step = Op | Sync | Launch


@dataclass(frozen=True)
class Host:
    """A design's wrappers as one benchmark times them: the steps of each stage, and whether the device is
    idle at the start event (`idle`: a host sync before it) or the host runs ahead."""
    stages: dict[str, tuple[Step, ...]] = field(hash=False)
    idle: bool
    source: str = ""

    def launched(self) -> list[str]:
        """The passes the wrappers launch, in order ("" for the whole design as one kernel)."""
        return [s.name for s in self.steps() if isinstance(s, Launch)]

    def steps(self, stage: str = "") -> tuple[Step, ...]:
        """One stage's steps; "" every stage's in order."""
        if not stage:
            return tuple(s for steps in self.stages.values() for s in steps)
        return self.stages.get(stage, ())


def timed_region(host: Host, stage: str, kernel_us: Mapping[str, float], dims: Mapping[str, float],
                 profile: Profile) -> float:
    """Microseconds from the start event to the end event around `stage`'s wrapper: `kernel_us` is each
    launched pass's simulated time (launch overhead included), by pass name ("" the whole design)."""
    h = profile.host
    hbm = profile.memory.chip_bandwidth_gbps * 1e3          # bytes per us
    now = 0.0 if host.idle else -math.inf                   # the host's clock (-inf: ahead of the device)
    device = 0.0
    for step in host.steps(stage):
        if isinstance(step, Sync):
            now = max(now, device) + h.sync_us
        elif isinstance(step, Launch):
            now += h.op_us if step.via == "ctypes" else h.launch_us
            device = max(device, now) + kernel_us[step.name]
        else:
            now += h.op_us
            nbytes = step.nbytes(dims)
            if nbytes:
                device = max(device, now) + profile.chip.launch_overhead_us + nbytes / hbm
    return max(now, device)
