"""What every command line shares: the program's name as invoked, one-line errors with exit status 2,
help that shows defaults and keeps the examples' layout, a console that never cuts a table, and progress
on stderr (so that `kda-run ... > out.txt` keeps the bar on the terminal and the file clean)."""
from __future__ import annotations

import argparse
import os
import sys


def prog_name(module: str) -> str:
    """'kda-run' under the console script, 'python -m kda.run' under -m (argv[0] is then a path to a .py)."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if not name or name.endswith(".py") or name in ("-c", "-m", "python", "pytest"):
        return f"python -m {module}"
    return name


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The default after each option's help where there is one to show (not None, not a flag's False, not
    one the help already names); the description and the examples keep their line breaks."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if default in (None, False, argparse.SUPPRESS) or default == [] or "default" in text \
                or action.option_strings == [] and action.nargs is None:
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line on stderr and exit status 2."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):               # argparse would print the usage too
        raise SystemExit(fail(f"{self.prog}: {message}"))


def console(stderr: bool = False):
    """A rich console that never cuts a table (kda.views.render.make_console)."""
    from kda.views.render import make_console
    return make_console(stderr)


class progress:
    """A progress bar on stderr for long runs; silent when stderr is not a terminal or the run is short.
    `with progress(True, total) as tick: ... tick(done, total)`."""

    def __init__(self, enabled: bool, total: int, label: str = "chunks", minimum: int = 64):
        self.enabled = enabled and sys.stderr.isatty() and total >= minimum
        self.label = label
        self.total = total

    def __enter__(self):
        if not self.enabled:
            return lambda done, total: None
        from rich.progress import Progress
        self.bar = Progress(transient=True, console=console(stderr=True))
        self.bar.__enter__()
        self.task = self.bar.add_task(self.label, total=self.total)
        return self.tick

    def tick(self, done: int, total: int) -> None:
        self.bar.advance(self.task, 1)

    def __exit__(self, *exc):
        if self.enabled:
            self.bar.__exit__(*exc)
        return False


SEED_LIMIT = 2 ** 63              # torch's generators take a signed 64-bit seed


def seed_problem(seed: int, flag: str = "--seed") -> str | None:
    """The one check of a seed, for every command line: a whole number in [0, 2**63); the line saying what
    is wrong, or None."""
    if not 0 <= seed < SEED_LIMIT:
        return f"{flag} must be in [0, 2**63), got {seed}"
    return None
