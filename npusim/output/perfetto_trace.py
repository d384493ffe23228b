"""A Chrome trace (chrome_trace.py) in Perfetto's own protobuf format, TracePacket by TracePacket, through
the `perfetto` package's trace builder (Google's Python bindings for Perfetto; an optional extra: `pip
install perfetto`); the format is Perfetto's synthetic track events (docs/how-to/traces.md gives the source).

The same events as the JSON: a process track per AI core, a track per thread under it (named, in the same
order), each slice a begin and an end on its track with its category and args (debug annotations), each
arrow a flow (`flow_ids` on the producer's end, `terminating_flow_ids` on the consumer's), each counter
series a counter track. Event names, categories and argument names are interned: written once, then
referred to by number. Times are the integer nanoseconds a Perfetto reader takes from the JSON."""
from __future__ import annotations

import importlib.util
from collections import defaultdict
from pathlib import Path

from npusim.output import files

SUFFIXES = (".pftrace", ".perfetto-trace")      # a --trace file in this format; any other is JSON
SEQUENCE = 1                       # every packet is on one trusted sequence: the interning is shared


def available() -> bool:
    """Whether the `perfetto` package (and its protobuf) can be imported."""
    return importlib.util.find_spec("perfetto") is not None


def write(path: str | Path, trace: dict, option: str = "--trace") -> None:
    """The trace as a Perfetto protobuf file, whole or not at all (files.py: OutputError naming `option`)."""
    files.write_bytes(option, path, encode(trace))


def encode(trace: dict) -> bytes:
    """The serialized Trace: the tracks first, then every event in time order."""
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder
    builder = TraceProtoBuilder()
    w = _Writer(builder)
    events = trace["traceEvents"]
    w.tracks(events)
    for ns, _, kind, ev in sorted(_timeline(events), key=lambda x: (x[0], x[1])):
        w.event(ns, kind, ev)
    return builder.serialize()


def _timeline(events: list[dict]) -> list[tuple[int, tuple, str, dict]]:
    """(ns, order, kind, event): slice ends before begins at one instant, a longer slice begun first and
    ended last (the file's order breaks ties, as the JSON's readers do), counters after the slices."""
    out: list[tuple[int, tuple, str, dict]] = []
    for i, e in enumerate(events):
        if e["ph"] == "X":
            s = int(e["ts"] * 1000)
            t = s + int(e["dur"] * 1000)
            out.append((s, (1, -(t - s), i), "B", e))
            out.append((t, (0, -s, -i) if t > s else (1, 0, i, 1), "E", e))     # an instant's end after its begin
        elif e["ph"] == "C":
            out.append((int(e["ts"] * 1000), (2, i), "C", e))
    return out


