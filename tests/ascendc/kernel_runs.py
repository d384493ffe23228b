"""What the tests of the AscendC kernels on the host emulation share: inputs written for a runner, a run, its
outputs read back and the fp64 recurrence they are held to, the errors and races the emulation reports, and the
profile's core memories bounding a kernel."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))   # ascendc_stubs/ is a folder of the repository, not an installed package

from ascendc_stubs import bridge  # noqa: E402
from kda.driver.inputs import make_inputs  # noqa: E402
from kda.reference.parity import assert_close  # noqa: E402
from kda.reference.recurrence import naive_recurrent_kda  # noqa: E402
from npusim import load_profile  # noqa: E402

CHUNK, DK, DV = 64, 128, 128
# A kernel and its design in fp32 compute the same sums in other orders (K <= 2 d_k + C = 320 terms): a few fp32
# ulps (1.2e-7) apart, relative. 1e-5 is that with two orders of magnitude to spare, and 500x below the FLA ratio.
FP32_AGREEMENT = 1e-5


def write_inputs(d: Path, *, heads=2, chunks=4, dtype="fp32", gates="slow", gate_form="log", initial_state=True):
    """The inputs of `heads` sequences of `chunks` chunks, written for a runner into d/in."""
    x = make_inputs(1, chunks * CHUNK, heads, DK, DV, gates, 0, initial_state)
    bridge.write_inputs(d / "in", x, dtype=dtype, chunk_size=CHUNK, gate=gate_form)
    return x


def run_kernel(exe: Path, d: Path, *, aic=3, timeout_ms=2000, extra=(), **inputs):
    """The inputs (write_inputs' keywords) and the run of runner `exe` on them, its outputs in d/out."""
    x = write_inputs(d, **inputs)
    return x, bridge.run(exe, d / "in", d / "out", aic=aic, timeout_ms=timeout_ms, extra=extra)


def outputs(d: Path):
    """(the inputs' meta, the inputs, o, the final state) of a run in d."""
    m, x = bridge.read_inputs(d / "in")
    o, ht = bridge.read_outputs(d / "out", m)
    return m, x, o, ht


def reference(m, x):
    """(o, the final state) of the fp64 recurrence on the inputs."""
    return naive_recurrent_kda(x.q, x.k, x.v, x.g, x.beta, m.scale, x.initial_state, True, dtype=torch.float64)


def against_the_recurrence(d: Path):
    """o and the final state of the run in d held to the fp64 recurrence (assert_close's tolerance): (o, the final
    state, the two comparisons)."""
    m, x, o, ht = outputs(d)
    ref_o, ref_s = reference(m, x)
    return o, ht, assert_close("o", ref_o, o), assert_close("final state", ref_s, ht)


def errors(res: bridge.EmuRun) -> list[str]:
    return [f"[{e['kind']}] {e['message']}" for e in (res.report or {}).get("errors", [])]


def racing(res: bridge.EmuRun) -> set[str]:
    """The tensors the emulation reports a race on."""
    races = [e["message"] for e in res.report["errors"] if e["kind"] == "race"]
    return {m.split(" (")[1].split(")")[0] for m in races if m.startswith("race on ")}


def load_script(name: str):
    """The module of ascendc_stubs/scripts/NAME.py (the scripts of the NPU flow)."""
    spec = importlib.util.spec_from_file_location(f"ascendc_{name}", ROOT / "ascendc_stubs" / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_core_memories_bound(exe: Path, d: Path, *, dtype: str) -> None:
    """With the 910B2 profile's [core] capacities the runner plans UB with the profile's figure and the emulation
    checks UB, L1 and L0 against them; a profile with less UB than the Vector tiles need is refused by the tiling in
    one line (exit 2), one with less L1 than the two Matmul tilings take by REGIST_MATMUL_OBJ (exit 3)."""
    profile = load_profile("ascend-910b2")
    write_inputs(d, dtype=dtype)
    res = bridge.run(exe, d / "in", d / "ok", aic=3, profile=profile)
    assert res.returncode == 0 and not errors(res), errors(res) or res.stderr
    kib = 1024
    assert res.report["capacities"] == {"ub": 192 * kib, "l1": 512 * kib, "l0a": 64 * kib, "l0b": 64 * kib,
                                        "l0c": 128 * kib}   # the profile's, from CANN's A2 figures
    assert res.report["ub_plan_bytes"] <= 192 * kib and max(res.report["l1_peak_bytes"].values()) <= 512 * kib
    res = bridge.run(exe, d / "in", d / "ub", profile=profile.replace(core__ub_kib=128.0))
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0 and "Unified Buffer" in res.stderr
    res = bridge.run(exe, d / "in", d / "l1", aic=3, profile=profile.replace(core__l1_kib=256.0))
    assert res.returncode == 3
    refusals = [e["message"] for e in res.report["errors"] if e["kind"] == "api"]
    assert refusals and "REGIST_MATMUL_OBJ" in refusals[0] and "262144" in refusals[0], refusals
