"""Ctrl-C in a command's process, run as the user runs it (`python -m kda.run`, `python -m kda.sweep`): one line
on stderr and exit status 130, whatever the interrupt lands in and however many follow it.

The Ctrl-C comes from a design file's program, as a real SIGINT, at a chosen place: inside exec'd source text
(where numba's and numpy.f2py's imports run when a first design is timed), and again twice while the command
prints its line. No timing decides the outcome."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

DESIGN = '''
import os
import signal
import sys

from npusim import phase_program


class SignalledWhileWritten:
    """stderr that sends its own process two more Ctrl-C, back to back, as the line about the first is written."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        if "interrupted" in text:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        return self.stream.write(text)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def _program(name, twice):
    @phase_program(name, returns=("O", "S_new"), state=("S_prev", "S_new"))
    def program(npu, Q, K, V, g, beta, S_prev, scale):
        if twice:
            sys.stderr = SignalledWhileWritten(sys.stderr)
        exec("signal.raise_signal(signal.SIGINT)")      # Ctrl-C while exec'd source text runs
        with npu.vec("A"):
            O = Q * scale
            S_new = S_prev * 1.0
        return O, S_new
    return program


in_exec = _program("in_exec", twice=False)
in_exec_then_twice = _program("in_exec_then_twice", twice=True)
'''


def _run(module_argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *module_argv], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("design", ["in_exec", "in_exec_then_twice"])
def test_kda_run_interrupted_in_exec_d_text_exits_130_with_one_line(tmp_path, design):
    # CPython ends a `python -m` process by SIGINT (-2) when a KeyboardInterrupt has left an exec(), even one
    # the command caught; and a Ctrl-C while the command reports the first must not cut its line
    (tmp_path / "ctrl_c.py").write_text(textwrap.dedent(DESIGN))
    p = _run(["kda.run", "--version", f"ctrl_c.py:{design}", "--chunks", "2", "--dk", "16", "--dv", "16"], tmp_path)
    assert (p.returncode, p.stderr, p.stdout) == (130, f"interrupted at {design}: no design finished\n", "")


def test_kda_sweep_interrupted_in_exec_d_text_exits_130_with_one_line(tmp_path):
    (tmp_path / "ctrl_c.py").write_text(textwrap.dedent(DESIGN))
    (tmp_path / "spec.toml").write_text('numerics = true\n[axes]\nversion = ["ctrl_c.py:in_exec_then_twice"]\n'
                                        '[fixed]\nchunks = 2\ndk = 16\ndv = 16\n')
    p = _run(["kda.sweep", "spec.toml", "--workers", "0", "-o", "r.csv", "--quiet"], tmp_path)
    assert p.returncode == 130 and p.stdout == ""
    assert p.stderr == f"interrupted: 0 points finished, kept in {Path('r.cache.jsonl')}; run again to go on\n"
