"""Shared helpers: a toy profile with round numbers, and recording of small phase programs."""
from __future__ import annotations

import os
import textwrap

import pytest
import torch

from npusim import Executor, Precision, load_profile, phase_program

TOY_PROFILE = """
name = "toy"
[chip]
ai_cores = {cores}
vec_per_core = {vec}
clock_ghz = 1.0
launch_overhead_us = 0.0
[cube]
macs_per_cycle = 1000.0          # 1e6 MACs per us
fp32_macs_per_cycle = 1000.0
op_overhead_cycles = 0.0
[vector]
elems_per_cycle = 100.0          # 1e5 elements per us per Vector unit
op_overhead_cycles = 0.0
step_latency_cycles = 0.0
[sync]
latency_us = {latency}
bandwidth_gbps = 1.0             # 1000 bytes per us
[memory]
gm_bandwidth_gbps = inf
chip_bandwidth_gbps = {chip_bw}
l2_bandwidth_gbps = {l2_bw}
[workspace]
resident_kib = 1024.0
slot_kib = {slot_kib}
slots = {slots}
"""


@pytest.fixture
def toy_profile(tmp_path):
    def make(latency=1.0, slots=2, slot_kib=1024.0, cores=1, vec=1, chip_bw="inf", l2_bw="inf"):
        path = tmp_path / f"toy-{latency}-{slots}-{slot_kib}-{cores}-{vec}-{chip_bw}-{l2_bw}.toml"
        path.write_text(textwrap.dedent(TOY_PROFILE.format(latency=latency, slots=slots, slot_kib=slot_kib,
                                                           cores=cores, vec=vec, chip_bw=chip_bw, l2_bw=l2_bw)))
        return load_profile(path)
    return make


def record(program, precision: Precision | None = None, state=None, **inputs):
    """Record one chunk of `program` on the given inputs; returns the PhaseGraph."""
    ex = Executor(program, precision or Precision("fp32"))
    return ex.record(inputs, state)


@pytest.fixture(scope="session")
def seed_doc():
    return load_profile("seed-doc")


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def toy_program(resident=()):
    """The toy of the npusim tests: P (Vec) sums x [1000, 100] over its last axis, hands y [1000, 1] to Q (Cube),
    which multiplies it by w [1000, 1000] (timings by hand: tests/npusim/model/test_engine.py)."""
    @phase_program("toy", returns=("z",), resident=resident)
    def program(npu, x, w):
        with npu.vec("P"):
            y = x.sum(-1, keepdim=True)
        npu.sync(y)
        with npu.cube("Q"):
            z = y.mT @ w
        return z
    return program


# The AscendC host emulation (ascendc_stubs/), built once per session for every test file that uses it:
# tests/ascendc/test_ascendc_stubs.py (the kernels) and tests/ascendc/test_ascendc_conformance.py (the API rules).
ASCENDC_FAULTS = ("KDA_DROP_WAIT=3", "KDA_DROP_WAIT=6", "KDA_DROP_SET=4")
# kda_chunk_v5 numbers its syncs per pass (10 p + n; n = 0: the state's own hand-off; p = 1 intra, 2 state)
ASCENDC_FAULTS_V5 = ("KDA_DROP_WAIT=13", "KDA_DROP_WAIT=20", "KDA_DROP_SET=24", "KDA_DROP_BARRIER=1")
# kda_chunk_v6 numbers its syncs 10 + n (n = 0: the state's own hand-off)
ASCENDC_FAULTS_V6 = ("KDA_DROP_WAIT=13", "KDA_DROP_WAIT=10", "KDA_DROP_SET=14")


@pytest.fixture(scope="session")
def ascendc_build(tmp_path_factory):
    import shutil
    import sys
    from pathlib import Path

    if (shutil.which("g++") or shutil.which("c++")) is None or shutil.which("cmake") is None:
        why = "no C++ compiler or cmake on this machine: the AscendC host emulation cannot be built"
        if os.environ.get("CI", "").lower() in ("1", "true"):    # CI's machine has both: a skip there hides a gap
            pytest.fail(why)
        pytest.skip(why)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # ascendc_stubs/ is a folder, not a package
    from ascendc_stubs import bridge

    # KDA_ASCENDC_BUILD=DIR keeps the build between sessions (cmake rebuilds only what changed)
    where = Path(os.environ["KDA_ASCENDC_BUILD"]) if os.environ.get("KDA_ASCENDC_BUILD") else \
        tmp_path_factory.mktemp("ascendc_build")
    return bridge.build(where, ASCENDC_FAULTS, kernel_faults={"v5": ASCENDC_FAULTS_V5, "v6": ASCENDC_FAULTS_V6})


@pytest.fixture(autouse=True)
def _tables_at_their_natural_width(monkeypatch):
    """No COLUMNS: the commands' tables print at their natural width, as in a pipe, whatever started pytest (an
    xdist worker starts with COLUMNS=80; a shell may export its own). A test of COLUMNS sets it itself."""
    monkeypatch.delenv("COLUMNS", raising=False)


def pytest_configure(config):
    """Under pytest-xdist each worker takes its share of the cores for torch's threads, and so do the processes
    its tests start (command lines, notebook kernels): two workers of two threads each on two cores spin in
    each other's way (OpenMP waits by spinning) and run slower than one process alone."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        share = max(1, cores // int(workers))
        torch.set_num_threads(share)
        os.environ.setdefault("OMP_NUM_THREADS", str(share))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` (pyproject.toml) sends each test file whole to one worker, and tests/ascendc/ whole to
    one worker: its files share the AscendC emulation's build (`ascendc_build`, cmake and g++, the costliest
    fixture), which each worker would otherwise build again."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ByFileAscendcTogether(LoadFileScheduling):
        def _split_scope(self, nodeid):
            return "tests/ascendc/" if nodeid.startswith("tests/ascendc/") else super()._split_scope(nodeid)
    return ByFileAscendcTogether(config, log)
