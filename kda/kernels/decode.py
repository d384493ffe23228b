"""The measured decode kernels (kda/decode/kernels/) as the simulator models them, for kda.validate and npusim.fit
(through kda/kernels/registry.py's `resolve`): a kernel name and a decode shape -> the predicted latency.

A decode shape is `B=..;T=..;H=..;HV=..;K=..;V=..[;state=fp32|bf16][;L2=warm]`: B sequences of T tokens (one
decode step), H q/k heads, HV value heads (default H), the state's type, and whether the benchmark finds the
state in L2 (`warm`: repeated calls on a working set that fits L2, no flush) or in HBM (the default: a flush
before every call, or a whole model's other layers in between).
"""
from __future__ import annotations

from dataclasses import dataclass

from npusim.chip.profile import Profile

from kda.decode.kernels import MEASURED
from kda.decode.timing import DecodeShape, Types, options_for, time_step

DECODE_KERNELS = MEASURED       # the designs of kda/decode/kernels/, by name
KEYS = ("B", "T", "H", "HV", "K", "V", "state", "L2")


def parse_decode_shape(text: str) -> tuple[DecodeShape, str, bool]:
    """(shape, state type, warm) from 'B=32;T=1;H=16;HV=32;K=128;V=128[;state=bf16][;L2=warm]';
    ValueError saying why not."""
    try:
        kv = dict(item.split("=", 1) for item in text.replace(" ", "").split(";") if item)
    except ValueError:
        kv = {}
    unknown = sorted(set(kv) - set(KEYS))
    if not {"B", "H", "K", "V"} <= set(kv) or unknown:
        raise ValueError(f"decode shape {text!r} is not B=..;T=..;H=..;HV=..;K=..;V=..[;state=fp32|bf16][;L2=warm]"
                         + (f" (unknown key {unknown[0]!r})" if unknown else ""))
    try:
        B, T, H, K, V = (int(kv.get(k, 1 if k == "T" else 0)) for k in ("B", "T", "H", "K", "V"))
        HV = int(kv.get("HV", H))
    except ValueError:
        raise ValueError(f"decode shape {text!r}: B, T, H, HV, K and V must be whole numbers") from None
    if min(B, T, H, HV, K, V) < 1 or HV % H:
        raise ValueError(f"decode shape {text!r}: every dimension >= 1 and HV a multiple of H")
    state, l2 = kv.get("state", "fp32"), kv.get("L2", "flushed")
    if state not in ("fp32", "bf16") or l2 not in ("warm", "flushed"):
        raise ValueError(f"decode shape {text!r}: state is fp32 or bf16, L2 warm or flushed")
    return DecodeShape(B, H, HV, K, V, T), state, l2 == "warm"


@dataclass(frozen=True)
class DecodeKernelModel:
    name: str
    shape: DecodeShape
    dtype: str
    state: str = "fp32"
    warm: bool = False
    stage: str = ""

    @property
    def design(self):
        return DECODE_KERNELS[self.name]

    def predict(self, profile: Profile) -> float:
        """The step's latency in us (one launch, its items over the kernel's workers)."""
        d = self.design
        types = Types(d.io_dtype or self.dtype, d.gate_dtype, self.state)
        return time_step(d, self.shape, profile, types=types, options=options_for(d), warm=self.warm,
                         exact=True).latency_us


    def predict_many(self, profiles: list[Profile]) -> list[float]:
        """predict() for each profile (a decode step replays in milliseconds: one by one)."""
        return [self.predict(p) for p in profiles]


def decode_model(kernel: str, shape: str, dtype: str, stage: str = "") -> DecodeKernelModel:
    """ValueError naming the kernel, stage or shape when it cannot be modelled."""
    if stage:
        raise ValueError(f"decode kernel {kernel} has one stage: leave `stage` empty")
    parsed, state, warm = parse_decode_shape(shape)
    design = DECODE_KERNELS[kernel]
    if state not in design.state_dtypes:
        raise ValueError(f"decode kernel {kernel} keeps its state in {' or '.join(design.state_dtypes)}, not {state}")
    lo, hi = design.tokens
    if not lo <= parsed.tokens <= hi:
        raise ValueError(f"decode kernel {kernel} takes {lo}-{hi} tokens a step, not T={parsed.tokens}")
    return DecodeKernelModel(kernel, parsed, dtype, state, warm)
