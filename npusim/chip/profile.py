"""Hardware profiles: the numbers the cost model and the event model run on, loaded from TOML.

A profile file has one table per part of the machine. Every field is either a plain number or a table
`{ value = ..., source = "..." }`; a source that starts with "ASSUMED" marks a number no public document
gives (reports list those, and studies should sweep them). A file may start from a shipped profile with
`inherits = "ascend-910b2"` and override single fields.

An assumed field may carry its uncertainty: `range = [lo, hi]` (0 < lo <= value <= hi) with
`range_reason = "..."` saying why those bounds; so does a FITTED one (its fit's interval) and a MEASURED one (a
public measurement that bounds the number without giving it exactly, the source naming the measurement). Uncertainty studies (npusim/fit/uncertainty.py) sample them and
calibration (npusim/calibrate.py) fits within them. A file that overrides a field's value drops the
inherited source and range, unless it gives new ones.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import MISSING, dataclass, field, fields
from dataclasses import replace as _replace
from importlib import resources
from pathlib import Path

from npusim.chip.profile_checks import check_number, check_range
from npusim.errors import ProfileError


@dataclass(frozen=True)
class Chip:
    ai_cores: int                 # AI cores (one Cube unit each) that heads are spread over
    vec_per_core: int             # Vector units per AI core; they split each Vector phase
    clock_ghz: float              # cycles per nanosecond
    launch_overhead_us: float     # fixed cost of launching the kernel on the chip
    barrier_us: float = 1.0       # an all-core barrier inside a kernel (SyncAll) between two passes


@dataclass(frozen=True)
class Cube:
    macs_per_cycle: float         # 16-bit operands (fp16/bf16), fp32 accumulation
    fp32_macs_per_cycle: float    # fp32 operands
    op_overhead_cycles: float     # per matmul: operand loads into L0A/L0B, pipeline fill and drain


@dataclass(frozen=True)
class Vector:
    elems_per_cycle: float        # fp32 element operations per cycle per Vector unit
    op_overhead_cycles: float     # per vector instruction (issue and pipeline latency)
    step_latency_cycles: float    # per dependent step of a sequential op (forward substitution rows)


@dataclass(frozen=True)
class Sync:
    latency_us: float             # fixed cost of one cross-core hand-off (flag set -> wait returns)
    bandwidth_gbps: float         # GB/s (1e9 B/s) for the payload through the GM/L2 workspace


@dataclass(frozen=True)
class Memory:
    gm_bandwidth_gbps: float      # per core, for GM inputs read and outputs written; inf: not modelled
    chip_bandwidth_gbps: float    # HBM, shared by all cores for GM inputs and outputs; inf: no contention
    l2_bandwidth_gbps: float      # L2, shared by all cores for workspace hand-offs; inf: no contention


@dataclass(frozen=True)
class Workspace:
    resident_kib: float           # region for tensors that stay put across chunks (state, declared ones)
    slot_kib: float               # one ping/pong slot: a chunk's transient tensors
    slots: int                    # number of slots: 1 = no chunk overlap, 2 = ping/pong


@dataclass(frozen=True)
class Core:
    """One AI core's local memories and data-movement pipes (capacity.py, pipes.py).

    The defaults keep the model as it was before these were modelled: no capacity limit, GM traffic at
    memory.gm_bandwidth_gbps (0 below means exactly that), no padding, load + compute + store in series."""
    ub_kib: float = math.inf          # Unified Buffer per Vector unit (AIV)
    l1_kib: float = math.inf          # L1 of the Cube unit (AIC)
    l0a_kib: float = math.inf         # L0A: left matmul operand
    l0b_kib: float = math.inf         # L0B: right matmul operand
    l0c_kib: float = math.inf         # L0C: fp32 matmul result
    mte2_gbps: float = 0.0            # GM -> UB / L1 per core (0: memory.gm_bandwidth_gbps)
    mte3_gbps: float = 0.0            # UB -> GM per core (0: memory.gm_bandwidth_gbps)
    fixpipe_gbps: float = 0.0         # L0C -> GM per core (0: memory.gm_bandwidth_gbps)
    align_bytes: float = 1.0          # DataCopy moves whole blocks of this many bytes (32 on A2)
    buffer_num: int = 1               # 1: load, compute, store in series; 2: double buffering (BUFFER_NUM = 2)


@dataclass(frozen=True)
class Isa:
    """The core's instructions and transfers as measured (npusim/chip/isa.py). A profile without the table
    (`enabled = 0`) keeps the model before it: elements / lanes per Vector op, MACs / rate per matmul,
    bytes / rate per transfer. Cycles at the chip's clock; a repeat is 256 bytes of the source operand."""
    enabled: float = 0.0                    # 1: cost ops and transfers with the fields below; 0: as before
    vec_repeat_bytes: float = 256.0         # one Vector repeat: 8 blocks of 32 B
    vec_min_cycles: float = 3.0             # the least one Vector instruction takes (one repeat)
    vec_binary_cycles: float = 2.0          # per repeat: two tensors in (add, sub, mul, max, min, select, compare)
    vec_unary_cycles: float = 1.0           # per repeat: tensor and scalar (adds, muls), casts, copies, broadcasts
    vec_exp_cycles: float = 2.0             # per repeat: exp, ln (fp32)
    vec_div_cycles: float = 4.0             # per repeat: div, sqrt
    vec_reduce_cycles: float = 3.0          # per repeat: a sum along the row (vcadd)
    vec_dependent_cycles: float = 0.0       # an instruction waiting for the one before (pipe_barrier(PIPE_V))
    mmad_fixed_cycles: float = 2.0          # per matmul instruction
    mmad_fractal_cycles: float = 1.0        # per 16 x 16 x 16 fractal of 16-bit operands
    mte1_l0a_bytes_per_cycle: float = 263.0 # L1 -> L0A
    mte1_l0b_bytes_per_cycle: float = 131.6 # L1 -> L0B
    mte1_fixed_cycles: float = 2.0
    gm_l1_fixed_cycles: float = 206.0       # MTE2 GM -> L1, per transfer
    gm_l1_bytes_per_cycle: float = 174.0
    gm_burst_cycles: float = 0.0            # per row after the first of a strided DataCopy (a head's rows in
                                            # FLA's [B, T, H, D] layout lie H x D apart)
    gm_ub_fixed_cycles: float = 64.0        # MTE2 GM -> UB, per transfer
    gm_ub_bytes_per_cycle: float = 47.7
    ub_gm_fixed_cycles: float = 88.0        # MTE3 UB -> GM, per transfer
    ub_gm_bytes_per_cycle: float = 73.1
    fixpipe_min_cycles: float = 85.0        # FixPipe L0C -> GM / L1, per transfer: the larger of this and
    fixpipe_bytes_per_cycle: float = 122.6  # the fp32 bytes over this rate
    ub_ub_bytes_per_cycle: float = 262.0    # DataCopy UB -> UB on the Vector pipe (npusim/chip/issue.py)
    scalar_access_cycles: float = 10.0      # one GetValue / SetValue on UB by the scalar unit (issue.py)


