"""The Chrome Trace Event JSON events of one replayed run (chrome_trace.py puts runs and designs together).

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
  - an arrow per hand-off and per state hand-off, its ends child slices of the phases (trace_flows.py).

With a part (trace_part.py), only the part's events are made, the same ones the whole trace cut holds.

Times are in microseconds from the first node's start (the launch overhead is in the metadata, not drawn),
on a 1 ns grid. Readers that convert ts x 1000 to integer nanoseconds by truncation (Perfetto does) would
turn 0.364 into 363 ns and break the nesting of slices that touch, so every ts carries +0.1 ps; `check`
(chrome_trace.py) verifies the nesting both in microseconds and in the nanoseconds such a reader computes.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterator, TypeVar

from npusim.model.engine import PHASE, STATE, SYNC, Run
from npusim.output.pipe_trace import chrome_events
from npusim.output.trace_flows import anchors, flow_ends
from npusim.output.trace_part import Part
from npusim.record.graph import CUBE, VEC, StateSpec

UNIT_NAME = {CUBE: "Cube", VEC: "Vec"}
LINK_NAME = {"link:vec->cube": "link Vec→Cube", "link:cube->vec": "link Cube→Vec"}
KIB = 1024
NEAR_US = 0.01                     # a phase this far outside a time window has no event inside it


def run_meta(run: Run, label: str) -> dict:
    g = run.template.graph
    return {"label": label, "version": g.program, "profile": run.profile.name, "dtype": g.transfer_dtype,
            "mode": "serial" if run.serial else "pipelined", "chunks": run.chunks, "sequences": run.sequences,
            "cores": run.cores_used, "vector_units_per_core": run.profile.chip.vec_per_core,
            "makespan_us": run.makespan_us, "launch_us": run.profile.chip.launch_overhead_us,
            "latency_us": run.latency_us, "shapes": dict(g.shapes)}


def to_ns(t_us: float) -> int:
    return int(round(t_us * 1000.0))


def to_ts(ns: int) -> float:
    """A timestamp on the 1 ns grid, +0.1 ps so that truncating readers land on `ns` (module docstring)."""
    return float(f"{ns // 1000}.{ns % 1000:03d}0001") if ns >= 0 else ns / 1000.0


def _dur(ns: int) -> float:
    return ns / 1000.0


def x_event(name: str, cat: str, pid: int, tid: int, s: int, e: int, args: dict, **extra) -> dict:
    return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": to_ts(s), "dur": _dur(e - s),
            "args": args, **extra}


def meta_event(kind: str, pid: int, tid: int | None, **args) -> dict:
    ev = {"name": kind, "ph": "M", "pid": pid, "args": args}
    if tid is not None:
        ev["tid"] = tid
    return ev


_Item = TypeVar("_Item")


def _lanes(intervals: list[tuple[int, int, _Item]]) -> list[tuple[int, _Item]]:
    """Greedy lanes so that no two intervals of one lane overlap: (lane, item) for each interval."""
    lane_end: list[int] = []
    out: list[tuple[int, _Item]] = []
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


def run_events(run: Run, label: str | None, pid_base: int, heads: int | None, flow_ids: Iterator[int],
               part: Part | None = None) -> list[dict]:
    """Every event of one run, in the file's order before sorting: phases (with their arrow ends), hand-offs
    on link lanes, the workspace's slots and occupancy, the pipes, then the names of processes and threads.
    With `part`, only the events of that part (trace_part.py), the same ones that cutting the whole gives."""
    r = _RunEvents(run, label, pid_base, heads, part)
    ends_in, ends_out = flow_ends(r, flow_ids)
    out = r.phase_events(ends_in, ends_out)
    out += r.link_events()
    out += r.workspace_events()
    out += _counters(run, r.pid_of, r.slot_names, r.next_tid, part)
    pipe_events, pipe_names = chrome_events(run, r.pid_of, r.next_tid + 1, x_event, to_ns, to_ts,
                                            part=part, items=r.held)     # MTE / FixPipe
    return out + pipe_events + r.name_events(pipe_names)


def item_firsts(run: Run) -> dict[tuple[int, int], float]:
    """Each work item (sequence, chunk) of the run -> the file's time of its first phase's start."""
    firsts: dict[tuple[int, int], float] = {}
    for e in run.traced().events():                    # in time order: an item's first phase first
        if e.kind == PHASE and (e.seq, e.chunk) not in firsts:
            firsts[(e.seq, e.chunk)] = to_ts(to_ns(e.start))
    return firsts


class _RunEvents:
    """What the sections of one run's events share: its nodes and events, the tracks (a tid per track, the
    same on every core) and the processes (a pid per core)."""

    def __init__(self, run: Run, label: str | None, pid_base: int, heads: int | None, part: Part | None):
        self.run, self.label, self.heads, self.part = run, label, heads, part
        self.tpl = tpl = run.template
        self.g, self.nodes = tpl.graph, tpl.nodes
        self.n_vec = run.profile.chip.vec_per_core
        self.many = run.sequences > 1
        self.events = run.traced().events()
        self.at = {(e.seq, e.chunk, e.index): e for e in self.events}
        self.consumers: defaultdict[int, list[int]] = defaultdict(list)      # node -> phase nodes that read it (same chunk)
        for nd in self.nodes:
            for d in nd.deps:
                self.consumers[d].append(nd.index)
        self.slot_names = _slot_names(run.slots)
        self.tids: dict[tuple, int] = {("unit", CUBE): 1,
                                       **{("vec", i): 2 + i for i in range(self.n_vec)}}
        self.next_tid = 2 + self.n_vec
        self.cores = sorted({e.core for e in self.events})
        self.pid_of = {c: pid_base + 1 + c for c in self.cores}
        self.link_tids: dict = {}
        self.ws_tids: dict = {}
        self.held: set[tuple[int, int]] | None = None          # a part of whole items: the items it holds
        if part is not None and part.whole_items:
            self.held = {k for k, ts in item_firsts(run).items() if part.holds_item(ts)}

    def keep_at(self, s: int, e: int | None = None) -> bool:
        """An event from `s` to `e` ns (a counter sample: at `s`) is in the part, by the time rule."""
        return self.part is None or self.part.overlaps(to_ts(s), 0.0 if e is None else _dur(e - s))

    def keep(self, seq: int, chunk: int, s: int, e: int) -> bool:
        """An event of the work item (seq, chunk) from `s` to `e` ns is in the part."""
        if self.held is not None:
            return (seq, chunk) in self.held
        return self.keep_at(s, e)

    def keep_event(self, ev: dict) -> bool:
        """A made event is in the part, by the time rule."""
        return self.part is None or self.part.overlaps(ev["ts"], ev.get("dur", 0.0))

    def near(self, seq: int, chunk: int, start: float, end: float) -> bool:
        """Whether a phase of the item from `start` to `end` us may hold an event of the part."""
        if self.part is None:
            return True
        if self.held is not None:
            return (seq, chunk) in self.held
        return start <= self.part.end + NEAR_US and end >= self.part.start - NEAR_US

    def seq_args(self, seq: int) -> dict:
        d = {"sequence": seq}
        if self.heads:
            d.update(batch=seq // self.heads, head=seq % self.heads)
        return d

    def tag(self, chunk: int, seq: int) -> str:
        return f"[s{seq} c{chunk}]" if self.many else f"[c{chunk}]"

    def of_kind(self, kind: str) -> Iterator[tuple]:
        """(event, its node) for the events whose node is of `kind` (PHASE, SYNC, ...), in the events' order."""
        for e in self.events:
            nd = self.nodes[e.index]
            if nd.kind == kind:
                yield e, nd

    def phase_events(self, ends_in: dict, ends_out: dict) -> list[dict]:
        """A slice per phase on its unit's track (on every Vector unit for a Vector phase), with its arrow ends."""
        nodes, at, tids, n_vec, out = self.nodes, self.at, self.tids, self.n_vec, []
        phases = {p.name: p for p in self.g.phases}
        for e, nd in self.of_kind(PHASE):
            p = phases[nd.name]
            if p.unit not in (CUBE, VEC):
                tids.setdefault(("unit", p.unit), 100 + len(tids))
            if not self.near(e.seq, e.chunk, e.start, e.end):
                continue
            pid, s, t = self.pid_of[e.core], to_ns(e.start), to_ns(e.end)
            sync_in = sum(at[(e.seq, e.chunk, d)].nbytes for d in nd.deps if nodes[d].kind != PHASE)
            sync_out = sum(at[(e.seq, e.chunk, c)].nbytes for c in self.consumers[e.index] if nodes[c].kind != PHASE)
            args = {"phase": p.name, "unit": UNIT_NAME.get(p.unit, p.unit), "chunk": e.chunk, **self.seq_args(e.seq),
                    "ops": len(p.ops), "macs": p.macs, "element_ops": p.element_ops,
                    "bytes_in": sync_in + p.gm_read_bytes, "bytes_out": sync_out + p.gm_write_bytes,
                    "sync_bytes_in": sync_in, "sync_bytes_out": sync_out,
                    "gm_read_bytes": p.gm_read_bytes, "gm_write_bytes": p.gm_write_bytes,
                    "start_us": e.start, "end_us": e.end, "duration_us": e.end - e.start,
                    "slot": self.slot_names[e.slot] if 0 <= e.slot < len(self.slot_names) else None}
            name = f"{p.name}{self.tag(e.chunk, e.seq)}"
            cat = f"phase,{p.unit}"
            track_tids = [tids[("unit", CUBE)]] if p.unit == CUBE else [tids[("vec", i)] for i in range(n_vec)]
            if p.unit not in (CUBE, VEC):
                track_tids = [tids.setdefault(("unit", p.unit), 100 + len(tids))]
            for i, tid in enumerate(track_tids if self.keep(e.seq, e.chunk, s, t) else []):
                a = dict(args)
                if p.unit == VEC:
                    a["vector_unit"] = f"{i} of {n_vec} (the units split the phase and run in lockstep)"
                out.append(x_event(name, cat, pid, tid, s, t, a))
            ends = anchors(pid, track_tids[0], s, t, ends_in[id(e)], ends_out[id(e)], x_event)
            out += ends if self.held is not None else [a for a in ends if self.keep_event(a)]
        return out

    def link_events(self) -> list[dict]:
        """The hand-offs on link lanes (a lane more where they overlap on one link)."""
        nodes, tids, g, out = self.nodes, self.tids, self.g, []
        syncs = {s.name: s for s in g.syncs}
        link_items = defaultdict(list)
        for e in self.events:
            nd = nodes[e.index]
            if nd.kind == PHASE or (nd.kind == STATE and e.end <= e.start):
                continue
            link_items[(e.core, e.unit)].append((to_ns(e.start), to_ns(e.end), e))
        for (core, unit) in sorted(link_items):
            for lane, e in _lanes(link_items[(core, unit)]):
                key = ("link", unit, lane)
                if key not in tids:
                    tids[key] = self.next_tid
                    self.next_tid += 1
                self.link_tids[key] = tids[key]
                if not self.keep(e.seq, e.chunk, to_ns(e.start), to_ns(e.end)):
                    continue
                nd = nodes[e.index]
                if nd.kind == SYNC:
                    s_ = syncs[nd.name]
                    args = {"sync": nd.label, "tensors": list(s_.tensors), "bytes": e.nbytes,
                            "state_bytes_riding": e.nbytes - nd.nbytes_first if e.chunk > 0 else 0,
                            "producer": s_.producer, "consumer": s_.consumer}
                else:
                    st = _carried(g)
                    args = {"state": f"{st.output_name} -> {st.input_name}", "bytes": e.nbytes}
                args.update(chunk=e.chunk, **self.seq_args(e.seq), transfer_us=e.busy_end - e.start,
                            latency_us=e.end - e.busy_end, start_us=e.start, end_us=e.end)
                out.append(x_event(f"{nd.label}{self.tag(e.chunk, e.seq)}", f"handoff,{nd.kind}",
                                   self.pid_of[core], tids[key], to_ns(e.start), to_ns(e.end), args))
        return out

    def workspace_events(self) -> list[dict]:
        """Which chunk holds each ping/pong slot, from its first node's start to the slot's release."""
        tpl, run = self.tpl, self.run
        out: list[dict] = []
        if tpl.slot_release is None:
            return out
        for i, _ in enumerate(self.slot_names):
            self.ws_tids[i] = self.next_tid + i
        self.next_tid += len(self.slot_names)
        for e in self.events:
            if e.index != tpl.slot_release:
                continue
            first = self.at[(e.seq, e.chunk, 0)]
            if not self.keep(e.seq, e.chunk, to_ns(first.start), to_ns(e.end)):
                continue
            slot = max(e.slot, 0)
            args = {"chunk": e.chunk, **self.seq_args(e.seq),
                    "slot": self.slot_names[slot] if not run.serial else "serial",
                    "from_us": first.start, "to_us": e.end}
            out.append(x_event(f"c{e.chunk}" if not self.many else f"s{e.seq} c{e.chunk}", "workspace",
                               self.pid_of[e.core], self.ws_tids[slot], to_ns(first.start), to_ns(e.end), args))
        return out

    def name_events(self, pipe_names: dict) -> list[dict]:
        """The names and sort orders of each core's process and of its threads."""
        run, g, tids, out = self.run, self.g, self.tids, []
        mode = "serial" if run.serial else "pipelined"
        title = f"{g.program} · {run.profile.name} · {g.transfer_dtype} · {mode}"
        for c in self.cores:
            pid = self.pid_of[c]
            pname = f"{self.label} · AI core {c} ({run.profile.name} · {g.transfer_dtype} · {mode})" if self.label \
                else f"AI core {c} · {title}"
            out.append(meta_event("process_name", pid, None, name=pname))
            out.append(meta_event("process_sort_index", pid, None, sort_index=pid))
            out.append(meta_event("process_labels", pid, None, labels=title))
            names = {tids[("unit", CUBE)]: "Cube"}
            names.update({tids[("vec", i)]: f"Vec{i}" for i in range(self.n_vec)})
            for (kind, *rest), tid in tids.items():
                if kind == "link" and tid in self.link_tids.values():
                    unit, lane = rest
                    names[tid] = LINK_NAME.get(unit, unit) + (f" #{lane + 1}" if lane else "")
                elif kind == "unit" and rest[0] not in (CUBE,):
                    names[tid] = UNIT_NAME.get(rest[0], rest[0])
            for i, tid in self.ws_tids.items():
                names[tid] = f"workspace {self.slot_names[i]}" if not run.serial else "workspace (serial: one chunk)"
            names.update(pipe_names)
            for tid, tname in sorted(names.items()):
                out.append(meta_event("thread_name", pid, tid, name=tname))
                out.append(meta_event("thread_sort_index", pid, tid, sort_index=tid))
        return out


