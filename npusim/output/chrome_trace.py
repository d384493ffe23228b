"""A run as Chrome Trace Event JSON, for Perfetto UI, chrome://tracing and MindStudio Insight: one writer for
every design, of one pass or several (trace_events.py makes the events of each pass's run).

Each run is a group of processes, one per AI core. With a design of several passes every pass is its own
group on the design's time axis, and one "schedule" process per design holds the launches, the all-core
barriers and the passes themselves, so that a pass boundary is visible in Perfetto:

    <label> · schedule        launch 20 µs | intra (chunks) | barrier 1 µs | state (sequential)
    <label> · intra · AI core 0..23     the pass's phases, hand-offs and slots
    <label> · state · AI core 0..23

A design of one pass is drawn on its pass's own time axis (from the first node's start) unless asked for
the design's (`design_axis`). In a CHUNKS pass an item is one (sequence, chunk): a slice's "sequence"
there is the item's index.
"""
from __future__ import annotations

import itertools
import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from npusim.model.engine import Run
from npusim.model.multipass import DesignRun
from npusim.model.schedule import BARRIER, CHUNKS
from npusim.model.trace import Trace
from npusim.output import files
from npusim.output.trace_events import item_firsts, meta_event, run_events, run_meta, to_ns, x_event
from npusim.output.trace_part import PID_STRIDE, Part, marked

Runs = Run | DesignRun | Sequence[Run] | Sequence[DesignRun]


def build(runs: Runs, labels: Sequence[str] | None = None, heads: int | None = None,
          metadata: dict | None = None, design_axis: bool | None = None, part: Part | None = None) -> dict:
    """The trace of one run or several (e.g. one per version, each its own group of processes): pass runs
    (`Run`), or designs' runs (`DesignRun`), drawn on the designs' time axis when `design_axis`, by default
    when one of them has several passes.

    labels: a name per run or design (default: the program or design name, and "serial" for a serial run);
    heads: sequences per batch element, to give batch and head indices beside the flat sequence;
    part: only that part of the trace (trace_part.py), built without the rest."""
    items = [runs] if isinstance(runs, (Run, DesignRun)) else list(runs)
    if not items:
        raise ValueError("no run to trace")
    if all(isinstance(x, Run) for x in items):
        trace = _runs_trace(items, labels, heads, metadata, part)
    else:
        if design_axis is None:
            design_axis = any(len(dr.passes) > 1 for dr in items)
        trace = _design_trace(items, labels, heads, part) if design_axis else \
            _runs_trace([dr.passes[0].run for dr in items], labels, heads, metadata, part)
    return trace if part is None else marked(trace, part)


def item_sizes(runs: Runs, heads: int | None = None, design_axis: bool | None = None,
               probe: int = 256) -> tuple[list[tuple[float, int]], list[float], int]:
    """What a part of whole work items of the trace `build` makes would weigh, before it is built: every
    work item as (the file's time of its first phase, the index of its pass's run), in time order; the JSON
    bytes per item of each pass's run, measured on the events of its first `probe` items; and the bytes
    every part holds (the names of processes and threads)."""
    items: list[tuple[float, int]] = []
    per_item: list[float] = []
    fixed = 0
    for v, run in enumerate(_pass_runs(runs, design_axis)):
        firsts = item_firsts(run)
        items += [(ts, v) for ts in firsts.values()]
        if not firsts:
            per_item.append(0.0)
            continue
        first = sorted(firsts, key=firsts.__getitem__)[:probe]
        events = run_events(_items_run(run, set(first)), "probe", v * PID_STRIDE, heads, itertools.count(1))
        fixed += len(_dumps([e for e in events if e["ph"] == "M"]).encode())
        per_item.append(len(_dumps([e for e in events if e["ph"] != "M"]).encode()) / len(first))
    items.sort()
    return items, per_item, fixed


def _items_run(run: Run, keys: set[tuple[int, int]]) -> Run:
    """The run with only the events of the work items `keys` (sequence, chunk), and the workspace samples
    up to their last end: a small run whose trace weighs what theirs does in the whole."""
    tr = run.traced()
    rows = [i for i, k in enumerate(zip(tr.seq, tr.chunk)) if k in keys]
    end = max(tr.end[i] for i in rows)
    small = Trace(tr.template, occupancy=[o for o in tr.occupancy if o[0] <= end])
    for i in rows:
        small.add(tr.node[i], tr.core[i], tr.seq[i], tr.chunk[i], tr.start[i], tr.busy_end[i], tr.end[i],
                  tr.nbytes[i], tr.slot[i], tr.stretch[i])
    return replace(run, trace=small, makespan_us=end)


