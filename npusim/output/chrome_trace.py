"""A run as Chrome Trace Event JSON, for Perfetto UI, chrome://tracing and MindStudio Insight.

Layout (one process per AI core, and per run when several runs share a file):
  - a thread per unit: Cube, Vec0, Vec1, ... The Vector units split every Vector phase and run in lockstep,
    so each Vec thread shows the same slices. A phase is an X slice named like `D[c3]` (`D[s5 c3]` when
    the run has several sequences), with its ops, MACs, element ops, bytes in and out and the sequence.
  - a thread per hand-off link and direction (more lanes when hand-offs overlap there: a sync holds the
    link for bytes / bandwidth, then its fixed latency passes while the next one may already be moving).
  - workspace threads, one per ping/pong slot, with the chunk that holds it, and a counter track of the
    workspace's occupancy in KiB (resident, ping, pong).
  - where the profile gives the core's pipes: threads Cube MTE2, Cube FixPipe, Vec MTE2, Vec MTE3 with each
    tile's load or store, and counter tracks of what the phases hold in UB (per AIV) and L1 against their
    capacity (pipe_trace.py).
  - an arrow per hand-off from the producing phase to the consuming one, and one per state hand-off from
    the phase that makes the state to the next chunk's reader. A Perfetto flow binds one id per slice, and a
    phase both receives and sends, so each phase slice holds small child slices, one per arrow end (at its
    start for arrows in, at its end for arrows out, on Cube or Vec0), named with the hand-off's tensors
    and bytes; flow_out sits on the producer's child, flow_in on the consumer's (v2 flow events).

Times are in microseconds from the first node's start (the launch overhead is in the metadata, not drawn),
on a 1 ns grid. Readers that convert ts x 1000 to integer nanoseconds by truncation (Perfetto does) would
turn 0.364 into 363 ns and break the nesting of slices that touch, so every ts carries +0.1 ps; `check`
verifies the nesting both in microseconds and in the nanoseconds such a reader computes.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Sequence

from npusim.model.engine import PHASE, STATE, SYNC, Run
from npusim.record.graph import CUBE, VEC
from npusim.output.pipe_trace import chrome_events
from npusim.output import files

UNIT_NAME = {CUBE: "Cube", VEC: "Vec"}
LINK_NAME = {"link:vec->cube": "link Vec→Cube", "link:cube->vec": "link Cube→Vec"}
PID_STRIDE = 1000                  # pid = 1 + run index x PID_STRIDE + core
KIB = 1024


def build(runs: Run | Sequence[Run], labels: Sequence[str] | None = None, heads: int | None = None,
          metadata: dict | None = None) -> dict:
    """The trace of one run or several (e.g. one per version, each its own group of processes).

    labels: a name per run (default: the program name, and "serial" for a serial run);
    heads: sequences per batch element, to give batch and head indices beside the flat sequence."""
    runs = [runs] if isinstance(runs, Run) else list(runs)
    if not runs:
        raise ValueError("no run to trace")
    for r in runs:
        if r.trace is None:
            raise ValueError("the run has no trace: simulate it with trace=True")
    labels = list(labels) if labels is not None else [_default_label(r, runs) for r in runs]
    events: list[dict] = []
    flow_ids = iter(range(1, 1 << 62))
    for v, (run, label) in enumerate(zip(runs, labels)):
        events += _run_events(run, label if len(runs) > 1 else None, v * PID_STRIDE, heads, flow_ids)
    # names first, then by time, a parent slice before the children that start with it: readers that keep
    # the file's order among equal timestamps then open the parent first
    events.sort(key=lambda e: (e["ph"] != "M", e.get("ts", 0.0), -e.get("dur", 0.0)))
    meta = {"generator": "npusim", "time_unit": "us",
            "time_origin": "0 = the first node starts; the launch overhead (launch_us) is not drawn",
            "runs": [_run_meta(r, lab) for r, lab in zip(runs, labels)]}
    if len(runs) == 1:
        meta.update({k: v for k, v in meta["runs"][0].items() if k != "label"})
    meta.update(metadata or {})
    return {"traceEvents": events, "displayTimeUnit": "ns", "metadata": meta}


def write(path: str | Path, runs: Run | Sequence[Run], **kwargs) -> dict:
    """Build the trace (see `build`) and write it as JSON; returns it."""
    trace = build(runs, **kwargs)
    files.write_text("--trace", path, json.dumps(trace, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
    return trace


# ---- building -------------------------------------------------------------------------------------------

def _default_label(run: Run, runs: list[Run]) -> str:
    return run.template.graph.program + (" serial" if run.serial else "")


def _run_meta(run: Run, label: str) -> dict:
    g = run.template.graph
    return {"label": label, "version": g.program, "profile": run.profile.name, "dtype": g.transfer_dtype,
            "mode": "serial" if run.serial else "pipelined", "chunks": run.chunks, "sequences": run.sequences,
            "cores": run.cores_used, "vector_units_per_core": run.profile.chip.vec_per_core,
            "makespan_us": run.makespan_us, "launch_us": run.profile.chip.launch_overhead_us,
            "latency_us": run.latency_us, "shapes": dict(g.shapes)}


def _ns(t_us: float) -> int:
    return int(round(t_us * 1000.0))


def _ts(ns: int) -> float:
    """A timestamp on the 1 ns grid, +0.1 ps so that truncating readers land on `ns` (module docstring)."""
    return float(f"{ns // 1000}.{ns % 1000:03d}0001") if ns >= 0 else ns / 1000.0


def _dur(ns: int) -> float:
    return ns / 1000.0


def _x(name: str, cat: str, pid: int, tid: int, s: int, e: int, args: dict, **extra) -> dict:
    return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": _ts(s), "dur": _dur(e - s),
            "args": args, **extra}


def _meta_event(kind: str, pid: int, tid: int | None, **args) -> dict:
    ev = {"name": kind, "ph": "M", "pid": pid, "args": args}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _lanes(intervals: list[tuple[int, int, object]]) -> list[tuple[int, object]]:
    """Greedy lanes so that no two intervals of one lane overlap: (lane, item) for each interval."""
    lane_end: list[int] = []
    out = []
    for s, e, item in sorted(intervals, key=lambda x: (x[0], x[1])):
        for i, end in enumerate(lane_end):
            if end <= s:
                lane_end[i] = e
                out.append((i, item))
                break
        else:
            lane_end.append(e)
            out.append((len(lane_end) - 1, item))
    return out


def _run_events(run: Run, label: str | None, pid_base: int, heads: int | None, flow_ids: Iterable[int]) -> list[dict]:
    tpl = run.template
    g = tpl.graph
    nodes = tpl.nodes
    n_vec = run.profile.chip.vec_per_core
    many = run.sequences > 1
    events = run.trace.events()
    at = {(e.seq, e.chunk, e.index): e for e in events}
    phases = {p.name: p for p in g.phases}
    syncs = {s.name: s for s in g.syncs}
    consumers = defaultdict(list)                 # node -> phase nodes that read it (same chunk)
    for nd in nodes:
        for d in nd.deps:
            consumers[d].append(nd.index)
    slot_names = _slot_names(run.slots)

    # tracks: tid per (core, track); the same tids on every core
    tids = {("unit", CUBE): 1}
    for i in range(n_vec):
        tids[("vec", i)] = 2 + i
    next_tid = 2 + n_vec
    out: list[dict] = []
    cores = sorted({e.core for e in events})
    pid_of = {c: pid_base + 1 + c for c in cores}
    mode = "serial" if run.serial else "pipelined"

    def seq_args(seq: int) -> dict:
        d = {"sequence": seq}
        if heads:
            d.update(batch=seq // heads, head=seq % heads)
        return d

    def tag(chunk: int, seq: int) -> str:
        return f"[s{seq} c{chunk}]" if many else f"[c{chunk}]"

    # hand-offs: (producer event, consumer event, label, cat, args)
    flows = []
    for e in events:
        nd = nodes[e.index]
        if nd.kind == SYNC:
            s = syncs[nd.name]
            prod = at[(e.seq, e.chunk, nd.deps[0])]
            for c in consumers[e.index]:
                rides = e.nbytes - nd.nbytes_first if e.chunk > 0 else 0
                args = {"sync": nd.label, "direction": s.direction, "tensors": list(s.tensors),
                        "bytes": e.nbytes, "state_bytes_riding": rides, "producer": s.producer,
                        "consumer": nodes[c].name, "chunk": e.chunk, **seq_args(e.seq)}
                text = f"{nd.label} {', '.join(s.tensors)}{' + S' if rides else ''} · {e.nbytes / KIB:g} KiB"
                flows.append((prod, at[(e.seq, e.chunk, c)], text, "sync", args))
    if g.state is not None:
        st = g.state
        for a, b in tpl.state_edges:
            if nodes[b].kind == PHASE:                # the same unit keeps it: no hand-off
                continue
            how = f"rides on {nodes[b].label}" if nodes[b].kind == SYNC else "its own hand-off"
            for e in events:
                if e.index != b or e.chunk == 0:
                    continue
                prod = at[(e.seq, e.chunk - 1, a)]
                for c in consumers[b]:
                    args = {"state": f"{st.output_name} -> {st.input_name}", "bytes": st.nbytes, "how": how,
                            "producer": nodes[a].name, "consumer": nodes[c].name,
                            "from_chunk": e.chunk - 1, "chunk": e.chunk, **seq_args(e.seq)}
                    text = f"S {st.output_name}→{st.input_name} · {st.nbytes / KIB:g} KiB ({how})"
                    flows.append((prod, at[(e.seq, e.chunk, c)], text, "state", args))
    ends_in, ends_out = defaultdict(list), defaultdict(list)   # phase event -> [(flow id, text, cat, args)]
    for prod, cons, text, cat, args in flows:
        fid = next(flow_ids)
        ends_out[id(prod)].append((fid, text, cat, args))
        ends_in[id(cons)].append((fid, text, cat, args))

    # phases
    for e in events:
        nd = nodes[e.index]
        if nd.kind != PHASE:
            continue
        p = phases[nd.name]
        pid, s, t = pid_of[e.core], _ns(e.start), _ns(e.end)
        sync_in = sum(at[(e.seq, e.chunk, d)].nbytes for d in nd.deps if nodes[d].kind != PHASE)
        sync_out = sum(at[(e.seq, e.chunk, c)].nbytes for c in consumers[e.index] if nodes[c].kind != PHASE)
        args = {"phase": p.name, "unit": UNIT_NAME.get(p.unit, p.unit), "chunk": e.chunk, **seq_args(e.seq),
                "ops": len(p.ops), "macs": p.macs, "element_ops": p.element_ops,
                "bytes_in": sync_in + p.gm_read_bytes, "bytes_out": sync_out + p.gm_write_bytes,
                "sync_bytes_in": sync_in, "sync_bytes_out": sync_out,
                "gm_read_bytes": p.gm_read_bytes, "gm_write_bytes": p.gm_write_bytes,
                "start_us": e.start, "end_us": e.end, "duration_us": e.end - e.start,
                "slot": slot_names[e.slot] if 0 <= e.slot < len(slot_names) else None}
        name = f"{p.name}{tag(e.chunk, e.seq)}"
        cat = f"phase,{p.unit}"
        track_tids = [tids[("unit", CUBE)]] if p.unit == CUBE else [tids[("vec", i)] for i in range(n_vec)]
        if p.unit not in (CUBE, VEC):
            track_tids = [tids.setdefault(("unit", p.unit), 100 + len(tids))]
        for i, tid in enumerate(track_tids):
            a = dict(args)
            if p.unit == VEC:
                a["vector_unit"] = f"{i} of {n_vec} (the units split the phase and run in lockstep)"
            out.append(_x(name, cat, pid, tid, s, t, a))
        out += _anchors(pid, track_tids[0], s, t, ends_in[id(e)], ends_out[id(e)])

    # hand-offs on link lanes
    link_items = defaultdict(list)
    for e in events:
        nd = nodes[e.index]
        if nd.kind == PHASE or (nd.kind == STATE and e.end <= e.start):
            continue
        link_items[(e.core, e.unit)].append((_ns(e.start), _ns(e.end), e))
    link_tids = {}
    for (core, unit) in sorted(link_items):
        for lane, e in _lanes(link_items[(core, unit)]):
            key = ("link", unit, lane)
            if key not in tids:
                tids[key] = next_tid
                next_tid += 1
            link_tids[key] = tids[key]
            nd = nodes[e.index]
            if nd.kind == SYNC:
                s_ = syncs[nd.name]
                args = {"sync": nd.label, "tensors": list(s_.tensors), "bytes": e.nbytes,
                        "state_bytes_riding": e.nbytes - nd.nbytes_first if e.chunk > 0 else 0,
                        "producer": s_.producer, "consumer": s_.consumer}
            else:
                args = {"state": f"{g.state.output_name} -> {g.state.input_name}", "bytes": e.nbytes}
            args.update(chunk=e.chunk, **seq_args(e.seq), transfer_us=e.busy_end - e.start,
                        latency_us=e.end - e.busy_end, start_us=e.start, end_us=e.end)
            out.append(_x(f"{nd.label}{tag(e.chunk, e.seq)}", f"handoff,{nd.kind}", pid_of[core], tids[key],
                          _ns(e.start), _ns(e.end), args))

    # workspace: which chunk holds each slot, and the occupancy counter
    ws_tids = {}
    if tpl.slot_release is not None:
        for i, name in enumerate(slot_names):
            ws_tids[i] = next_tid + i
        next_tid += len(slot_names)
        for e in events:
            if e.index != tpl.slot_release:
                continue
            first = at[(e.seq, e.chunk, 0)]
            slot = max(e.slot, 0)
            args = {"chunk": e.chunk, **seq_args(e.seq), "slot": slot_names[slot] if not run.serial else "serial",
                    "from_us": first.start, "to_us": e.end}
            out.append(_x(f"c{e.chunk}" if not many else f"s{e.seq} c{e.chunk}", "workspace", pid_of[e.core],
                          ws_tids[slot], _ns(first.start), _ns(e.end), args))
    out += _counters(run, pid_of, slot_names, next_tid)
    pipe_events, pipe_names = chrome_events(run, pid_of, next_tid + 1, _x, _ns, _ts)    # MTE / FixPipe rows
    out += pipe_events

    # names
    title = f"{g.program} · {run.profile.name} · {g.transfer_dtype} · {mode}"
    for c in cores:
        pid = pid_of[c]
        pname = f"{label} · AI core {c} ({run.profile.name} · {g.transfer_dtype} · {mode})" if label else \
            f"AI core {c} · {title}"
        out.append(_meta_event("process_name", pid, None, name=pname))
        out.append(_meta_event("process_sort_index", pid, None, sort_index=pid))
        out.append(_meta_event("process_labels", pid, None, labels=title))
        names = {tids[("unit", CUBE)]: "Cube"}
        names.update({tids[("vec", i)]: f"Vec{i}" for i in range(n_vec)})
        for (kind, *rest), tid in tids.items():
            if kind == "link" and tid in link_tids.values():
                unit, lane = rest
                names[tid] = LINK_NAME.get(unit, unit) + (f" #{lane + 1}" if lane else "")
            elif kind == "unit" and rest[0] not in (CUBE,):
                names[tid] = UNIT_NAME.get(rest[0], rest[0])
        for i, tid in ws_tids.items():
            names[tid] = f"workspace {slot_names[i]}" if not run.serial else "workspace (serial: one chunk)"
        names.update(pipe_names)
        for tid, tname in sorted(names.items()):
            out.append(_meta_event("thread_name", pid, tid, name=tname))
            out.append(_meta_event("thread_sort_index", pid, tid, sort_index=tid))
    return out


def _slot_names(slots: int) -> list[str]:
    base = ["ping", "pong"]
    return [base[i] if i < 2 else f"slot{i}" for i in range(max(slots, 1))]


def _anchors(pid: int, tid: int, s: int, t: int, ins: list, outs: list) -> list[dict]:
    """Child slices of a phase slice that carry its arrow ends: arrows in at its start, arrows out at its
    end, each on its own child (a slice binds one flow). They stay 1 ns inside the phase's end."""
    m = len(ins) + len(outs)
    if not m:
        return []
    d = t - s
    w = max(0, min((d - 1) // m, max(1, d // 4))) if d > 1 else 0
    evs = []
    for i, (fid, text, cat, args) in enumerate(ins):
        a = s + i * w
        evs.append(_x(f"→ {text}", f"flow-in,{cat}", pid, tid, a, a + w, {**args, "end": "in"},
                      bind_id=fid, flow_in=True))
    for j, (fid, text, cat, args) in enumerate(outs):
        b = (t - 1 - j * w) if w else s
        evs.append(_x(f"{text} →", f"flow-out,{cat}", pid, tid, b - w, b, {**args, "end": "out"},
                      bind_id=fid, flow_out=True))
    return evs


def _counters(run: Run, pid_of: dict[int, int], slot_names: list[str], tid: int) -> list[dict]:
    resident = {c: run.template.resident_bytes / KIB * max(run.lanes(c), 1) for c in pid_of}   # one a lane
    values: dict[int, dict[str, float]] = {c: {"resident": resident[c], **{n: 0.0 for n in slot_names}}
                                           for c in pid_of}
    samples: dict[tuple[int, int], dict[str, float]] = {}
    for c in pid_of:
        samples[(c, 0)] = dict(values[c])
    for t, core, slot, nbytes in sorted(run.trace.occupancy, key=lambda x: x[0]):
        if core not in values:
            continue
        values[core][slot_names[min(slot, len(slot_names) - 1)]] = nbytes / KIB
        samples[(core, _ns(t))] = dict(values[core])       # the last value at an instant wins
    end = _ns(run.makespan_us)
    for c in pid_of:
        samples.setdefault((c, end), dict(values[c]))
    out, last = [], {}
    for (c, ns), v in sorted(samples.items()):
        if last.get(c) != v or ns == end:                  # only changes, and the end of the run
            out.append({"name": "workspace KiB", "ph": "C", "pid": pid_of[c], "tid": tid, "ts": _ts(ns), "args": v})
        last[c] = v
    return out


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
