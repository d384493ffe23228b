"""A profile field's value checked: its type and the range of values the model accepts (a number no chip could
have is refused, never modelled), and a field's sampling range."""
from __future__ import annotations

import math

from npusim.errors import ProfileError


def check_range(value, where: str, origin: str) -> tuple[float, float]:
    """`range = [lo, hi]`: two finite numbers, 0 < lo <= hi (uncertainty samples them on a log scale)."""
    ok = isinstance(value, list) and len(value) == 2 and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)
    if not ok:
        raise ProfileError(f"profile {origin}: field {where}: range must be [lo, hi], two numbers, got {value!r}")
    lo, hi = float(value[0]), float(value[1])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ProfileError(f"profile {origin}: field {where}: range bounds must be finite numbers, got {value!r}")
    if lo <= 0:
        raise ProfileError(f"profile {origin}: field {where}: range lower bound must be > 0, got {lo:g}")
    if lo > hi:
        raise ProfileError(f"profile {origin}: field {where}: range [{lo:g}, {hi:g}] has lo > hi")
    return lo, hi


def check_number(value, type_name: str, where: str, origin: str):
    """Every field's type and range, in one place (_LIMITS): a number no chip could have is refused, never
    modelled (it would give a meaningless latency, or Infinity in JSON)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProfileError(f"profile {origin}: field {where} must be a number, got {value!r}")
    name = where.split(".")[-1]
    lo, hi = _LIMITS.get(where, _LIMITS.get(name, (0.0, 1e9)))
    if math.isnan(value) or value < 0:
        raise ProfileError(f"profile {origin}: field {where} must be >= 0, got {value!r}")
    if math.isinf(value):
        if where in _MAY_BE_INF:
            return math.inf
        raise ProfileError(f"profile {origin}: field {where} must be a finite number, got {value!r}")
    if where in _SWITCHES and value not in (0, 1):          # a switch: no value in between means anything
        raise ProfileError(f"profile {origin}: field {where} is a switch: 0 (off) or 1 (on), got {value!r}")
    if type_name == "int":
        if value != int(value) or value < 1:
            raise ProfileError(f"profile {origin}: field {where} must be a whole number >= 1, got {value!r}")
        value = int(value)
    elif value == 0 and name in _POSITIVE:
        raise ProfileError(f"profile {origin}: field {where} must be > 0")
    if not lo <= value <= hi:
        raise ProfileError(f"profile {origin}: field {where} = {value:g} lies outside [{lo:g}, {hi:g}], the "
                           f"values this model accepts for it")
    return value if type_name == "int" else float(value)


_SWITCHES = {"isa.enabled"}            # fields that turn a part of the model on (1) or off (0)
# Rates that divide: zero would mean infinite time.
_POSITIVE = {"clock_ghz", "macs_per_cycle", "fp32_macs_per_cycle", "elems_per_cycle", "bandwidth_gbps",
             "gm_bandwidth_gbps", "chip_bandwidth_gbps", "l2_bandwidth_gbps", "slot_kib",
             "ub_kib", "l1_kib", "l0a_kib", "l0b_kib", "l0c_kib", "mte2_gbps", "mte3_gbps", "fixpipe_gbps",
             "align_bytes", "vec_repeat_bytes", "mte1_l0a_bytes_per_cycle", "mte1_l0b_bytes_per_cycle",
             "gm_l1_bytes_per_cycle", "gm_ub_bytes_per_cycle", "ub_gm_bytes_per_cycle", "fixpipe_bytes_per_cycle"}
# Fields whose infinity means "not modelled" (no contention, no capacity limit); every other must be finite.
_MAY_BE_INF = {"memory.gm_bandwidth_gbps", "memory.chip_bandwidth_gbps", "memory.l2_bandwidth_gbps",
               *(f"core.{n}_kib" for n in ("ub", "l1", "l0a", "l0b", "l0c")), "core.mte2_gbps", "core.mte3_gbps",
               "core.fixpipe_gbps"}
# The values the model accepts, by 'section.field' or by field name (default [0, 1e9]): generous bounds
# around any chip (a 1 s sync, a 100 GHz clock), tight enough that nothing overflows or rounds to zero.
_LIMITS = {
    # rates and capacities that divide: >= 1e-3 of their unit, so that no time or tile count overflows
    **{name: (1e-3, 1e9) for name in _POSITIVE},
    "chip.ai_cores": (1, 4096), "chip.vec_per_core": (1, 64), "clock_ghz": (1e-3, 100.0),
    "launch_overhead_us": (0.0, 1e6), "barrier_us": (0.0, 1e6), "sync.latency_us": (0.0, 1e6),
    "workspace.slots": (1, 1024), "core.buffer_num": (1, 64), "align_bytes": (1e-3, 65536.0),
}
