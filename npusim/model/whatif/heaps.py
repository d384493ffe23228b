"""The heaps of the compiled event model (compiled.py), in numba: SimPy's queue of timeouts, each unit's
ready nodes (oldest first), each chip-wide bandwidth's transfers under way (by end). Each lives in arrays
the caller owns, so that one sample after another reuses them.
"""
from __future__ import annotations

from typing import Any

from numba import njit

OPTS: dict[str, Any] = dict(cache=True, nogil=True, error_model="numpy", boundscheck=False)


@njit(inline="always", **OPTS)
def qpush(qt, qk, size, t, key):
    """SimPy's queue: timeouts by (time, key); the key orders ties by their order of scheduling."""
    i = size
    while i > 0:
        p = (i - 1) >> 1
        pt = qt[p]
        if pt < t or (pt == t and qk[p] < key):
            break
        qt[i] = pt
        qk[i] = qk[p]
        i = p
    qt[i] = t
    qk[i] = key
    return size + 1


@njit(inline="always", **OPTS)
def qpop(qt, qk, size):
    """The earliest timeout out of the queue (the caller read it at [0]); the new size."""
    size -= 1
    qsift(qt, qk, size, qt[size], qk[size])
    return size


@njit(inline="always", **OPTS)
def qsift(qt, qk, size, t, key):
    """(t, key) into the root of the heap of `size`, sifted down."""
    i = 0
    while True:
        a = 2 * i + 1
        if a >= size:
            break
        at = qt[a]
        ak = qk[a]
        if a + 1 < size:
            bt = qt[a + 1]
            if bt < at or (bt == at and qk[a + 1] < ak):
                a += 1
                at = bt
                ak = qk[a]
        if at > t or (at == t and ak > key):
            break
        qt[i] = at
        qk[i] = ak
        i = a
    qt[i] = t
    qk[i] = key


@njit(inline="always", **OPTS)
def hpush(h, off, size, key):
    """A min-heap of ints in h[off:off + size]: `key` onto it; the new size."""
    i = size
    while i > 0:
        p = (i - 1) >> 1
        hp = h[off + p]
        if hp <= key:
            break
        h[off + i] = hp
        i = p
    h[off + i] = key
    return size + 1


@njit(inline="always", **OPTS)
def hpop(h, off, size):
    """The smallest key out of the heap in h[off:off + size] (the caller stores size - 1)."""
    top = h[off]
    size -= 1
    key = h[off + size]
    i = 0
    while True:
        a = 2 * i + 1
        if a >= size:
            break
        ha = h[off + a]
        if a + 1 < size:
            hb = h[off + a + 1]
            if hb < ha:
                a += 1
                ha = hb
        if ha >= key:
            break
        h[off + i] = ha
        i = a
    h[off + i] = key
    return top


@njit(inline="always", **OPTS)
def epush(et, em, o, size, t, m):
    """A min-heap of (end, multiplicity) by end in et[o:], em[o:]: one onto it; the new size."""
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if et[o + p] <= t:
            break
        et[o + i] = et[o + p]
        em[o + i] = em[o + p]
        i = p
    et[o + i] = t
    em[o + i] = m
    return size + 1


@njit(inline="always", **OPTS)
def epop(et, em, o, size):
    """The multiplicity of the earliest end, out of the heap (the caller stores size - 1)."""
    m0 = em[o]
    size -= 1
    t = et[o + size]
    mv = em[o + size]
    i = 0
    while True:
        a = 2 * i + 1
        if a >= size:
            break
        if a + 1 < size and et[o + a + 1] < et[o + a]:
            a += 1
        if et[o + a] >= t:
            break
        et[o + i] = et[o + a]
        em[o + i] = em[o + a]
        i = a
    et[o + i] = t
    em[o + i] = mv
    return m0
