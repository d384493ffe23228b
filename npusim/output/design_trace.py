"""Chrome traces of multi-pass designs: every pass as its own group of AI-core processes on the design's
time axis, and one "schedule" process per design whose slices are the launches, the all-core barriers and
the passes themselves, so that a pass boundary is visible in Perfetto.

    <label> · schedule        launch 20 µs | intra (chunks) | barrier 1 µs | state (sequential)
    <label> · intra · AI core 0..23     the pass's phases, hand-offs and slots (chrome_trace.py)
    <label> · state · AI core 0..23

In a CHUNKS pass an item is one (sequence, chunk): a slice's "sequence" there is the item's index.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from npusim.output import chrome_trace
from npusim.output.chrome_trace import PID_STRIDE, _meta_event, _ns, _x
from npusim.model.multipass import DesignRun
from npusim.model.schedule import BARRIER, CHUNKS
from npusim.output import files


def build(design_runs: DesignRun | Sequence[DesignRun], labels: Sequence[str] | None = None,
          heads: int | None = None) -> dict:
    """The trace of one design run or several (e.g. one per design for the same shape)."""
    drs = [design_runs] if isinstance(design_runs, DesignRun) else list(design_runs)
    if not drs:
        raise ValueError("no design run to trace")
    labels = list(labels) if labels is not None else [d.design.name for d in drs]
    runs, run_labels = [], []
    for dr, label in zip(drs, labels):
        for p, run in zip(dr.passes, dr.shifted_runs()):
            if run.trace is None:
                raise ValueError(f"{label}: pass {p.pass_.name!r} has no trace: replay it with trace=True")
            runs.append(run)
            run_labels.append(f"{label} · {p.pass_.name}" if len(dr.passes) > 1 else label)
    trace = chrome_trace.build(runs, labels=run_labels if len(runs) > 1 else None, heads=heads)
    pid = len(runs) * PID_STRIDE + 1
    for dr, label in zip(drs, labels):
        trace["traceEvents"] += schedule_events(dr, label, pid)
        pid += 1
    trace["traceEvents"].sort(key=lambda e: (e["ph"] != "M", e.get("ts", 0.0), -e.get("dur", 0.0)))
    trace["metadata"]["time_origin"] = "0 = the first launch starts: launches and barriers are drawn"
    trace["metadata"]["designs"] = [design_meta(dr, label) for dr, label in zip(drs, labels)]
    return trace


def write(path: str | Path, design_runs, **kwargs) -> dict:
    trace = build(design_runs, **kwargs)
    files.write_text("--trace", path, json.dumps(trace, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
    return trace


def design_meta(dr: DesignRun, label: str) -> dict:
    return {"label": label, "design": dr.design.name, "latency_us": dr.latency_us, "interleave": dr.interleave,
            "sequences": dr.sequences, "passes": [
                {"name": p.pass_.name, "layout": p.pass_.layout, "boundary": _boundary(p, i),
                 "boundary_us": p.boundary_us, "start_us": p.start_us, "end_us": p.end_us, "items": p.items,
                 "cores": p.run.cores_used} for i, p in enumerate(dr.passes)]}


def schedule_events(dr: DesignRun, label: str, pid: int) -> list[dict]:
    """Slices on one track: each boundary (launch or barrier) then its pass."""
    out = [_meta_event("process_name", pid, None, name=f"{label} · schedule ({len(dr.passes)} passes)"),
           _meta_event("process_sort_index", pid, None, sort_index=-1),
           _meta_event("thread_name", pid, 1, name="passes")]
    for i, p in enumerate(dr.passes):
        kind = _boundary(p, i)
        b0 = p.start_us - p.boundary_us
        if p.boundary_us > 0:
            out.append(_x(f"{kind} {p.boundary_us:g} µs", f"schedule,{kind}", pid, 1, _ns(b0), _ns(p.start_us),
                          {"boundary": kind, "before_pass": p.pass_.name, "us": p.boundary_us}))
        what = "items over all cores" if p.pass_.layout == CHUNKS else "chunks in order per sequence"
        out.append(_x(f"{p.pass_.name} ({p.pass_.layout})", "schedule,pass", pid, 1, _ns(p.start_us),
                      _ns(p.end_us), {"pass": p.pass_.name, "layout": p.pass_.layout, "work": what,
                                      "items": p.items, "cores": p.run.cores_used,
                                      "duration_us": p.run.makespan_us}))
    return out


def _boundary(p, i: int) -> str:
    return "barrier" if (i and p.pass_.boundary == BARRIER) else "launch"