def _pass_runs(runs: Runs, design_axis: bool | None) -> list[Run]:
    """The runs whose events `build` writes, in its order (a design's passes shifted onto its time axis)."""
    items: list = [runs] if isinstance(runs, (Run, DesignRun)) else list(runs)
    if all(isinstance(x, Run) for x in items):
        return items
    drs: list[DesignRun] = items
    if design_axis is None:
        design_axis = any(len(dr.passes) > 1 for dr in drs)
    if not design_axis:
        return [dr.passes[0].run for dr in drs]
    return [run for dr in drs for run in dr.shifted_runs()]


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def write(path: str | Path, runs: Runs, **kwargs) -> dict:
    """Build the trace (see `build`) and write it as JSON; returns it."""
    trace = build(runs, **kwargs)
    files.write_text("--trace", path, _dumps(trace))
    return trace


def _runs_trace(runs: list[Run], labels: Sequence[str] | None, heads: int | None, metadata: dict | None,
                part: Part | None = None) -> dict:
    for r in runs:
        if r.trace is None:
            raise ValueError("the run has no trace: simulate it with trace=True")
    labels = list(labels) if labels is not None else [
        r.template.graph.program + (" serial" if r.serial else "") for r in runs]
    events: list[dict] = []
    flow_ids = iter(range(1, 1 << 62))
    for v, (run, label) in enumerate(zip(runs, labels)):
        events += run_events(run, label if len(runs) > 1 else None, v * PID_STRIDE, heads, flow_ids, part)
    # names first, then by time, a parent slice before the children that start with it: readers that keep
    # the file's order among equal timestamps then open the parent first
    events.sort(key=_order)
    meta = {"generator": "npusim", "time_unit": "us",
            "time_origin": "0 = the first node starts; the launch overhead (launch_us) is not drawn",
            "runs": [run_meta(r, lab) for r, lab in zip(runs, labels)]}
    if len(runs) == 1:
        meta.update({k: v for k, v in meta["runs"][0].items() if k != "label"})
    meta.update(metadata or {})
    return {"traceEvents": events, "displayTimeUnit": "ns", "metadata": meta}


def _order(e: dict) -> tuple:
    return (e["ph"] != "M", e.get("ts", 0.0), -e.get("dur", 0.0))


def _design_trace(drs: list[DesignRun], labels: Sequence[str] | None, heads: int | None,
                  part: Part | None = None) -> dict:
    """Every pass of every design on the design's time axis, and a schedule process per design."""
    labels = list(labels) if labels is not None else [d.design.name for d in drs]
    runs, run_labels = [], []
    for dr, label in zip(drs, labels):
        for p, run in zip(dr.passes, dr.shifted_runs()):
            if run.trace is None:
                raise ValueError(f"{label}: pass {p.pass_.name!r} has no trace: replay it with trace=True")
            runs.append(run)
            run_labels.append(f"{label} · {p.pass_.name}" if len(dr.passes) > 1 else label)
    trace = _runs_trace(runs, run_labels if len(runs) > 1 else None, heads, None, part)
    pid = len(runs) * PID_STRIDE + 1
    for dr, label in zip(drs, labels):
        trace["traceEvents"] += [e for e in schedule_events(dr, label, pid) if part is None or e["ph"] == "M"
                                 or part.overlaps(e["ts"], e["dur"])]
        pid += 1
    trace["traceEvents"].sort(key=_order)
    trace["metadata"]["time_origin"] = "0 = the first launch starts: launches and barriers are drawn"
    trace["metadata"]["designs"] = [design_meta(dr, label) for dr, label in zip(drs, labels)]
    return trace


def design_meta(dr: DesignRun, label: str) -> dict:
    return {"label": label, "design": dr.design.name, "latency_us": dr.latency_us, "interleave": dr.interleave,
            "sequences": dr.sequences, "passes": [
                {"name": p.pass_.name, "layout": p.pass_.layout, "boundary": _boundary(p, i),
                 "boundary_us": p.boundary_us, "start_us": p.start_us, "end_us": p.end_us, "items": p.items,
                 "cores": p.run.cores_used} for i, p in enumerate(dr.passes)]}


