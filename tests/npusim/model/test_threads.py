"""Samples shared among threads: NPUSIM_THREADS sets how many; every item goes to exactly one part."""
import threading

import numpy as np
import pytest

from npusim.model.whatif.threads import ENV, each_part, workers


def test_workers_from_the_environment(monkeypatch):
    monkeypatch.setenv(ENV, "3")
    assert workers() == 3
    monkeypatch.setenv(ENV, "0")
    assert workers() == 1
    monkeypatch.setenv(ENV, "many")
    with pytest.raises(ValueError, match="NPUSIM_THREADS must be a whole number, got 'many'"):
        workers()
    monkeypatch.delenv(ENV)
    assert workers() >= 1


def test_parts_take_every_nth_item(monkeypatch):
    monkeypatch.setenv(ENV, "2")
    parts, lock = [], threading.Lock()

    def fn(part):
        with lock:
            parts.append(part.tolist())
    each_part(fn, np.arange(10))
    assert sorted(parts) == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]
    parts.clear()
    each_part(fn, np.arange(10), least=6)             # fewer than 6 items per thread: one part, no thread
    assert parts == [list(range(10))]
    parts.clear()
    each_part(fn, np.arange(0))
    assert parts == []
