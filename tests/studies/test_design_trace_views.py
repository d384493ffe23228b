"""A multi-pass design's occupancy heat map (on the toy timings of tests/npusim/output/test_design_trace.py), and
kda-run's trace and plot of one."""
import json

import numpy as np
import pytest

from npusim.record.graph import CUBE, VEC
from tests.npusim.output.test_design_trace import design_run  # noqa: F401 (a fixture)


def test_heat_map_busy_fractions(design_run):
    """15 bins of 1 us: the Vector is busy in bins 0 and 8 (P of each pass), the Cube in 6 and 14 (Q)."""
    from kda.views.plot_occupancy import busy_fraction
    edges, vec = busy_fraction(design_run, VEC, bins=15)
    _, cube = busy_fraction(design_run, CUBE, bins=15)
    assert edges[-1] == pytest.approx(15.0) and vec.shape == (3, 15)
    want_vec, want_cube = np.zeros(15), np.zeros(15)
    want_vec[[0, 8]] = 1.0
    want_cube[[6, 14]] = 1.0
    for c in range(3):
        assert vec[c] == pytest.approx(want_vec, abs=1e-9)
        assert cube[c] == pytest.approx(want_cube, abs=1e-9)
    # bins of 2 us: half of a 1 us phase in each
    _, vec2 = busy_fraction(design_run, VEC, bins=30 // 4)
    assert vec2.sum(axis=1) * (15 / 7) == pytest.approx([2.0] * 3)


def test_cli_plot_and_trace_of_a_multi_pass_design(tmp_path, capsys):
    from kda.cli.run import main
    out, png = tmp_path / "v5.json", tmp_path / "v5.png"
    assert main(["--version", "v5", "--no-numerics", "--heads", "2", "--tokens", "256",
                 "--trace", str(out), "--plot", str(png)]) == 0
    trace = json.loads(out.read_text())
    kinds = [e["args"]["boundary"] for e in trace["traceEvents"] if e.get("cat", "").startswith("schedule,")
             and "boundary" in e["args"]]
    assert kinds == ["launch", "barrier"]
    assert png.read_bytes()[:4] == b"\x89PNG"

