"""The settings of a run: everything it depends on, checked once where they are made (the same settings
always give the same numbers and trace)."""
from __future__ import annotations

from dataclasses import dataclass, field

from npusim.model.engine import RIDE

from kda.driver.checks import KdaInputError


@dataclass(frozen=True)
class Settings:
    """Everything a run depends on; the same settings always give the same numbers and trace."""
    batch: int = 1
    heads: int = 1
    chunks: int = 16
    chunk_size: int = 64
    d_k: int = 128
    d_v: int = 128
    dtype: str = "bf16"              # transfer type of every hand-off (and of q, k, v in GM)
    gates: str = "seed"
    seed: int = 0
    profile: str = "ascend-910b2"
    state_handoff: str = RIDE        # "ride" on an existing sync where one fits, or "own"
    initial_state: bool = False      # randn initial state instead of zeros
    tokens: int | None = None        # default chunks x chunk_size; any T works (the last chunk is padded)
    workspace: dict = field(default_factory=dict, hash=False)   # overrides, e.g. {"slot_kib": 96}
    resident: tuple[str, ...] | None = None    # replaces the program's resident tensors (workspace plan)
    cores: int | None = None         # AI cores to spread the sequences over (default: the profile's)
    numerics: bool = True            # False: record the graph on random inputs and replay timing only
    keep_trace: bool = True          # keep every event of the timing runs (for traces and plots)
    record: bool = False             # keep each replay's decisions, to re-time it on other profiles (--uncertainty)
    # precision policy beyond `dtype` (npusim/record/precision.py): a type per sync payload, the state's type
    # (None: the program's default, else `dtype`), the Cube's accumulation type (None: fp32)
    payload_dtypes: dict = field(default_factory=dict, hash=False)    # tensor name -> "fp32" | "bf16" | "fp16"
    state_dtype: str | None = None
    accumulate_dtype: str | None = None
    attribution: bool = False        # also rank the hand-offs by the accuracy their rounding costs (slower)
    overrides: dict = field(default_factory=dict, hash=False)   # profile fields: {"sync.latency_us": 0.3}
    interleave: int = 1              # sequences a core alternates in its sequential passes
    seqlens: tuple[int, ...] | None = None     # a variable-length batch: tokens of each sequence (batch = 1)
    device: str = "cpu"              # torch device of the numerics: cpu, cuda or npu (kda/driver/device.py)
    capacity: str = "tile"           # a phase over its unit's UB / L1: "tile" it, or "refuse" (npusim/chip/capacity.py)
    core_model: bool = True          # False: the profile's [core] table ignored (no capacities, no pipes)
    value_heads: int | None = None   # grouped value heads: HV, a multiple of `heads` (the q/k heads); None: heads
    in_kernel: tuple[str, ...] = ()  # FLA's in-kernel options (kda/programs/in_kernel.py): "qk_l2norm", "gate",
                                     # "beta_sigmoid"; the numerics apply them to the inputs, the timing as a pass
    gate_lower_bound: float | None = None   # with "gate": FLA's lower_bound (a sigmoid gate in [lb, 0))

    def __post_init__(self):
        """The checks on a dimension, in one place: one line naming the option as kda.run spells it."""
        dims = {"--chunks": self.chunks, "--heads": self.heads, "--batch": self.batch,
                "--chunk-size": self.chunk_size, "--dk": self.d_k, "--dv": self.d_v, "--interleave": self.interleave,
                **{f"--{k}": getattr(self, k) for k in ("tokens", "cores") if getattr(self, k) is not None}}
        for flag, value in dims.items():
            if value < 1:
                raise KdaInputError(f"{flag} must be >= 1, got {value}")
        if self.value_heads is not None and (self.value_heads < 1 or self.value_heads % self.heads):
            raise KdaInputError(f"--value-heads must be a positive multiple of --heads {self.heads}, "
                                f"got {self.value_heads}")

    @property
    def v_heads(self) -> int:
        return self.value_heads or self.heads

    @property
    def group(self) -> int:
        """Value heads per q/k head: a work item is one q/k head with its group (timing.grouped_graphs)."""
        return self.v_heads // self.heads

    @property
    def T(self) -> int:
        if self.seqlens:
            return sum(self.seqlens)
        return self.tokens if self.tokens is not None else self.chunks * self.chunk_size
