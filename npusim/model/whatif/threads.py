"""Samples shared among threads: the compiled kernels (compiled.py, maxplus.py) release the GIL, so parts of
one batch of samples run side by side, one thread per core. Each part writes only its own samples' results,
so the numbers do not depend on how many threads ran them.

`NPUSIM_THREADS=N` sets the number of threads (1: none); the default is the machine's cores. The threads
live for one call only (none is left running when a process forks its workers).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

ENV = "NPUSIM_THREADS"


def workers() -> int:
    """Threads a batch may use: NPUSIM_THREADS, else the cores this process may run on."""
    text = os.environ.get(ENV, "").strip()
    if text:
        try:
            return max(1, int(text))
        except ValueError:
            raise ValueError(f"{ENV} must be a whole number, got {text!r}") from None
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:                       # not on Linux
        return max(1, os.cpu_count() or 1)


def each_part(fn: Callable[[np.ndarray], None], items: np.ndarray, least: int = 2) -> None:
    """fn(part) for parts of `items` (every `workers()`-th item each, so that slow and fast samples spread),
    in threads when there are at least `least` items per thread."""
    n = min(workers(), len(items) // max(least, 1))
    if n <= 1:
        if len(items):
            fn(items)
        return
    with ThreadPoolExecutor(max_workers=n) as pool:
        for f in [pool.submit(fn, np.ascontiguousarray(items[i::n])) for i in range(n)]:
            f.result()
