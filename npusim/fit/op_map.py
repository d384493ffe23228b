"""Which msprof operator is which kernel: a small TOML of the user's that maps an op summary's `OP Type` to a
kernel the model knows, the stage of it that was timed, how its `Input Shapes` read, and whether its rows are
held out. With a map, an op summary's rows of other operators (the rest of a real export: MatMul, Cast, ...)
are skipped, not refused.

    [ops.KdaChunkV6]              # an OP Type of the op summary
    kernel = "kda_v6"             # a kernel the model knows
    [ops.ChunkKdaFwdPrepare]
    kernel = "kda_fla_npu"
    stage = "Prepare"             # one stage of a kernel of several, timed alone (default: the whole kernel)
    chunk_size = 64               # default 64
    q_input = 0                   # which of the Input Shapes is q [B, T, Hg, K] (default 0)
    v_input = 2                   # which is v [B, T, H, V] (default 2)
    held_out = true               # validation only: no fit sees these rows (default false)
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from npusim.errors import NpuSimError

KEYS = {"kernel": str, "stage": str, "chunk_size": int, "q_input": int, "v_input": int, "held_out": bool}


class OpMapError(NpuSimError):
    """A map that cannot be used: one line naming the file, the operator and the key."""


@dataclass(frozen=True)
class OpEntry:
    """What one msprof operator is, for the model."""
    op_type: str
    kernel: str
    stage: str = ""
    chunk_size: int = 64
    q_input: int = 0
    v_input: int = 2
    held_out: bool = False

    def shape(self, input_shapes: str) -> str:
        """The model's `B=..;T=..;H=..;Hg=..;K=..;V=..;C=..` from msprof's Input Shapes (inputs split by ';',
        dimensions by ','); ValueError says which input does not read."""
        parts = [[int(x) for x in p.split(",") if x.strip()] for p in input_shapes.split(";")]
        for name, i in (("q", self.q_input), ("v", self.v_input)):
            if i >= len(parts) or len(parts[i]) != 4:
                raise ValueError(f"Input Shapes {input_shapes!r}: input {i} ({name}) is not [B, T, heads, width]")
        (B, T, Hg, K), (_, _, H, V) = parts[self.q_input], parts[self.v_input]
        return f"B={B};T={T};H={H};Hg={Hg};K={K};V={V};C={self.chunk_size}"


def read_op_map(path: str | Path) -> dict[str, OpEntry]:
    """OP Type -> OpEntry from a map file; OpMapError on the first thing wrong."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OpMapError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise OpMapError(f"{path}: not a TOML op map ({err})") from None
    ops = data.get("ops")
    if set(data) != {"ops"} or not isinstance(ops, dict) or not ops:
        raise OpMapError(f"{path}: expected [ops.<OP Type>] tables and nothing else, found "
                         f"{', '.join(sorted(data)) or 'nothing'}")
    return {op: _entry(path, op, fields) for op, fields in ops.items()}


def _entry(path: Path, op: str, fields) -> OpEntry:
    if not isinstance(fields, dict):
        raise OpMapError(f"{path}: ops.{op} must be a table with a kernel")
    for key, value in fields.items():
        if key not in KEYS:
            raise OpMapError(f"{path}: ops.{op}: unknown key {key!r} (known: {', '.join(KEYS)})")
        if type(value) is not KEYS[key]:
            raise OpMapError(f"{path}: ops.{op}.{key} must be a {KEYS[key].__name__}, got {value!r}")
    if not fields.get("kernel"):
        raise OpMapError(f"{path}: ops.{op} names no kernel")
    for key, least in (("chunk_size", 1), ("q_input", 0), ("v_input", 0)):
        if key in fields and fields[key] < least:
            raise OpMapError(f"{path}: ops.{op}.{key} = {fields[key]} must be at least {least}")
    return OpEntry(op, **fields)
