"""Precision policy: the type each hand-off carries, and the type the state is kept in between chunks.

On the hardware, Cube and Vector compute in fp32 (Cube accumulates in fp32), and a tensor is rounded when
it is written to the GM workspace for the other unit. So the simulator computes in fp32 and rounds every
sync payload to its transfer type; the bytes a sync costs follow the same types. A policy may name a type
per payload (`overrides`), the state's type, and a narrower accumulation type for the Cube's matmuls
(`accumulate`; the Executor then sums the contraction in 16-deep steps rounded to it).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp64": torch.float64}
NAMES = {v: k for k, v in DTYPES.items()}


def dtype_name(dtype: torch.dtype | str) -> str:
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}: choose from {', '.join(DTYPES)}")
        return dtype
    if dtype not in NAMES:
        raise ValueError(f"unsupported dtype {dtype}: choose from {', '.join(DTYPES)}")
    return NAMES[dtype]


def itemsize(name: str) -> int:
    return DTYPES[name].itemsize


@dataclass(frozen=True)
class Precision:
    transfer: str = "fp32"                         # default type of every sync payload
    overrides: dict[str, str] = field(default_factory=dict, hash=False)   # tensor name -> type
    state: str | None = None                       # type the state is kept in; None: the transfer type
    compute: torch.dtype = torch.float32           # type both units compute in (fp64 for exactness checks)
    accumulate: str | None = None                  # type Cube matmuls accumulate in; None: the compute type

    def __post_init__(self):
        dtype_name(self.transfer)
        for name, dt in self.overrides.items():
            dtype_name(dt)
        if self.state is not None:
            dtype_name(self.state)
        if self.accumulate is not None:
            dtype_name(self.accumulate)

    def of(self, tensor_name: str | None) -> str:
        """Transfer type of a named payload."""
        if tensor_name is not None and tensor_name in self.overrides:
            return self.overrides[tensor_name]
        return self.transfer

    @property
    def state_type(self) -> str:
        return self.state or self.transfer

    def round(self, x: torch.Tensor, type_name: str) -> torch.Tensor:
        """x as the other unit sees it after a hand-off in `type_name`, back in the compute type."""
        target = DTYPES[type_name]
        if target == x.dtype or itemsize(type_name) >= x.dtype.itemsize:
            return x
        return x.to(target).to(x.dtype)

    def describe(self) -> str:
        parts = [f"transfer {self.transfer}"]
        if self.overrides:
            parts.append("overrides " + ", ".join(f"{k}={v}" for k, v in sorted(self.overrides.items())))
        parts.append(f"state {self.state_type}")
        if self.narrow_accumulation:
            parts.append(f"accumulate {self.accumulate}")
        return "; ".join(parts)

    @property
    def narrow_accumulation(self) -> bool:
        """Whether Cube matmuls accumulate in a type narrower than the compute type."""
        return self.accumulate is not None and itemsize(self.accumulate) < self.compute.itemsize
