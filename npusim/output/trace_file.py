"""Writing a Chrome trace: its size estimated before it is written, and a cut to a time window.

A trace of v6 over 32 heads x 16384 tokens is ~150 MB; `estimate_bytes` counts the events and the bytes of
a sample of them, so that a command line can warn before it writes (`LARGE_BYTES`), and `window` keeps the
events that overlap [start, end] us (metadata always: names and sort orders of processes and threads)."""
from __future__ import annotations

import json
import math
from pathlib import Path

from npusim.output import files

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
    def keep(e: dict) -> bool:
        if e.get("ph") == "M" or "ts" not in e:
            return True
        t0 = e["ts"]
        return t0 <= end and t0 + e.get("dur", 0.0) >= start
    kept = [e for e in trace["traceEvents"] if keep(e)]
    meta = {**trace.get("metadata", {}), "window_us": [start, None if math.isinf(end) else end]}
    return {**trace, "traceEvents": kept, "metadata": meta}


def first_part(trace: dict, size: int, limit: int | None = None) -> tuple[dict, float]:
    """A trace estimated at `size` bytes cut to its first part of about `limit` bytes (LARGE_BYTES unless
    given): (the window from 0, its end in us), the end the start of the event that would pass the limit,
    events in time order."""
    starts = sorted(e["ts"] for e in trace["traceEvents"] if e.get("ph") != "M" and "ts" in e)
    keep = max(1, int(len(starts) * (LARGE_BYTES if limit is None else limit) / size))
    end = starts[min(keep, len(starts) - 1)]
    return window(trace, 0.0, end), end


def write(path: str | Path, trace: dict, option: str = "--trace") -> None:
    """The trace as JSON, whole or not at all (npusim/output/files.py: OutputError naming `option`)."""
    files.write_text(option, path, _dumps(trace))
