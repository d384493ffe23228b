"""The designs' memories and pipes through kda-run: a phase that fits no tiling is one line and exit 2, and
the JSON reports each phase against its memory's capacity."""
import json

import pytest


@pytest.mark.parametrize("args, message", [
    (["--version", "v3", "--chunk-size", "3000"], "v3: Phase A (Vec) fits no tiling"),
    (["--version", "v3", "--dk", "100000"], "v3: Phase B (Cube) fits no tiling"),
    (["--version", "v4", "--capacity", "refuse"], "more than the 192 KiB UB of Vec (--capacity tile would tile it)"),
])
def test_cli_exits_2_with_one_line(capsys, args, message):
    from kda.cli.run import main
    assert main(["--no-numerics", "--chunks", "1", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_json_reports_each_phase_against_capacity(capsys):
    from kda.cli.run import main
    assert main(["--version", "v3", "--no-numerics", "--chunks", "1", "--json"]) == 0
    mem = {m["phase"]: m for m in json.loads(capsys.readouterr().out)["memory"]}
    assert set(mem) == set("ABCDEFG")
    assert mem["A"]["capacity_bytes"] == 192 * 1024 and mem["B"]["capacity_bytes"] == 512 * 1024
    assert all(m["peak_bytes"] <= m["capacity_bytes"] for m in mem.values())