@dataclass(frozen=True)
class Host:
    """The host around a kernel's launch, where a timed region holds it (npusim/model/host.py). 0: not seen."""
    op_us: float = 0.0            # one eager framework call: an allocation, a small op, a ctypes launch
    launch_us: float = 0.0        # one Triton launch through its Python launcher
    sync_us: float = 0.0          # one blocking copy between host and device (.tolist(), .to(device))


_SECTIONS = {"chip": Chip, "cube": Cube, "vector": Vector, "sync": Sync, "memory": Memory,
             "workspace": Workspace, "core": Core, "isa": Isa, "host": Host}
_OPTIONAL_SECTIONS = {"core", "isa", "host"}    # a file without the table gets the defaults (the model as before)


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    chip: Chip
    cube: Cube
    vector: Vector
    sync: Sync
    memory: Memory
    workspace: Workspace
    core: Core = Core()
    isa: Isa = Isa()
    host: Host = Host()
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict, compare=False)
    range_reasons: dict[str, str] = field(default_factory=dict, compare=False)

    # Derived rates, in units per microsecond.
    def cube_macs_per_us(self, operand_bytes: int) -> float:
        per_cycle = self.cube.fp32_macs_per_cycle if operand_bytes >= 4 else self.cube.macs_per_cycle
        return per_cycle * self.chip.clock_ghz * 1e3

    def cycles_to_us(self, cycles: float) -> float:
        return cycles / (self.chip.clock_ghz * 1e3)

    def sync_us(self, nbytes: float) -> float:
        """Time of one hand-off carrying `nbytes`: fixed latency + bytes / bandwidth."""
        return self.sync.latency_us + self.transfer_us(nbytes)

    def transfer_us(self, nbytes: float) -> float:
        return nbytes / (self.sync.bandwidth_gbps * 1e3)

    def gm_us(self, nbytes: float) -> float:
        return 0.0 if nbytes == 0 or math.isinf(self.memory.gm_bandwidth_gbps) else nbytes / (
            self.memory.gm_bandwidth_gbps * 1e3)

    def pipe_gbps(self, pipe: str) -> float:
        """GB/s of a data-movement pipe ("mte2", "mte3", "fixpipe"); the GM rate where the profile gives none."""
        value = getattr(self.core, f"{pipe}_gbps")
        return value if value > 0 else self.memory.gm_bandwidth_gbps

    @property
    def assumptions(self) -> dict[str, str]:
        """Fields whose source says ASSUMED: no public figure backs them."""
        return {k: v for k, v in self.sources.items() if v.upper().startswith("ASSUMED")}

    def status(self, key: str) -> str:
        """How a field is known: ASSUMED, FITTED or MEASURED (its source's first word), else "sourced"."""
        word = self.sources.get(key, "").split(":")[0].strip().upper()
        return word if word in ("ASSUMED", "FITTED", "MEASURED") else "sourced"

    def without_core(self) -> "Profile":
        """The model before the core's memories and pipes (`--core-model off`): no capacity limit, GM traffic
        at memory.gm_bandwidth_gbps, no padding, load + compute + store in series."""

        def keep(d: dict) -> dict:
            return {k: v for k, v in d.items() if not k.startswith("core.")}

        return _replace(self, core=Core(), sources={**keep(self.sources), **_DEFAULT_SOURCE},
                        ranges=keep(self.ranges), range_reasons=keep(self.range_reasons))

    def value(self, key: str) -> float:
        """The value of field 'section.name'."""
        section, _, name = key.partition(".")
        part = getattr(self, section, None) if section in _SECTIONS else None
        if part is None or not hasattr(part, name):
            raise ProfileError(f"profile {self.name}: no field {key}")
        return getattr(part, name)

    def replace(self, **changes: float) -> "Profile":
        """A copy with fields changed, named as 'section.field' with dots replaced by '__'
        (e.g. `replace(sync__latency_us=2.0)`), for sweeps. Sources and ranges are kept; a changed value
        is not checked against its range (a sweep may go beyond it)."""
        raw = self.as_dict()
        for key, value in changes.items():
            section, _, name = key.partition("__")
            if section not in _SECTIONS or name not in {f.name for f in fields(_SECTIONS[section])}:
                raise ProfileError(f"profile {self.name}: no field {section}.{name}")
            raw[section][name] = value
        return _build(raw, f"{self.name} (modified)", self.sources, self.ranges, self.range_reasons,
                      check_ranges=False)

    def digest(self) -> str:
        """sha256 of what the profile holds (every field's value and every range, not its name or
        description): the same numbers give the same digest, whatever file, parent or --set made them."""
        import hashlib
        import json
        content = {k: v for k, v in self.as_dict().items() if k not in ("name", "description")}
        content["ranges"] = {k: list(v) for k, v in sorted(self.ranges.items())}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()

    def as_dict(self) -> dict:
        out: dict = {"name": self.name, "description": self.description}
        for section in _SECTIONS:
            part = getattr(self, section)
            # a pipe rate of 0 is the default "as memory.gm_bandwidth_gbps": left out, it loads back as such
            out[section] = {f.name: getattr(part, f.name) for f in fields(part)
                            if not (section == "core" and f.name.endswith("_gbps") and getattr(part, f.name) == 0)}
        return out