class _Writer:
    """The packets of one trace: track uuids, interned strings, and the packets as they are added."""

    def __init__(self, builder):
        from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent
        self.builder, self.TracePacket, self.TrackEvent = builder, TracePacket, TrackEvent
        self.uuids: dict[tuple, int] = {}
        self.interned: dict[str, dict[str, int]] = defaultdict(dict)
        self.first = True

    def _packet(self):
        p = self.builder.add_packet()
        p.trusted_packet_sequence_id = SEQUENCE
        if self.first:
            p.sequence_flags = self.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            self.first = False
        else:
            p.sequence_flags = self.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        return p

    def _uuid(self, key: tuple) -> int:
        return self.uuids.setdefault(key, len(self.uuids) + 1)

    def _iid(self, packet, table: str, text: str) -> int:
        """The interned id of `text` in `table` (event_names, event_categories, debug_annotation_names,
        debug_annotation_string_values), its definition added to `packet` the first time."""
        known = self.interned[table]
        if text not in known:
            known[text] = len(known) + 1
            entry = getattr(packet.interned_data, table).add()
            entry.iid = known[text]
            if table == "debug_annotation_string_values":
                entry.str = text.encode()
            else:
                entry.name = text
        return known[text]

    def tracks(self, events: list[dict]) -> None:
        """A process track per pid and a track per thread under it, named and ordered as the JSON's metadata
        names and orders them; a counter track per counter series."""
        names: dict[tuple, str] = {}
        ranks: dict[tuple, int] = {}
        threads: set[tuple] = set()
        counters: dict[tuple, None] = {}
        for e in events:
            if e["ph"] == "M":
                key = (e["pid"],) if "tid" not in e else (e["pid"], e["tid"])
                if e["name"] in ("process_name", "thread_name"):
                    names[key] = e["args"]["name"]
                elif e["name"] in ("process_sort_index", "thread_sort_index"):
                    ranks[key] = e["args"]["sort_index"]
            elif e["ph"] == "X":
                threads.add((e["pid"], e["tid"]))
            elif e["ph"] == "C":
                for series in e["args"]:
                    counters[(e["pid"], e["tid"], e["name"], series)] = None
        procs = sorted({k[0] for k in threads} | {k[0] for k in counters} | {k[0] for k in names if len(k) == 1})
        for pid in procs:
            p = self._packet()
            d = p.track_descriptor
            d.uuid = self._uuid((pid,))
            d.process.pid = pid
            d.process.process_name = names.get((pid,), f"process {pid}")
            d.sibling_order_rank = ranks.get((pid,), pid)
            d.child_ordering = 3                               # EXPLICIT: by sibling_order_rank
        for pid, tid in sorted(threads):
            self._track((pid, tid), names.get((pid, tid), f"thread {tid}"), ranks.get((pid, tid), tid))
        for pid, tid, name, series in counters:
            d = self._track((pid, tid, name, series), f"{name} {series}", ranks.get((pid, tid), tid))
            d.counter.SetInParent()

    def _track(self, key: tuple, name: str, rank: int):
        d = self._packet().track_descriptor
        d.uuid = self._uuid(key)
        d.parent_uuid = self._uuid((key[0],))
        d.name = name
        d.sibling_order_rank = rank
        return d

    def event(self, ns: int, kind: str, e: dict) -> None:
        if kind == "C":
            for series, value in e["args"].items():
                p = self._packet()
                p.timestamp = ns
                p.track_event.type = self.TrackEvent.TYPE_COUNTER
                p.track_event.track_uuid = self.uuids[(e["pid"], e["tid"], e["name"], series)]
                p.track_event.double_counter_value = float(value)
            return
        p = self._packet()
        p.timestamp = ns
        te = p.track_event
        te.track_uuid = self.uuids[(e["pid"], e["tid"])]
        if kind == "E":
            te.type = self.TrackEvent.TYPE_SLICE_END
            return
        te.type = self.TrackEvent.TYPE_SLICE_BEGIN
        te.name_iid = self._iid(p, "event_names", e["name"])
        if e.get("cat"):
            te.category_iids.append(self._iid(p, "event_categories", e["cat"]))
        if "bind_id" in e:
            (te.flow_ids if e.get("flow_out") else te.terminating_flow_ids).append(e["bind_id"])
        for name, value in e.get("args", {}).items():
            a = te.debug_annotations.add()
            a.name_iid = self._iid(p, "debug_annotation_names", name)
            _annotate(a, value, lambda text: self._iid(p, "debug_annotation_string_values", text))


def _annotate(a, value, string_iid) -> None:
    """A debug annotation's value from a JSON value (nested lists and objects as arrays and dicts; a string
    by its interned id from `string_iid`)."""
    if isinstance(value, bool):
        a.bool_value = value
    elif isinstance(value, int):
        a.int_value = value
    elif isinstance(value, float):
        a.double_value = value
    elif isinstance(value, str):
        a.string_value_iid = string_iid(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _annotate(a.array_values.add(), v, string_iid)
    elif isinstance(value, dict):
        for k, v in value.items():
            entry = a.dict_entries.add()
            entry.name = str(k)
            _annotate(entry, v, string_iid)
    elif value is None:
        a.string_value = "null"
    else:
        a.string_value = str(value)
