"""Errors the runtime raises. Each carries one line that names what is wrong and where."""


class NpuSimError(Exception):
    """Base class: `str(err)` is a complete one-line explanation for the user."""


class ProfileError(NpuSimError):
    """A hardware profile file is missing, malformed, or has a bad or missing field."""


class DataflowError(NpuSimError):
    """A phase program breaks the Cube/Vector data-flow rules (missing sync, misplaced op, ...)."""


class WorkspaceError(NpuSimError):
    """A payload does not fit its workspace region (resident region or ping/pong slot)."""


# ---- a command's process: Ctrl-C while it starts, a reader that goes away -------------------------------------
COMMANDS = ("kda-run", "kda-sweep")     # console scripts; and `python -m kda.X` / `python -m npusim.X`


def _starting_a_command() -> bool:
    import os
    import sys
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
    import signal
    import threading
    if not _starting_a_command() or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return                           # someone chose another handler: leave it

    signal.signal(signal.SIGINT, _stop_while_starting)


def _stop_while_starting(signum, frame):
    import os
    os.write(2, b"interrupted (while starting: nothing was computed)\n")
    os._exit(130)


def command_started() -> None:
    """Ctrl-C raises KeyboardInterrupt again (each command then stops in order, keeping what it finished)."""
    import signal
    import threading
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is _stop_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def as_command(main):
    """A command line's main(argv) -> exit status as its process runs it: Ctrl-C raises KeyboardInterrupt
    again once main starts; one that main does not handle itself (it had kept nothing yet) is one line and
    exit status 130; a reader of stdout that goes away (`| head`) ends it quietly (141)."""
    import functools
    import sys

    @functools.wraps(main)
    def run(argv=None):
        command_started()
        try:
            code = main(argv)
            sys.stdout.flush()
            return code
        except BrokenPipeError:
            return closed_stdout()
        except KeyboardInterrupt:
            print("interrupted: stopped before anything was printed", file=sys.stderr)
            return 130
    return run


def closed_stdout() -> int:
    """The reader of stdout went away (`| head`): no traceback, no second error at exit; exit status 141
    (128 + SIGPIPE, what the shell shows for a program a closed pipe stops)."""
    import os
    import sys
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return 141
