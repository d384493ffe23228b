"""Two threads for the fast replay on the CPU. The state-independent calls of a chunk (`Tape.ahead`,
npusim/record/hoist.py), the cutting of its inputs included, can run before the previous chunk is done; the
state-dependent ones (`Tape.after`) run chunk after chunk on this thread, with the emit and the inf/NaN
watch. A worker thread starts chunks ahead (at most `depth` beyond the current one); this thread, when its
next chunk has not been started yet, starts one itself rather than wait, so the two share the work.

torch's intra-op threads are shared between the two (each gets half, at least one) for the run and given
back after: on 2 cores, two threads that each run whole ops keep both cores busy, where one op split over
both cores waits at its end for the slower half (and, on a busy machine, for a core at all).
"""
from __future__ import annotations

import threading
from typing import Callable

import torch

from npusim.record.hoist import Tape


class Pipeline:
    """Chunks 1..chunks-1 started ahead; chunk 0 is the one the tape was captured on, its results given.
    `step(t, state)` finishes chunk t (in order)."""

    def __init__(self, tape: Tape, inputs_of: Callable[[int], dict], chunks: int, first: tuple,
                 depth: int = 6):
        self.tape, self.inputs_of, self.chunks, self.depth = tape, inputs_of, chunks, depth
        self.first: tuple | None = first       # chunk 0's results, handed over once
        self.cond = threading.Condition()
        self.cut = threading.Lock()            # inputs_of is called by one thread at a time
        self.ready: dict[int, list] = {}
        self.next = 1                          # the next chunk to start
        self.current = 0                       # the chunk this thread finishes next
        self.error: BaseException | None = None
        self.stopped = False
        self.threads = torch.get_num_threads()
        torch.set_num_threads(max(1, self.threads // 2))
        self.worker: threading.Thread | None = threading.Thread(target=self._work, name="npusim-replay-ahead", daemon=True)
        self.worker.start()

    def _claim(self) -> int | None:
        """The next chunk to start, or None (all started, or `depth` chunks waiting). Under `cond`."""
        if self.stopped or self.next >= self.chunks or self.next > self.current + self.depth:
            return None
        t, self.next = self.next, self.next + 1
        return t

    def _start(self, t: int) -> None:
        with self.cut:
            inputs = self.inputs_of(t)
        values = self.tape.start(inputs)
        with self.cond:
            self.ready[t] = values
            self.cond.notify_all()

    def _work(self) -> None:
        try:
            with torch.no_grad():
                while True:
                    with self.cond:
                        t = self._claim()
                        while t is None and not self.stopped and self.next < self.chunks:
                            self.cond.wait()
                            t = self._claim()
                    if t is None:
                        return
                    self._start(t)
        except BaseException as err:             # handed to this thread's step, which raises it
            with self.cond:
                self.error = err
                self.cond.notify_all()

    def step(self, t: int, state):
        """(outputs, next state, flag) of chunk t, as `Replay.eager_step` gives them."""
        if t == 0:
            first, self.first = self.first, None
            return first
        while True:
            with self.cond:
                self.current = t
                self.cond.notify_all()
                if self.error is not None:
                    raise self.error
                if t in self.ready:
                    values = self.ready.pop(t)
                    break
                claim = self._claim()
                if claim is None:                # the worker is on it
                    self.cond.wait()
                    continue
            self._start(claim)
        return self.tape.finish(values, state)

    def close(self) -> None:
        """Stop the worker (chunks it started are dropped) and give torch its threads back."""
        if self.worker is None:
            return
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
        self.worker.join()
        self.worker = None
        self.ready.clear()
        torch.set_num_threads(self.threads)
