"""Fixtures of the studies' tests."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    """benchmarks/designs.py and designs_why.py, imported from the benchmarks folder (not a package)."""
    sys.path.insert(0, str(BENCH))
    try:
        import designs
        import designs_why
        yield designs, designs_why
    finally:
        sys.path.remove(str(BENCH))
