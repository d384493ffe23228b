"""Issue 24: python -m kda.run on random option combinations and profile values (hypothesis). Every run ends
with a report (exit 0 or 1), or with one line on stderr and exit 2; never a traceback or Infinity in JSON.
Timing only and small shapes, so that each example takes well under a second."""
import json
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kda.cli.run import main
from kda.programs import DESIGNS

NUMBERS = st.sampled_from(["0", "1e-3", "0.5", "3", "1e308", "inf", "nan", "-1", "x"])
FIELDS = st.sampled_from(["sync.latency_us", "chip.clock_ghz", "core.align_bytes", "memory.l2_bandwidth_gbps",
                          "workspace.slot_kib", "chip.ai_cores", "cube.macs_per_cycle", "chip.nothing"])


@st.composite
def argvs(draw):
    argv = ["--no-numerics", "--dk", draw(st.sampled_from(["8", "16", "0"])), "--dv", "16",
            "--version", draw(st.sampled_from([*DESIGNS, "all", "v9"]))]
    size = draw(st.sampled_from(["chunks", "tokens", "seqlens", "both", "none"]))
    if size in ("chunks", "both"):
        argv += ["--chunks", draw(st.sampled_from(["1", "3", "0", "-2", "100000000"]))]
    if size in ("tokens", "both"):
        argv += ["--tokens", draw(st.sampled_from(["1", "70", "1000000000000"]))]
    if size == "seqlens":
        argv += ["--seqlens", draw(st.sampled_from(["64,130", "1,1", "5", "0,3", "1,100000000000", "a"]))]
    argv += ["--chunk-size", draw(st.sampled_from(["16", "32", "64", "24", "1", "0", "100000"]))]
    for flag, values in (("--heads", ["1", "2", "0"]), ("--cores", ["1", "24", "25", "0"]),
                         ("--interleave", ["1", "2", "0"]), ("--slot-kib", ["1", "128", "-1"])):
        if draw(st.booleans()):
            argv += [flag, draw(st.sampled_from(values))]
    for _ in range(draw(st.integers(0, 2))):
        argv += ["--set", f"{draw(FIELDS)}={draw(NUMBERS)}"]
    if draw(st.booleans()):
        argv += ["--profile", draw(st.sampled_from(["seed-doc", "ascend-910b2", "nope", "missing.toml"]))]
    for flag in ("--strict", "--json", "--serial"):
        if draw(st.booleans()):
            argv.append(flag)
    if draw(st.booleans()):
        argv += ["--states", "store"]
    return argv


@settings(max_examples=30, deadline=timedelta(seconds=60), derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(argv=argvs())
def test_every_run_ends_with_a_report_or_one_line(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as exit_:                  # argparse's own refusals
        code = exit_.code
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), (argv, code)
    if code == 2:
        lines = err.strip().splitlines()
        assert lines and all(x.startswith("error:") for x in lines), (argv, err)
        if not out.strip():                      # a refusal before anything ran: exactly one line
            assert len(lines) == 1, (argv, err)
    if "--json" in argv and out.strip():
        def refuse(name):
            raise AssertionError(f"{name} in the JSON of {argv}")
        json.loads(out, parse_constant=refuse)
    assert "Traceback" not in err
