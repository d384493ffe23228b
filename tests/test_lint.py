"""The habits in CI: ruff is clean on kda/ and npusim/, and mypy's error count on them never rises.

The count that may not be exceeded is committed in .mypy-count. When a change brings the count down, the test
warns: lower the file to the new count in the same commit, so that the ratchet holds the gain. The dev extra
pins ruff's and mypy's versions, since a new release finds other things. mypy keeps its
cache in .mypy_cache at the repository root (a cold run takes most of a minute, a warm one seconds)."""
import importlib.util
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["kda", "npusim"]
COUNT_FILE = ROOT / ".mypy-count"

def _needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (it comes with the dev extra: pip install -e '.[dev]')")


def test_ruff_is_clean():
    _needs("ruff")
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format=concise",
                          *PACKAGES], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, f"ruff finds problems (`ruff check --fix kda npusim` fixes the sortable ones):\n" \
                                f"{out.stdout}{out.stderr}"


def _mypy_errors() -> tuple[int, str]:
    out = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache"), *PACKAGES],
                         cwd=ROOT, capture_output=True, text=True)
    if out.returncode == 0:
        return 0, out.stdout
    found = re.search(r"Found (\d+) errors? in", out.stdout)
    assert found, f"mypy did not run to its summary line:\n{out.stdout[-3000:]}{out.stderr[-3000:]}"
    return int(found.group(1)), out.stdout


def test_mypy_count_never_rises():
    _needs("mypy")
    allowed = int(COUNT_FILE.read_text().split()[0])
    count, report = _mypy_errors()
    assert count <= allowed, (f"mypy finds {count} errors on kda/ and npusim/, more than the {allowed} in "
                              f".mypy-count: type the new code (`mypy kda npusim` lists them)\n{report[-6000:]}")
    if count < allowed:
        warnings.warn(f"mypy finds {count} errors, fewer than the {allowed} in .mypy-count: write {count} into "
                      f".mypy-count so that the ratchet keeps the gain", stacklevel=1)
