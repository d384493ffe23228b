"""Deliberate bugs, one at a time (benchmarks/audit.py --sections mutants): each must fail at least one of the
tests named beside it (the files that hold the model's hand-worked checks of that code, a few seconds each),
and those tests check the model against figures worked out by hand, never a wall clock. `old` must occur
exactly once in `file`; `new` is the bug."""
from __future__ import annotations

ISA = ["tests/npusim/chip/test_isa.py", "tests/npusim/chip/test_capacity_pipes.py"]
ENGINE = ["tests/npusim/model/test_engine.py", "tests/npusim/chip/test_capacity_pipes.py"]
TEMPLATE = ["tests/npusim/model/test_engine.py", "tests/npusim/chip/test_isa.py"]
FIT = ["tests/npusim/fit/test_fit.py"]


def _m(mid, file, old, new, tests):
    return {"id": mid, "file": file, "old": old, "new": new, "tests": tests}


MUTANTS = [
    # the core's instruction and transfer tables (npusim/chip/isa.py)
    _m("isa-256-repeats", "npusim/chip/isa.py", "math.ceil(repeats / 255)", "math.ceil(repeats / 256)", ISA),
    _m("isa-l0-not-overlapped", "npusim/chip/isa.py", "if profile.core.buffer_num >= 2:",
       "if profile.core.buffer_num >= 3:", ISA),
    _m("isa-burst-every-row", "npusim/chip/isa.py", "bursts = max(rows - 1, 0) * isa.gm_burst_cycles",
       "bursts = max(rows, 0) * isa.gm_burst_cycles", ISA),
    _m("isa-store-burst-every-row", "npusim/chip/isa.py",
       "nbytes / isa.ub_gm_bytes_per_cycle + max(rows - 1, 0) * isa.gm_burst_cycles",
       "nbytes / isa.ub_gm_bytes_per_cycle + max(rows, 0) * isa.gm_burst_cycles", ISA),
    _m("isa-ln-unary", "npusim/chip/isa.py", 'EXP = set("exp exp2 expm1 log log2 log10 log1p".split())',
       'EXP = set("exp exp2 expm1 log2 log10 log1p".split())', ISA),
    # the event model (npusim/model/engine.py, template.py)
    _m("engine-ends-now-active", "npusim/model/engine.py", "while ends and ends[0][0] <= now:",
       "while ends and ends[0][0] < now:", ENGINE),
    _m("engine-class-share-one", "npusim/model/engine.py", "t = max(own_us, nbytes * (self.active + m) / self.rate)",
       "t = max(own_us, nbytes * (self.active + 1) / self.rate)", ENGINE),
    _m("engine-class-holds-one", "npusim/model/engine.py", "        self.active += m\n",
       "        self.active += 1\n", ENGINE),
    _m("template-first-sync-no-latency", "npusim/model/template.py", "delay_us=latency, delay_first_us=latency,",
       "delay_us=latency, delay_first_us=0.0,", TEMPLATE),
    _m("template-16-bit-no-cast", "npusim/model/template.py",
       "        if narrow:\n            cycles += isa.cast_cycles(profile, elements)",
       "        if False:\n            cycles += isa.cast_cycles(profile, elements)", TEMPLATE),
    # the host around a wrapper (npusim/model/host.py)
    _m("host-sync-no-wait", "npusim/model/host.py", "now = max(now, device) + h.sync_us", "now = now + h.sync_us",
       ["tests/npusim/model/test_host.py"]),
    _m("host-ctypes-as-triton", "npusim/model/host.py",
       'now += h.op_us if step.via == "ctypes" else h.launch_us', "now += h.launch_us", ["tests/npusim/model/test_host.py"]),
    _m("host-device-no-wait", "npusim/model/host.py", "device = max(device, now) + kernel_us[step.name]",
       "device = device + kernel_us[step.name]", ["tests/npusim/model/test_host.py"]),
    # the fit (npusim/fit/least_squares.py)
    _m("fit-threshold-10x", "npusim/fit/least_squares.py", "if 2 * se[j] > 0.5 * width[j]:",
       "if 2 * se[j] > 5.0 * width[j]:", FIT),
    _m("fit-dof-rows", "npusim/fit/least_squares.py", "dof = max(m - len(alive), 1)", "dof = max(m, 1)", FIT),
    # the held-out discipline
    _m("held-out-in-chip-fit", "benchmarks/calibrate_910b2.py",
       'r["kernel"] == "gdn_pto" and r["held_out"] == "no"', 'r["kernel"] == "gdn_pto"',
       ["tests/studies/test_held_out.py"]),
    _m("held-out-in-host-fit", "benchmarks/calibrate_910b2.py",
       'r["kernel"].startswith("gdn_triton") and r["held_out"] == "no"', 'r["kernel"].startswith("gdn_triton")',
       ["tests/studies/test_held_out.py"]),
    _m("held-out-in-validate-fit", "kda/studies/validate.py",
       "train = [r for r in rows if not r.held_out and not kda_kernel(r.kernel)]",
       "train = [r for r in rows if not kda_kernel(r.kernel)]", ["tests/studies/test_held_out.py"]),
    _m("held-out-in-validate-affine", "kda/studies/validate.py",
       "train = [r for r in rows if r.group == impl and not r.held_out]",
       "train = [r for r in rows if r.group == impl]", ["tests/studies/test_held_out.py"]),
    # the sweep cache (kda/sweep/cache.py)
    _m("cache-without-parent", "kda/sweep/cache.py",
       "h.update(profile_digest(parent, seen | {str(name_or_path)}).encode())", "pass",
       ["tests/studies/test_sweep.py"]),
    _m("cache-digest-unchecked", "kda/sweep/cache.py", "digest != row_digest(key, row)", "False",
       ["tests/studies/test_sweep.py"]),
    # the batched replay (npusim/record/batched.py)
    _m("batched-clobbered-not-copied", "npusim/record/batched.py", "                    v = v.clone()",
       "                    v = v", ["tests/npusim/record/test_batched.py"]),
]
