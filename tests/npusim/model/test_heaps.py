"""The compiled model's heaps against Python's heapq: the same order out, ties of the timeout queue broken by
their key (the order of scheduling), as SimPy does. Called from Python: each compiles once, on small arrays."""
import heapq
import random

import numpy as np

from npusim.model.whatif.heaps import epop, epush, hpop, hpush, qpop, qpush

RNG = random.Random(7)


def test_timeout_queue_by_time_then_key():
    times = [float(RNG.randrange(6)) for _ in range(60)]             # many ties
    keys = RNG.sample(range(1000), 60)
    qt, qk = np.zeros(60), np.zeros(60, np.int64)
    size = 0
    for t, k in zip(times, keys):
        size = qpush(qt, qk, size, t, k)
    out = []
    while size:
        out.append((float(qt[0]), int(qk[0])))
        size = qpop(qt, qk, size)
    pairs = list(zip(times, keys))
    heapq.heapify(pairs)
    assert out == [heapq.heappop(pairs) for _ in range(60)]


def test_int_heap_at_an_offset():
    ints = [RNG.randrange(50) for _ in range(40)]
    h = np.full(45, -1, np.int64)
    size = 0
    for k in ints:
        size = hpush(h, 5, size, k)
    out = []
    while size:
        out.append(int(hpop(h, 5, size)))
        size -= 1
    assert out == sorted(ints)
    assert h[:5].tolist() == [-1] * 5                                 # the heap stays in h[off:]


def test_transfers_by_end_give_their_multiplicity():
    ends = list(dict.fromkeys(float(RNG.randrange(1000)) for _ in range(40)))    # distinct ends
    et, em = np.zeros(3 + len(ends)), np.zeros(3 + len(ends), np.int64)
    size = 0
    for e in ends:
        size = epush(et, em, 3, size, e, int(e) % 7)
    out = []
    while size:
        out.append(int(epop(et, em, 3, size)))
        size -= 1
    assert out == [int(e) % 7 for e in sorted(ends)]