def shipped_profiles() -> list[str]:
    """Names of the profiles shipped in the package."""
    root = resources.files("npusim") / "profiles"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".toml"))


def load_profile(name_or_path: str | Path) -> Profile:
    """Load a shipped profile by name (`seed-doc`, `ascend-910b2`, ...) or a TOML file by path."""
    raw, origin = _read(name_or_path)
    return _resolve(raw, origin, seen=set())


def _read(name_or_path: str | Path) -> tuple[dict, str]:
    text_name = str(name_or_path)
    path = Path(text_name)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise ProfileError(f"profile file {text_name} does not exist")
        data = path.read_bytes()
        origin = text_name
    else:
        res = resources.files("npusim") / "profiles" / f"{text_name}.toml"
        if not res.is_file():
            raise ProfileError(f"unknown profile {text_name!r}: shipped profiles are "
                               f"{', '.join(shipped_profiles())}, or pass a path to a .toml file")
        data = res.read_bytes()
        origin = text_name
    try:
        return tomllib.loads(data.decode("utf-8")), origin
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ProfileError(f"profile {origin}: not valid TOML ({err})") from None


def _resolve(raw: dict, origin: str, seen: set[str]) -> Profile:
    parent = raw.pop("inherits", None)
    sources: dict[str, str] = {}
    ranges: dict[str, tuple[float, float]] = {}
    reasons: dict[str, str] = {}
    if parent is not None:
        if not isinstance(parent, str) or not parent.strip():
            raise ProfileError(f"profile {origin}: inherits must be a profile name or a .toml path, got {parent!r}")
        here = Path(origin).parent if origin.endswith(".toml") else None
        if here is not None and (parent.endswith(".toml") or "/" in parent) and not Path(parent).is_absolute():
            parent = str(here / parent)          # a relative path is relative to the file that names it
        if parent in seen or Path(parent).resolve() in {Path(x).resolve() for x in seen}:
            raise ProfileError(f"profile {origin}: inherits from itself through {parent!r}")
        base_raw, base_origin = _read(parent)
        base = _resolve(base_raw, base_origin, seen | {parent, origin})
        merged = base.as_dict()
        sources, ranges, reasons = dict(base.sources), dict(base.ranges), dict(base.range_reasons)
        for key, value in raw.items():
            if isinstance(value, dict) and key in _SECTIONS:
                if not isinstance(merged.get(key), dict):
                    merged[key] = {}
                merged[key] = {**merged[key], **value}
                for name in value:
                    for inherited in (sources, ranges, reasons):
                        inherited.pop(f"{key}.{name}", None)
            else:
                merged[key] = value
        raw = merged
    return _build(raw, origin, sources, ranges, reasons)


