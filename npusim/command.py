"""A command line's process, the same for every tool: Ctrl-C while its modules import, Ctrl-C while it runs,
a reader of stdout that goes away, and signals held while something must finish whole.

    quiet_while_starting()   Ctrl-C during the imports: one line, exit status 130 (this project's commands only)
    @as_command              main(argv) -> status as the process runs it (KeyboardInterrupt, BrokenPipeError);
                             its first Ctrl-C raises KeyboardInterrupt, any later one is dropped
    sigint_held()            a Ctrl-C waits until the block ends (a report or a table written whole)
    sigint_ignored()         a Ctrl-C is dropped while the block runs (an orderly shutdown)
    workers_starting()       worker processes that never see Ctrl-C; this process gets it as the block ends
"""
from __future__ import annotations

import functools
import os
import signal
import sys
import threading
from contextlib import contextmanager

COMMANDS = ("kda-run", "kda-sweep")     # console scripts; and `python -m kda.X` / `python -m npusim.X`
_stopping = False                        # a command's process has had its Ctrl-C: a later one is dropped


def _starting_a_command() -> bool:
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if os.path.basename(sys.argv[0] if sys.argv else "") in COMMANDS:
        return True
    if "-m" in argv and argv.index("-m") + 1 < len(argv):
        return argv[argv.index("-m") + 1].split(".")[0] in ("kda", "npusim")
    return False


def quiet_while_starting() -> None:
    """While a command line's modules import (torch, dask: seconds), Ctrl-C ends the process with one line
    and exit status 130 instead of an import traceback; nothing has been computed yet. Only for this
    project's own commands, never for a program that imports the library. `command_started` restores
    Ctrl-C as KeyboardInterrupt once the command runs."""
    if not _starting_a_command() or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return                           # someone chose another handler: leave it

    signal.signal(signal.SIGINT, _stop_while_starting)


def _stop_while_starting(signum, frame):
    os.write(2, b"interrupted while starting: nothing had finished, nothing was computed\n")
    os._exit(130)


def command_started() -> None:
    """Ctrl-C raises KeyboardInterrupt again, once (`_ctrl_c`): each command then stops in order, keeping
    what it finished."""
    global _stopping
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is _stop_while_starting:
        _stopping = False
        signal.signal(signal.SIGINT, _ctrl_c)


def _ctrl_c(signum, frame):
    """A command's Ctrl-C: the first raises KeyboardInterrupt; from that moment on, before the command has
    caught it or printed anything, every later one is dropped. A second Ctrl-C (an impatient user, a
    harness that signals twice) then cuts neither the one line nor what the command keeps as it stops (a
    cache closed, a report written whole), and cannot escape as a traceback."""
    global _stopping
    if _stopping:
        return
    _stopping = True
    raise KeyboardInterrupt


def as_command(main):
    """A command line's main(argv) -> exit status as its process runs it: Ctrl-C raises KeyboardInterrupt
    again once main starts; one that main does not handle itself (it had kept nothing yet) is one line and
    exit status 130; a reader of stdout that goes away (`| head`) ends it quietly (141)."""
    @functools.wraps(main)
    def run(argv=None):
        command_started()
        try:
            try:
                code = main(argv)
                sys.stdout.flush()
            except BrokenPipeError:
                code = closed_stdout()
        except KeyboardInterrupt:
            print("interrupted: nothing had finished, nothing was printed", file=sys.stderr)
            code = 130
        finally:
            try:
                _exiting()
            except KeyboardInterrupt:    # the first Ctrl-C came as main returned: it had said all it will
                _exiting()
        return code
    return run


def _exiting() -> None:
    """A command's process has said all it will: from now on a Ctrl-C is dropped (one a library's thread
    held, one that comes while Python shuts down, after the interpreter's own handlers are gone), and the
    process ends with the status the command returned (`_forget_caught_ctrl_c`). Never for a program that
    imports the library."""
    global _stopping
    if _starting_a_command() and threading.current_thread() is threading.main_thread():
        _stopping = True
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _forget_caught_ctrl_c()


def _forget_caught_ctrl_c() -> None:
    """CPython marks a KeyboardInterrupt that leaves an exec() or eval() of source text as one nothing
    handled, even when a caller catches it, and under `python -m` then ends the process by SIGINT as it
    exits (status -2 to the parent), whatever status the command returned. dataclasses, namedtuple, numba
    and numpy.f2py run such text as they import, and the commands import some of them on first use: a
    Ctrl-C there is caught and reported like any other. An exec of source text that runs to its end clears
    the mark; no Ctrl-C can set it again once SIGINT is ignored."""
    exec("pass")


def closed_stdout() -> int:
    """The reader of stdout went away (`| head`): no traceback, no second error at exit; exit status 141
    (128 + SIGPIPE, what the shell shows for a program a closed pipe stops)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return 141


@contextmanager
def sigint_held():
    """A Ctrl-C while in the block waits until it ends (from the main thread; elsewhere nothing changes), then
    raises KeyboardInterrupt: not lost, and not in the middle of what the block writes. Python runs signal
    handlers in the main thread whichever thread the signal reaches, so a handler that notes the signal holds
    it whatever threads torch or a library started."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if came and previous is _ctrl_c:
        _ctrl_c(signal.SIGINT, None)     # a command's first Ctrl-C raises; a later one is dropped
    elif came and previous is not signal.SIG_IGN:
        raise KeyboardInterrupt


@contextmanager
def sigint_ignored():
    """SIGINT ignored while in the block (from the main thread; elsewhere nothing changes). Processes started
    in the block keep ignoring it; a second Ctrl-C does not cut a shutdown short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def workers_starting():
    """Worker processes started in the block (multiprocessing's "forkserver" method) ignore Ctrl-C for good,
    so a terminal's Ctrl-C, sent to the whole process group, reaches this process alone, which then stops
    them in order; a Ctrl-C meanwhile is held for this process (sigint_held) and raised as the block ends.
    The fork server starts with SIGINT ignored, a disposition kept across exec (a handler or a blocked mask is
    not), and passes it to every process it forks; starting it takes milliseconds. Yields the start method
    for the workers ("spawn" where there is no fork server, with Ctrl-C ignored meanwhile instead)."""
    import multiprocessing
    if threading.current_thread() is not threading.main_thread() or \
            "forkserver" not in multiprocessing.get_all_start_methods():
        with sigint_ignored():
            yield "spawn"
        return
    from multiprocessing import forkserver
    with sigint_ignored():
        forkserver.ensure_running()
    with sigint_held():
        yield "forkserver"