def _slot_names(slots: int) -> list[str]:
    base = ["ping", "pong"]
    return [base[i] if i < 2 else f"slot{i}" for i in range(max(slots, 1))]


def _counters(run: Run, pid_of: dict[int, int], slot_names: list[str], tid: int, part: Part | None) -> list[dict]:
    resident = {c: run.template.resident_bytes / KIB * max(run.lanes(c), 1) for c in pid_of}   # one a lane
    values: dict[int, dict[str, float]] = {c: {"resident": resident[c], **{n: 0.0 for n in slot_names}}
                                           for c in pid_of}
    samples: dict[tuple[int, int], dict[str, float]] = {}
    for c in pid_of:
        samples[(c, 0)] = dict(values[c])
    for t, core, slot, nbytes in sorted(run.traced().occupancy, key=lambda x: x[0]):
        if core not in values:
            continue
        values[core][slot_names[min(slot, len(slot_names) - 1)]] = nbytes / KIB
        if part is None or to_ts(to_ns(t)) <= part.end:        # a later sample is past the part
            samples[(core, to_ns(t))] = dict(values[core])   # the last value at an instant wins
    end = to_ns(run.makespan_us)
    for c in pid_of:
        samples.setdefault((c, end), dict(values[c]))
    out: list[dict] = []
    last: dict[int, dict] = {}
    for (c, ns), v in sorted(samples.items()):
        if (last.get(c) != v or ns == end) and (part is None or part.overlaps(to_ts(ns))):   # only changes, and the end
            out.append({"name": "workspace KiB", "ph": "C", "pid": pid_of[c], "tid": tid, "ts": to_ts(ns), "args": v})
        last[c] = v
    return out


def _carried(graph) -> StateSpec:
    """The state a state hand-off event carries (a graph without one has no such event)."""
    if graph.state is None:
        raise ValueError(f"{graph.program}: a state hand-off event in a graph that carries no state")
    return graph.state