def _build(raw: dict, origin: str, inherited_sources: dict[str, str],
           inherited_ranges: dict[str, tuple[float, float]] | None = None,
           inherited_reasons: dict[str, str] | None = None, check_ranges: bool = True) -> Profile:
    sources = dict(inherited_sources)
    ranges = dict(inherited_ranges or {})
    reasons = dict(inherited_reasons or {})
    unknown = set(raw) - set(_SECTIONS) - {"name", "description"}
    if unknown:
        raise ProfileError(f"profile {origin}: unknown table or field {sorted(unknown)[0]!r}")
    parts = {}
    for section, cls in _SECTIONS.items():
        table = raw.get(section)
        if table is None and section in _OPTIONAL_SECTIONS:
            table = {}
        if not isinstance(table, dict):
            raise ProfileError(f"profile {origin}: missing table [{section}]")
        known = {f.name: f for f in fields(cls)}
        extra = set(table) - set(known)
        if extra:
            raise ProfileError(f"profile {origin}: unknown field {section}.{sorted(extra)[0]}")
        values = {}
        for name, f in known.items():
            if name not in table and f.default is not MISSING:     # a field added later: its default
                sources.setdefault(f"{section}.{name}", _DEFAULT_SOURCE.get(
                    f"{section}.{name}", f"ASSUMED: the default of npusim/chip/profile.py ({f.default})"))
                values[name] = f.default
                continue
            if name not in table:
                raise ProfileError(f"profile {origin}: missing field {section}.{name}")
            value = table[name]
            if isinstance(value, dict):
                if "value" not in value:
                    raise ProfileError(f"profile {origin}: field {section}.{name} is a table without 'value'")
                extra_keys = set(value) - {"value", "source", "range", "range_reason"}
                if extra_keys:
                    raise ProfileError(f"profile {origin}: field {section}.{name} has an unknown key "
                                       f"{sorted(extra_keys)[0]!r} (known: value, source, range, range_reason)")
                if "source" in value:
                    sources[f"{section}.{name}"] = str(value["source"])
                if "range" in value:
                    ranges[f"{section}.{name}"] = check_range(value["range"], f"{section}.{name}", origin)
                    if not str(value.get("range_reason", "")).strip():
                        raise ProfileError(f"profile {origin}: field {section}.{name} has a range but no "
                                           f"range_reason saying why")
                    reasons[f"{section}.{name}"] = str(value["range_reason"])
                elif "range_reason" in value:
                    raise ProfileError(f"profile {origin}: field {section}.{name} has a range_reason but no range")
                value = value["value"]
            values[name] = check_number(value, f.type, f"{section}.{name}", origin)
            key = f"{section}.{name}"
            if check_ranges and key in ranges and not ranges[key][0] <= values[name] <= ranges[key][1]:
                lo, hi = ranges[key]
                raise ProfileError(f"profile {origin}: field {key} = {values[name]:g} lies outside its range "
                                   f"[{lo:g}, {hi:g}]")
        parts[section] = cls(**values)
    name = raw.get("name", Path(origin).stem)
    return Profile(name=str(name), description=str(raw.get("description", "")), sources=sources,
                   ranges=ranges, range_reasons=reasons, **parts)


# Defaults of the [core] table that keep the model as before it was modelled: not hardware figures.
_DEFAULT_SOURCE = {
    **{f"core.{n}_kib": "not in the profile: no capacity limit (the model before capacities)"
       for n in ("ub", "l1", "l0a", "l0b", "l0c")},
    **{f"core.{n}_gbps": "not in the profile: memory.gm_bandwidth_gbps (the model before pipes)"
       for n in ("mte2", "mte3", "fixpipe")},
    "core.align_bytes": "not in the profile: no padding (the model before pipes)",
    "core.buffer_num": "not in the profile: load, compute and store in series (the model before pipes)",
    **{f"isa.{f.name}": "not in the profile: the model before the instruction tables (isa.enabled = 0)"
       for f in fields(Isa)},
    **{f"host.{f.name}": "not in the profile: no host time in a timed region" for f in fields(Host)},
}
