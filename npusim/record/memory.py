"""Freed memory kept for reuse by the C allocator (glibc), for the numerics on the CPU.

Each chunk step makes some hundred tensors of up to a few MiB and frees them. glibc's malloc hands blocks
that large to the system when they are freed (mmap, and trimming the top of the heap), so the next chunk
gets fresh pages and faults on each one (4 KiB, zeroed by the kernel): on this machine a 512 KiB bf16
rounding then took 270 us instead of 90 us (README, "Measured on this machine"). `keep_freed_memory`
raises both thresholds, so freed blocks stay in the process and are reused, as jemalloc or tcmalloc
would do. The numbers are the same bits; the process keeps its peak memory until it exits.

It changes the allocator of the whole process, so the library does not call it on its own: the CLI
(`python -m kda.run`) and the benchmarks do; `import npusim; npusim.keep_freed_memory()` in a script.
"""
from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3       # glibc's malloc.h
MMAP_MAX = 32 << 20            # glibc's largest mmap threshold (64-bit): blocks below it come from the heap
TRIM = 1 << 30                 # and the heap's top is handed back only past 1 GiB free


def keep_freed_memory() -> bool:
    """Raise glibc's mmap threshold to its largest (32 MiB) and its trim threshold to 1 GiB; False where the
    C library is not glibc or refuses."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_MAX)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM))
