"""Which part of a trace is built and written: a time window, or whole work items.

A `Part` is either the events that overlap [start, end] us (what --trace-window asks), or, with
`whole_items`, every event of the work items (one sequence's chunk, or one item of a pass over chunks) whose
first phase starts in [start, end], and the events that belong to no item (counters, the schedule's
slices) by the time rule. A hand-off's arrow belongs to the item of its hand-off, which is its consumer's:
in a part of whole items that starts at 0 every arrow has both ends, since a sequence's chunks start in
order.

`cut` makes the same part from a whole trace; the trace writer builds only the part (trace_events.py), and
the two agree event for event."""
from __future__ import annotations

import math
from dataclasses import dataclass

PID_STRIDE = 1000                  # pid = 1 + run index x PID_STRIDE + core


@dataclass(frozen=True)
class Part:
    """The events a trace holds (module docstring); the default is all of them."""
    start: float = 0.0
    end: float = math.inf
    whole_items: bool = False

    @property
    def everything(self) -> bool:
        return self.start <= 0.0 and math.isinf(self.end)

    def overlaps(self, ts: float, dur: float = 0.0) -> bool:
        """An event at `ts` lasting `dur` (the file's microseconds) overlaps the window."""
        return ts <= self.end and ts + dur >= self.start

    def holds_item(self, first_ts: float) -> bool:
        """A work item whose first phase starts at `first_ts` (the file's microseconds) is in the part."""
        return self.start <= first_ts <= self.end

    def metadata(self) -> dict:
        """What the written trace's metadata says about the part."""
        out: dict = {"window_us": [self.start, None if math.isinf(self.end) else self.end]}
        if self.whole_items:
            out["window"] = "whole work items whose first phase starts in window_us, their hand-offs' arrows"
        return out


def marked(trace: dict, part: Part) -> dict:
    """The trace with the part's description in its metadata."""
    return {**trace, "metadata": {**trace.get("metadata", {}), **part.metadata()}}


def cut(trace: dict, part: Part) -> dict:
    """The part of a whole trace: the events the trace writer builds when asked for only that part."""
    if not part.whole_items:
        kept = [e for e in trace["traceEvents"] if e.get("ph") == "M" or "ts" not in e
                or part.overlaps(e["ts"], e.get("dur", 0.0))]
        return marked({**trace, "traceEvents": kept}, part)
    firsts: dict[tuple, float] = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and str(e.get("cat", "")).startswith("phase"):
            key = _item(e)
            firsts[key] = min(firsts.get(key, math.inf), e["ts"])
    held = {k for k, ts in firsts.items() if part.holds_item(ts)}

    def keep(e: dict) -> bool:
        if e.get("ph") == "M" or "ts" not in e:
            return True
        args = e.get("args", {})
        if e.get("ph") == "X" and "chunk" in args and "sequence" in args:
            return _item(e) in held
        return part.overlaps(e["ts"], e.get("dur", 0.0))
    return marked({**trace, "traceEvents": [e for e in trace["traceEvents"] if keep(e)]}, part)


def _item(e: dict) -> tuple[int, int, int]:
    return ((e["pid"] - 1) // PID_STRIDE, e["args"]["sequence"], e["args"]["chunk"])
