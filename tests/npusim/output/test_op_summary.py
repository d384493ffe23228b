"""A simulated design in msprof's columns, against the toy schedule worked out by hand (tests/npusim/model/test_engine.py):
Vec phase P 1 us, its sync 5 us on the link, Cube phase Q 1 us; three chunks, two slots, one core:
P at 0-1, 1-2, 7-8; Q at 6-7, 10-11, 14-15. The core's span is 0-15, the Vector unit busy 3 us and the Cube
3 us; the toy chip moves no data on a pipe (GM free). The launch (the toy's 20 us) starts the pass."""
from __future__ import annotations

import csv
import io

import pytest

from npusim.model.multipass import simulate_design, templates
from npusim.model.schedule import single_pass
from npusim.output.op_summary import COLUMNS, op_summary_csv, op_summary_rows

from tests.conftest import randn, record, toy_program

X, W = randn(1, 1000, 100), randn(1, 1000, 1000, seed=1)


toy = toy_program()


def _design_run(profile, sequences: int = 1):
    design = single_pass(toy)
    tpls = templates(design, [record(toy, x=X, w=W)], profile, "ride")
    return simulate_design(design, tpls, profile, [3] * sequences, trace=True)


def test_a_core_row_holds_the_span_and_each_units_busy_time(toy_profile):
    profile = toy_profile(slots=2)
    rows = op_summary_rows(_design_run(profile), "ToyKernel")
    whole, core = rows
    assert core["block_id"] == 0 and core["Task Type"] == "MIX_AIC" and core["OP Type"] == "ToyKernel"
    assert core["Task Duration(us)"] == pytest.approx(15.0)
    assert core["Task Start Time(us)"] == pytest.approx(profile.chip.launch_overhead_us)
    assert core["aiv_vec_time(us)"] == pytest.approx(3.0) and core["aic_cube_time(us)"] == pytest.approx(3.0)
    assert core["aiv_vec_ratio"] == pytest.approx(3 / 15) and core["aic_cube_ratio"] == pytest.approx(3 / 15)
    assert core["aiv_mte2_time(us)"] == 0 and core["aic_fixpipe_ratio"] == 0
    assert whole["block_id"] == "all" and whole["Block Dim"] == 1
    assert {k: whole[k] for k in COLUMNS[4:]} == {k: core[k] for k in COLUMNS[4:]}


def test_a_pass_row_averages_its_cores(toy_profile):
    rows = op_summary_rows(_design_run(toy_profile(slots=2, cores=2), sequences=3), "ToyKernel")
    whole, cores = rows[0], rows[1:]
    # three sequences on two cores: core 0 runs two of them (busy 6 us each unit), core 1 one (3 us)
    assert [r["aiv_vec_time(us)"] for r in cores] == pytest.approx([6.0, 3.0])
    assert whole["Block Dim"] == 2 and whole["aiv_vec_time(us)"] == pytest.approx(4.5)
    assert whole["Task Duration(us)"] == pytest.approx(max(r["Task Duration(us)"] for r in cores))


def test_the_csv_has_msprofs_header_and_a_row_per_pass_and_core(toy_profile):
    text = op_summary_csv([(_design_run(toy_profile(slots=2)), "ToyKernel")])
    table = list(csv.DictReader(io.StringIO(text)))
    assert tuple(table[0]) == COLUMNS and len(table) == 2
    assert table[1]["Task Duration(us)"] == "15.000" and table[1]["aiv_vec_ratio"] == "0.2000"
