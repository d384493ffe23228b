"""A command line's process: Ctrl-C held, ignored or turned into one line and status 130; a closed stdout
pipe ends it with status 141 and no traceback."""
import os
import signal
import subprocess
import sys

import pytest

from npusim import command
from npusim.command import as_command, command_started, quiet_while_starting, sigint_held, sigint_ignored


def test_ctrl_c_held_until_the_block_ends():
    done = []
    with pytest.raises(KeyboardInterrupt):
        with sigint_held():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("the block went on")
    assert done == ["the block went on"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with sigint_held():
        pass                                           # no Ctrl-C: nothing raised


def test_ctrl_c_ignored_in_the_block():
    with sigint_ignored():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_unhandled_ctrl_c_is_one_line_and_status_130(capsys):
    @as_command
    def main(argv):
        raise KeyboardInterrupt
    assert main([]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("interrupted")
    assert as_command(lambda argv: 3)([]) == 3


def test_only_this_projects_commands_are_quiet_while_starting(monkeypatch):
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "pytest"], raising=False)
    quiet_while_starting()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler      # a library's user: untouched
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "npusim.calibrate"], raising=False)
    try:
        quiet_while_starting()
        assert signal.getsignal(signal.SIGINT) is command._stop_while_starting
        command_started()
        assert signal.getsignal(signal.SIGINT) is command._ctrl_c
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def test_a_command_s_first_ctrl_c_raises_and_every_later_one_is_dropped(monkeypatch):
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "npusim.calibrate"], raising=False)
    came = []
    try:
        quiet_while_starting()
        command_started()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            came.append("the first did not stop the block")
        os.kill(os.getpid(), signal.SIGINT)              # while the command stops in order: nothing raised
        os.kill(os.getpid(), signal.SIGINT)
        with sigint_held():                              # held, then dropped as the block ends
            os.kill(os.getpid(), signal.SIGINT)
        with sigint_ignored():
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    assert came == []


def test_a_ctrl_c_held_where_it_is_ignored_stays_dropped():
    with sigint_ignored():
        with sigint_held():
            os.kill(os.getpid(), signal.SIGINT)          # held, then dropped: where it came, Ctrl-C is ignored
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_a_reader_that_goes_away_ends_the_command_quietly():
    # command.py loaded by its path alone: the package's imports (numba, the models) take seconds
    script = ("import importlib.util, sys\n"
              f"spec = importlib.util.spec_from_file_location('command', {command.__file__!r})\n"
              "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
              "as_command = mod.as_command\n"
              "@as_command\n"
              "def main(argv):\n"
              "    for i in range(10 ** 6):\n"
              "        print('line', i)\n"
              "    return 0\n"
              "raise SystemExit(main([]))\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()                                # like `| head -1`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=30) == 141 and err == ""
