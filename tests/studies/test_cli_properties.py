"""python -m kda.run on random option combinations and profile values (hypothesis). Every run ends
with a report (exit 0 or 1), or with one line on stderr and exit 2; never a traceback or Infinity in JSON.
Timing only and small shapes, so that each example takes well under a second."""
import json
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kda.cli.run import main
from kda.programs import DESIGNS

NUMBERS = st.sampled_from(["0", "1e-3", "0.5", "3", "1e308", "1e-308", "inf", "nan", "-1", "x"])
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
        reports = json.loads(out, parse_constant=refuse)
        for r in reports if isinstance(reports, list) else [reports]:
            if code != 2 and r.get("layer"):        # a report: its latency is a number (null: inf or NaN)
                assert isinstance(r["layer"]["latency_us"], float), (argv, r["layer"])
    assert "Traceback" not in err


def _fields() -> list[str]:
    from dataclasses import fields
    from npusim.chip.profile import _SECTIONS
    return [f"{s}.{f.name}" for s, cls in _SECTIONS.items() for f in fields(cls)]


# TOML values a chip could have (so that most runs report), and ones it could not: zero, negative, tiny,
# huge, non-finite, too big for TOML's 64-bit integers, wrong types; the table form with a source, a range
# (with and without its reason, one the value lies outside) and an unknown key
PLAUSIBLE = st.sampled_from(["1", "2", "3", "0.5", "32", "64", "1e3", "inf", '{ value = 2.0, source = "a test" }',
                             '{ value = 1.0, range = [0.5, 2.0], range_reason = "r" }'])
ABSURD = st.sampled_from([
    "0", "0.0", "-1", "-0.5", "1e-300", "1e-308", "5e-324", "1e-3", "1e6", "1e9", "1e12", "1e308", "-inf", "nan",
    "99999999999999999999", "1.5e400", '"x"', '"1.0"', "true", "[1, 2]", "{ a = 1 }", "{ value = -3 }",
    "{ value = inf }", '{ source = "no value" }', "{ value = 1.0, range = [0.5, 2.0] }",
    '{ value = 1.0, range = [0.0, 2.0], range_reason = "r" }', '{ value = 5.0, range = [0.5, 2.0], range_reason = "r" }',
    '{ value = 1.0, range = [nan, inf], range_reason = "r" }', '{ value = 1.0, unit = "us" }'])
TOML_VALUES = st.one_of(PLAUSIBLE, PLAUSIBLE, ABSURD)
PARENTS = st.sampled_from(['"seed-doc"', '"ascend-910b2"', '"base.toml"', '"./base.toml"'])
INHERITS = st.one_of(PARENTS, PARENTS, PARENTS, st.sampled_from(['"missing.toml"', '"p.toml"', '""', "1",
                                                                 '["seed-doc"]', '{ a = 1 }', None]))


@st.composite
def profiles(draw):
    """(profile file text, command line): a profile that inherits (or not) and sets a few fields, and
    --set overrides of any field, on a small timing-only run."""
    fields = _fields() + ["chip.nothing", "nothing.at_all"]
    parent = draw(INHERITS)
    lines = [f"inherits = {parent}"] if parent is not None else []
    chosen = draw(st.lists(st.sampled_from(fields), min_size=0 if parent else 1, max_size=3, unique=True))
    for section in sorted({k.split(".")[0] for k in chosen}):     # one table per section, as TOML wants
        lines.append(f"[{section}]")
        lines += [f"{k.split('.')[1]} = {draw(TOML_VALUES)}" for k in sorted(chosen) if k.startswith(section + ".")]
    argv = ["--no-numerics", "--dk", "16", "--dv", "16", "--chunks", draw(st.sampled_from(["1", "3"])),
            "--version", draw(st.sampled_from([*DESIGNS, "all"]))]
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        value = draw(st.sampled_from(["0.5", "2", "64"]) | NUMBERS | st.sampled_from(["1e-300", "-inf", ""]))
        argv += ["--set", f"{draw(st.sampled_from(fields))}={value}"]
    for flag, values in (("--heads", ["1", "4"]), ("--cores", ["1", "2"]), ("--uncertainty", ["2", "3"])):
        if draw(st.booleans()):
            argv += [flag, draw(st.sampled_from(values))]
    for flag in ("--strict", "--json", "--serial"):
        if draw(st.booleans()):
            argv.append(flag)
    return "\n".join(lines) + "\n", argv


@settings(max_examples=80, deadline=timedelta(seconds=60), derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=profiles())
@example(case=('inherits = "seed-doc"\n[memory]\nl2_bandwidth_gbps = 1e-308\n',       # one transfer outlasts a float
               ["--no-numerics", "--dk", "16", "--dv", "16", "--chunks", "3", "--heads", "4", "--json"]))
@example(case=('inherits = "seed-doc"\n[core]\nl0b_kib = 1e-308\n',              # a tile count past any int
               ["--no-numerics", "--dk", "16", "--dv", "16", "--chunks", "1"]))
def test_every_profile_value_ends_with_a_report_or_one_line(capsys, tmp_path, case):
    """A profile file with `inherits`, fields set to anything TOML can hold, and --set on top: a report, or
    one line naming the profile and field, exit 2; never a traceback, a hang or Infinity/NaN in --json."""
    text, argv = case
    (tmp_path / "base.toml").write_text('inherits = "seed-doc"\n[sync]\nlatency_us = 0.5\n')
    path = tmp_path / "p.toml"
    path.write_text(text)
    test_every_run_ends_with_a_report_or_one_line.hypothesis.inner_test(capsys, argv + ["--profile", str(path)])
