"""The arrows of a pass's trace (trace_events.py makes the rest): one from each hand-off's producing phase
to its consuming one, and one per state hand-off from the phase that makes the state to the next chunk's
reader. A Perfetto flow binds one id per slice, and a phase both receives and sends, so each arrow end is a
small child slice of its phase (at its start for arrows in, at its end for arrows out), named with the
hand-off's tensors and bytes; flow_out sits on the producer's child, flow_in on the consumer's (v2 flow
events). Every arrow of the run takes an id, in one order, whichever part of the trace is built."""
from __future__ import annotations

from collections import defaultdict
from typing import Iterator

from npusim.model.engine import PHASE, SYNC
from npusim.record.graph import StateSpec

KIB = 1024


def flow_ends(r, flow_ids: Iterator[int]) -> tuple[dict, dict]:
    """Each hand-off's arrow, and each state hand-off's: phase event -> [(flow id, text, cat, args)] of
    the arrows it receives, and of those it sends; None for an arrow of a phase in the part whose other
    end is not (it still takes its place among the phase's arrow ends). Every arrow takes an id."""
    ends_in: defaultdict[int, list] = defaultdict(list)
    ends_out: defaultdict[int, list] = defaultdict(list)
    _syncs(r, flow_ids, ends_in, ends_out)
    _states(r, flow_ids, ends_in, ends_out)
    return ends_in, ends_out


def _arrow(r, fid: int, prod, cons, make, ends_in: dict, ends_out: dict) -> None:
    """Files the arrow `fid` from phase event `prod` to `cons` (its item the consumer's), its text, cat
    and args made by `make()` only where the part needs them."""
    if r.held is not None:
        if (cons.seq, cons.chunk) in r.held:
            end = (fid, *make())
            ends_out[id(prod)].append(end)
            ends_in[id(cons)].append(end)
        elif (prod.seq, prod.chunk) in r.held:
            ends_out[id(prod)].append(None)
    elif r.near(prod.seq, prod.chunk, prod.start, prod.end) or \
            r.near(cons.seq, cons.chunk, cons.start, cons.end):
        end = (fid, *make())
        ends_out[id(prod)].append(end)
        ends_in[id(cons)].append(end)


def _syncs(r, flow_ids: Iterator[int], ends_in: dict, ends_out: dict) -> None:
    at = r.at
    syncs = {s.name: s for s in r.g.syncs}
    for e, nd in r.of_kind(SYNC):
        s = syncs[nd.name]
        prod = at[(e.seq, e.chunk, nd.deps[0])]
        for c in r.consumers[e.index]:
            _arrow(r, next(flow_ids), prod, at[(e.seq, e.chunk, c)],
                   lambda e=e, nd=nd, s=s, c=c: _sync_arrow(r, e, nd, s, c), ends_in, ends_out)


def _sync_arrow(r, e, nd, s, c: int) -> tuple[str, str, dict]:
    rides = e.nbytes - nd.nbytes_first if e.chunk > 0 else 0
    args = {"sync": nd.label, "direction": s.direction, "tensors": list(s.tensors),
            "bytes": e.nbytes, "state_bytes_riding": rides, "producer": s.producer,
            "consumer": r.nodes[c].name, "chunk": e.chunk, **r.seq_args(e.seq)}
    text = f"{nd.label} {', '.join(s.tensors)}{' + S' if rides else ''} · {e.nbytes / KIB:g} KiB"
    return text, "sync", args


def _states(r, flow_ids: Iterator[int], ends_in: dict, ends_out: dict) -> None:
    st, nodes, at = r.g.state, r.nodes, r.at
    if st is None:
        return
    for a, b in r.tpl.state_edges:
        if nodes[b].kind == PHASE:                # the same unit keeps it: no hand-off
            continue
        how = f"rides on {nodes[b].label}" if nodes[b].kind == SYNC else "its own hand-off"
        for e in r.events:
            if e.index != b or e.chunk == 0:
                continue
            prod = at[(e.seq, e.chunk - 1, a)]
            for c in r.consumers[b]:
                _arrow(r, next(flow_ids), prod, at[(e.seq, e.chunk, c)],
                       lambda e=e, a=a, c=c, how=how: _state_arrow(r, st, e, a, c, how), ends_in, ends_out)


def _state_arrow(r, st: StateSpec, e, a: int, c: int, how: str) -> tuple[str, str, dict]:
    nodes = r.nodes
    args = {"state": f"{st.output_name} -> {st.input_name}", "bytes": st.nbytes, "how": how,
            "producer": nodes[a].name, "consumer": nodes[c].name,
            "from_chunk": e.chunk - 1, "chunk": e.chunk, **r.seq_args(e.seq)}
    text = f"S {st.output_name}→{st.input_name} · {st.nbytes / KIB:g} KiB ({how})"
    return text, "state", args


def anchors(pid: int, tid: int, s: int, t: int, ins: list, outs: list, x_event) -> list[dict]:
    """Child slices of a phase slice that carry its arrow ends: arrows in at its start, arrows out at its
    end, each on its own child (a slice binds one flow). They stay 1 ns inside the phase's end."""
    m = len(ins) + len(outs)
    if not m:
        return []
    d = t - s
    w = max(0, min((d - 1) // m, max(1, d // 4))) if d > 1 else 0
    evs = []
    for i, end in enumerate(ins):
        if end is None:
            continue
        fid, text, cat, args = end
        a = s + i * w
        evs.append(x_event(f"→ {text}", f"flow-in,{cat}", pid, tid, a, a + w, {**args, "end": "in"},
                           bind_id=fid, flow_in=True))
    for j, end in enumerate(outs):
        if end is None:
            continue
        fid, text, cat, args = end
        b = (t - 1 - j * w) if w else s
        evs.append(x_event(f"{text} →", f"flow-out,{cat}", pid, tid, b - w, b, {**args, "end": "out"},
                           bind_id=fid, flow_out=True))
    return evs
