"""Writing a Chrome trace: its size estimated before it is written, the part of it a large trace holds, and
a cut to a time window.

A trace of a whole layer is too large to open: `estimate_bytes` counts the events and the bytes of a sample
of them, so that a command line can warn before it writes (`LARGE_BYTES`); `first_items` picks, from the
work items' sizes (chrome_trace.item_sizes), the first whole items that stay under a limit, so that only
they are built; and `window` keeps the events that overlap [start, end] us (metadata always: names and sort
orders of processes and threads)."""
from __future__ import annotations

import json
import math
from pathlib import Path

from npusim.output import files
from npusim.output.trace_part import Part, cut

LARGE_BYTES = 100_000_000               # a trace over this gets a warning: Perfetto loads it slowly
SAMPLE = 2000                           # events whose JSON is measured to estimate the whole file


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def estimate_bytes(trace: dict) -> int:
    """The size of the written file, within a few per cent: events x bytes per event of an even sample."""
    events = trace["traceEvents"]
    if not events:
        return len(_dumps(trace).encode())
    step = max(1, len(events) // SAMPLE)
    sample = events[::step]
    per_event = (len(_dumps(sample).encode()) - 2) / len(sample)        # '[' and ']' once, ',' per event
    rest = len(_dumps({**trace, "traceEvents": []}).encode())
    return int(rest + per_event * len(events))


def parse_window(text: str) -> tuple[float, float]:
    """'0:200' -> (0, 200); '500:' -> (500, inf); ValueError with one line naming what is wrong."""
    lo, sep, hi = (x.strip() for x in text.partition(":"))
    if not sep:
        raise ValueError(f"--trace-window {text!r} is not START:END in us (e.g. 0:200, or 500: to the end)")
    try:
        start = float(lo) if lo else 0.0
        end = float(hi) if hi else math.inf
    except ValueError:
        raise ValueError(f"--trace-window {text!r}: START and END must be numbers of us") from None
    if not (start >= 0 and end > start):
        raise ValueError(f"--trace-window {text!r}: needs 0 <= START < END")
    return start, end


def window(trace: dict, start: float, end: float) -> dict:
    """The trace with only the events that overlap [start, end] us; metadata events all stay."""
    return cut(trace, Part(start, end))


def first_items(items: list[tuple[float, int]], per_item: list[float], limit: int | None = None,
                fixed: int = 0) -> Part | None:
    """The part that holds the first whole work items whose bytes, after the `fixed` ones every part holds,
    stay under `limit` (LARGE_BYTES unless given), at least one; None when all of them do. `items`: (first
    phase's time, run index) in time order; `per_item`: bytes per item of each run (chrome_trace.item_sizes)."""
    limit = LARGE_BYTES if limit is None else limit
    total = float(fixed)
    for i, (ts, v) in enumerate(items):
        total += per_item[v]
        if total > limit:
            return Part(0.0, items[max(i - 1, 0)][0], whole_items=True)
    return None


def write(path: str | Path, trace: dict, option: str = "--trace") -> None:
    """The trace as JSON, whole or not at all (npusim/output/files.py: OutputError naming `option`)."""
    files.write_text(option, path, _dumps(trace))
