"""The microbenchmark of the profile's ASSUMED barrier latency (ascendc_stubs/microbench/syncall_latency.cpp), on the
host emulation: it keeps the AscendC API's rules (SyncAll<false> in a mix kernel, every unit of every core
arriving) and runs as many barriers as it is asked. Its timing is for a 910B; the emulation has none."""
from __future__ import annotations

import json
import subprocess

import pytest


@pytest.mark.parametrize("repeats, cores", [(3, 4), (0, 2)])
def test_every_unit_of_every_core_meets_each_barrier(ascendc_build, tmp_path, repeats, cores):
    report = tmp_path / "r.json"
    p = subprocess.run([str(ascendc_build.syncall), str(repeats), str(cores), str(report)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    r = json.loads(report.read_text())
    assert r["errors"] == [] and r["block_dim"] == cores
    assert sum(e["op"] == "syncall" for e in r["events"]) == repeats * cores * 3     # 1 AIC + 2 AIVs per core
