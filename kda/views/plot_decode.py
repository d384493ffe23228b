"""A decode step's timeline: a Chrome trace (Perfetto) and a Gantt chart, from the event model's trace.

One row (a Chrome thread) per worker and pipe: MTE2 (the loads), Vec or Cube (the work) and MTE3 (the stores),
and the hand-off links for a design of Cube and Vector phases. A bar is one item's node, named by the phase
and the item (w3 i7: worker 3's eighth item). Times in microseconds from the first load; the launch is not
drawn (the metadata holds it).
"""
from __future__ import annotations

import json
from pathlib import Path

from kda.decode.study import DecodeResult

ORDER = ("mte2", "cube", "vec", "mte3", "link:vec->cube", "link:cube->vec")
NAMES = {"mte2": "MTE2 (loads)", "cube": "Cube", "vec": "Vector", "mte3": "MTE3 (stores)",
         "link:vec->cube": "Vec→Cube", "link:cube->vec": "Cube→Vec"}
COLORS = {"mte2": "#4d7ebf", "cube": "#2f6db5", "vec": "#e07b28", "mte3": "#6aa84f", "link:vec->cube": "#888888",
          "link:cube->vec": "#888888"}
FORMATS = (".png", ".svg", ".pdf")


def _events(r: DecodeResult):
    trace = r.run.run.trace
    if trace is None:
        from npusim.model.engine import simulate  # the run kept no trace: replay it with one
        run = r.run.run
        trace = simulate(run.template, run.profile, chunks=list(r.run.counts), sequences=r.run.workers,
                         trace=True).trace
    if trace is None:
        raise ValueError("decode: the replay kept no trace")
    return trace.events()


def trace_dict(r: DecodeResult) -> dict:
    """The Chrome trace of one step: a process per core, a thread per pipe."""
    events, meta = [], []
    seen = set()
    for e in _events(r):
        tid = ORDER.index(e.unit) + 1 if e.unit in ORDER else len(ORDER) + 1
        if (e.core, tid) not in seen:
            seen.add((e.core, tid))
            meta.append({"ph": "M", "name": "thread_name", "pid": e.core + 1, "tid": tid,
                         "args": {"name": NAMES.get(e.unit, e.unit)}})
            meta.append({"ph": "M", "name": "process_name", "pid": e.core + 1, "args": {"name": f"core {e.core}"}})
        events.append({"ph": "X", "name": f"{e.name} w{e.seq} i{e.chunk}", "pid": e.core + 1, "tid": tid,
                       "ts": round(e.start, 4), "dur": round(max(e.busy_end - e.start, 0.0), 4),
                       "args": {"worker": e.seq, "item": e.chunk, "bytes": e.nbytes}})
    events.sort(key=lambda x: x["ts"])
    run = r.run
    return {"traceEvents": meta + events, "displayTimeUnit": "ns",
            "metadata": {"generator": "kda.decode", "design": run.design.name, "shape": run.shape.text(),
                         "launch_us": run.launch_us, "latency_us": run.latency_us, "time_unit": "us"}}


def write_trace(path: str | Path, r: DecodeResult) -> None:
    """The Chrome trace, written whole or not at all (npusim/output/files.py)."""
    from npusim.output import files
    files.write_text("--trace", Path(path), json.dumps(trace_dict(r), separators=(",", ":")))


def save_gantt(path: str | Path, r: DecodeResult, cores: int = 4) -> None:
    """The first `cores` cores' pipes, item by item."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"--plot {path}: the file must end in {', '.join(FORMATS)}")
    import matplotlib.pyplot as plt

    from kda.views.figure import save
    events = [e for e in _events(r) if e.core < cores]
    rows = sorted({(e.core, e.unit) for e in events}, key=lambda cu: (cu[0], ORDER.index(cu[1]) if cu[1] in ORDER else 9))
    y = {row: i for i, row in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(rows) + 1.4))
    for e in events:
        ax.barh(y[(e.core, e.unit)], max(e.busy_end - e.start, 1e-3), left=e.start, height=0.7,
                color=COLORS.get(e.unit, "#999999"), edgecolor="white", linewidth=0.3)
    ax.set_yticks(range(len(rows)), [f"core {c} {NAMES.get(u, u)}" for c, u in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("µs from the first load (the launch not drawn)")
    run = r.run
    ax.set_title(f"{run.design.name} · {run.shape.text()} · state {run.types.state}: "
                 f"{run.latency_us:,.1f} µs ({run.bound}-bound)", fontsize=10)
    fig.tight_layout()
    save(fig, path)                    # no date stamp, fixed SVG ids, written whole or not at all