def schedule_events(dr: DesignRun, label: str, pid: int) -> list[dict]:
    """Slices on one track: each boundary (launch or barrier) then its pass."""
    out = [meta_event("process_name", pid, None, name=f"{label} · schedule ({len(dr.passes)} passes)"),
           meta_event("process_sort_index", pid, None, sort_index=-1),
           meta_event("thread_name", pid, 1, name="passes")]
    for i, p in enumerate(dr.passes):
        kind = _boundary(p, i)
        b0 = p.start_us - p.boundary_us
        if p.boundary_us > 0:
            out.append(x_event(f"{kind} {p.boundary_us:g} µs", f"schedule,{kind}", pid, 1, to_ns(b0),
                               to_ns(p.start_us), {"boundary": kind, "before_pass": p.pass_.name, "us": p.boundary_us}))
        what = "items over all cores" if p.pass_.layout == CHUNKS else "chunks in order per sequence"
        out.append(x_event(f"{p.pass_.name} ({p.pass_.layout})", "schedule,pass", pid, 1, to_ns(p.start_us),
                           to_ns(p.end_us), {"pass": p.pass_.name, "layout": p.pass_.layout, "work": what,
                                             "items": p.items, "cores": p.run.cores_used,
                                             "duration_us": p.run.makespan_us}))
    return out


def _boundary(p, i: int) -> str:
    return "barrier" if (i and p.pass_.boundary == BARRIER) else "launch"


# ---- checking -------------------------------------------------------------------------------------------

def check(trace: dict) -> list[str]:
    """Structural problems that would make Perfetto warn or draw wrongly; [] when there are none.

    - every event has ph, pid, name; X slices have ts >= 0 and dur >= 0 (numbers);
    - slices on one thread nest (no partial overlaps), in microseconds and in the integer nanoseconds a
      reader truncating ts x 1000 and dur x 1000 gets; of slices starting together, the longer comes first;
    - every bind_id has exactly one flow_out end and one flow_in end, the out end starting first."""
    problems: list[str] = []
    evs = trace.get("traceEvents")
    if not isinstance(evs, list):
        return ["traceEvents is not a list"]
    slices = defaultdict(list)
    ends = defaultdict(lambda: {"out": [], "in": []})
    for i, ev in enumerate(evs):
        if not isinstance(ev, dict) or "ph" not in ev or "pid" not in ev or "name" not in ev:
            problems.append(f"event {i}: missing ph, pid or name")
            continue
        if ev["ph"] == "X":
            ts, dur = ev.get("ts"), ev.get("dur")
            if not all(isinstance(x, (int, float)) and x >= 0 for x in (ts, dur)):
                problems.append(f"event {i} {ev['name']}: bad ts/dur {ts!r}/{dur!r}")
                continue
            slices[(ev["pid"], ev.get("tid"))].append((ts, dur, i))
            if "bind_id" in ev:
                fo, fi = bool(ev.get("flow_out")), bool(ev.get("flow_in"))
                if fo == fi:
                    problems.append(f"event {i} {ev['name']}: bind_id with flow_out={fo} and flow_in={fi}")
                ends[ev["bind_id"]]["out" if fo else "in"].append((int(ts * 1000), i))
        elif ev["ph"] == "C" and not isinstance(ev.get("args"), dict):
            problems.append(f"event {i}: counter without args")
    for track, lst in slices.items():
        for unit, conv in (("us", lambda ts, dur: (ts, ts + dur)),
                           ("ns", lambda ts, dur: (int(ts * 1000), int(ts * 1000) + int(dur * 1000)))):
            stack: list[tuple[float, float, int]] = []
            for s, e, i in sorted(((*conv(ts, dur), i) for ts, dur, i in lst), key=lambda x: (x[0], -x[1])):
                s_, e_ = (s, e) if unit == "ns" else (s + 1e-9, e - 1e-9)   # us: float noise is no overlap
                while stack and stack[-1][1] <= s_:
                    stack.pop()
                if stack and e_ > stack[-1][1]:
                    problems.append(f"thread {track}: {evs[i]['name']} [{s}, {e}) partially overlaps "
                                    f"{evs[stack[-1][2]]['name']} (ends {stack[-1][1]}) ({unit})")
                    continue
                stack.append((s, e, i))
    for track, lst in slices.items():                    # file order among equal starts: parents first
        first_at: dict[float, tuple[float, int]] = {}
        for ts, dur, i in lst:
            if ts in first_at and dur > first_at[ts][0]:
                problems.append(f"thread {track}: {evs[i]['name']} starts with {evs[first_at[ts][1]]['name']}, "
                                f"is longer, but comes after it in the file")
            first_at.setdefault(ts, (dur, i))
    for fid, d in ends.items():
        if len(d["out"]) != 1 or len(d["in"]) != 1:
            problems.append(f"flow {fid}: {len(d['out'])} flow_out and {len(d['in'])} flow_in ends")
        elif d["out"][0][0] >= d["in"][0][0]:
            problems.append(f"flow {fid}: the flow_in end does not start after the flow_out end")
    return problems
