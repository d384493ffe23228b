"""Ctrl-C and closed pipes lose nothing and print no traceback: kda.run reports the designs that finished
and says which did not (exit 130); a command interrupted while its modules import says so in one line; a
reader that goes away (`| head`) ends a command quietly."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
SMALL = ["--no-numerics", "--chunks", "2", "--dk", "16", "--dv", "16"]


def _ctrl_c_at(monkeypatch, version: str):
    """kda.run's evaluate, with Ctrl-C pressed when `version` starts."""
    import kda.cli.run as run
    real = run.evaluate

    def evaluate(v, *args, **kwargs):
        if v == version:
            raise KeyboardInterrupt
        return real(v, *args, **kwargs)
    monkeypatch.setattr(run, "evaluate", evaluate)
    return run.main


@pytest.mark.parametrize("as_json", [False, True])
def test_ctrl_c_reports_the_designs_that_finished(monkeypatch, capsys, as_json):
    main = _ctrl_c_at(monkeypatch, "v3")
    assert main(["--version", "all", *SMALL] + (["--json"] if as_json else [])) == 130
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert lines == ["interrupted at v3: 2 of 8 designs finished (v1, v2), reported above"], err
    if as_json:
        assert [d["version"] for d in json.loads(out)] == ["v1", "v2"]      # whole JSON, the finished two
    else:
        assert "v1" in out and "v2" in out and "Traceback" not in err


def test_ctrl_c_before_any_design_finished_says_so(monkeypatch, capsys):
    main = _ctrl_c_at(monkeypatch, "v1")
    assert main(["--version", "all", *SMALL, "--json"]) == 130
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines() == ["interrupted at v1: no design finished"]


def test_ctrl_c_in_the_backward_reports_the_designs_that_finished(monkeypatch, capsys):
    import kda.cli.run_backward as rb
    from kda.cli.run import main
    from kda.programs import BACKWARD
    real = rb.evaluate_backward
    second = list(BACKWARD)[1]

    def evaluate_backward(v, *args, **kwargs):
        if v == second:
            raise KeyboardInterrupt
        return real(v, *args, **kwargs)
    monkeypatch.setattr(rb, "evaluate_backward", evaluate_backward)
    assert main(["--backward", "--version", "all", *SMALL, "--json"]) == 130
    out, err = capsys.readouterr()
    first = list(BACKWARD)[0]
    assert err.strip().splitlines() == [f"interrupted at {second}: 1 of {len(BACKWARD)} backward designs finished "
                                        f"({first}), reported above"], err
    assert [d["version"] for d in json.loads(out)] == [first]


def test_ctrl_c_in_the_uncertainty_keeps_the_report(monkeypatch, capsys):
    import kda.cli.run as run

    def propagate(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr("kda.studies.uncertainty.propagate", propagate)
    assert run.main(["--version", "v3", *SMALL, "--uncertainty", "3", "--json"]) == 130
    out, err = capsys.readouterr()
    assert json.loads(out)["version"] == "v3"
    assert err.strip().splitlines() == ["interrupted at --uncertainty: 1 of 1 designs finished (v3), reported above"]


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="needs POSIX signals")
@pytest.mark.parametrize("module", ["kda.run", "kda.sweep", "kda.validate", "npusim.calibrate"])
def test_ctrl_c_while_the_modules_import_is_one_line(tmp_path, module):
    proc = subprocess.Popen([sys.executable, "-m", module, "--help"], cwd=tmp_path, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    time.sleep(0.3)                    # torch alone takes longer than this to import
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    if proc.returncode == 0:           # a machine fast enough to start within 0.3 s: nothing to check
        pytest.skip("the command started before the signal")
    assert proc.returncode == 130 and err.decode().strip().splitlines() == [
        "interrupted while starting: nothing had finished, nothing was computed"], err.decode()


@pytest.mark.parametrize("argv", [["kda.run", "--version", "all", *SMALL, "--json"],
                                  ["kda.run", "--version", "all", *SMALL],
                                  ["kda.stability", "--versions", "v3", "--chunks", "1", "--no-thresholds", "--json"]])
def test_a_reader_that_goes_away_is_no_traceback(tmp_path, argv):
    proc = subprocess.Popen([sys.executable, "-m", *argv], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.read(20)               # `| head -c 20`
    proc.stdout.close()
    _, err = proc.communicate(timeout=300)
    assert b"Traceback" not in err and b"BrokenPipe" not in err and b"Exception ignored" not in err, err
    assert proc.returncode in (0, 1, 141)


def test_the_library_keeps_ctrl_c_as_keyboardinterrupt():
    """Only this project's own commands get the quiet Ctrl-C while they start: a program that imports the
    library keeps Python's KeyboardInterrupt."""
    code = "import signal, kda; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_the_backward_trace_is_cut_to_its_window(tmp_path):
    """--trace-window cuts the backward's trace as the forward's: every timed slice overlaps the window, and
    the metadata says which window."""
    from kda.cli.run import main
    path = tmp_path / "b.json"
    assert main(["--backward", "--version", "v6", *SMALL, "--trace", str(path), "--trace-window", "0:5"]) == 0
    trace = json.loads(path.read_text())
    timed = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    assert trace["metadata"]["window_us"] == [0.0, 5.0]
    assert timed and all(e["ts"] <= 5.0 for e in timed)
