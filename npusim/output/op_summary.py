"""A simulated design as the CSV a kernel engineer reads from msprof: one row per pass (a launch, as msprof's
op summary has one row per task) and one per pass and core (a block, as msprof op's PipeUtilization.csv
has), under those tools' column names:

    Op Name, OP Type, Task Type     the pass, the design, MIX_AIC / AI_CORE / AI_VECTOR_CORE by the units it uses
    block_id                        the core; "all" on a pass's row
    Task Start Time(us)             from the design's start (a pass's row: its first core's first event)
    Task Duration(us)               first event to last, the launch not in it (msprof's device time)
    Block Dim                       cores the pass uses
    aic_time(us), aiv_time(us)      the core's span in the pass (a pass's row: the mean over its cores)
    aic_cube_time(us), _ratio       the Cube unit's busy time (its phases, their loads and drains within)
    aiv_vec_time(us), _ratio        the Vector unit's busy time
    ai*_mte2 / mte3 / fixpipe       time the MTE2, MTE3 and FixPipe pipes carry data (the model's pipe
                                    segments), and its share of the span

A ratio is a time over the span. The model has no scalar, MTE1 or icache column: they are not written.
"""
from __future__ import annotations

import csv
import io
from collections import defaultdict

from npusim.model.engine import PHASE
from npusim.record.graph import CUBE

COLUMNS = ("Op Name", "OP Type", "Task Type", "block_id", "Task Start Time(us)", "Task Duration(us)", "Block Dim",
           "aic_time(us)", "aic_cube_time(us)", "aic_cube_ratio", "aic_mte2_time(us)", "aic_mte2_ratio",
           "aic_fixpipe_time(us)", "aic_fixpipe_ratio", "aiv_time(us)", "aiv_vec_time(us)", "aiv_vec_ratio",
           "aiv_mte2_time(us)", "aiv_mte2_ratio", "aiv_mte3_time(us)", "aiv_mte3_ratio")
PIPES = (("aic", "MTE2"), ("aic", "FIXPIPE"), ("aiv", "MTE2"), ("aiv", "MTE3"))


def op_summary_rows(design_run, op_type: str) -> list[dict]:
    """The rows of a traced DesignRun (npusim.model.multipass): per pass, its row then one per core."""
    rows = []
    for pr in design_run.passes:
        cores = _core_rows(pr, op_type)
        if cores:
            rows.append(_pass_row(cores))
            rows.extend(cores)
    return rows


def op_summary_csv(runs: list[tuple[object, str]]) -> str:
    """The CSV text of several designs' traced runs, each given with its OP Type (its name)."""
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for design_run, op_type in runs:
        w.writerows({k: _cell(k, v) for k, v in r.items()} for r in op_summary_rows(design_run, op_type))
    return out.getvalue()


def _core_rows(pr, op_type: str) -> list[dict]:
    run = pr.run
    tr = run.traced()
    span: dict[int, list[float]] = {}
    for c, s, e in zip(tr.core, tr.start, tr.end):
        lo_hi = span.setdefault(c, [s, e])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], s), max(lo_hi[1], e)
    pipes = _pipe_times(run)
    units = {u for (_, u) in run.busy_us}
    task_type = "MIX_AIC" if {"cube", "vec"} <= units else "AI_CORE" if "cube" in units else "AI_VECTOR_CORE"
    out = []
    for core in sorted(span):
        start, end = span[core]
        t = end - start
        row = {"Op Name": pr.pass_.name, "OP Type": op_type, "Task Type": task_type, "block_id": core,
               "Task Start Time(us)": pr.start_us + start, "Task Duration(us)": t, "Block Dim": len(span),
               "aic_time(us)": t, "aiv_time(us)": t,
               "aic_cube_time(us)": run.busy_us.get((core, "cube"), 0.0),
               "aiv_vec_time(us)": run.busy_us.get((core, "vec"), 0.0)}
        for side, pipe in PIPES:
            row[f"{side}_{pipe.lower()}_time(us)"] = pipes.get((core, side, pipe.lower()), 0.0)
        out.append(_ratios(row))
    return out


def _pipe_times(run) -> dict[tuple[int, str, str], float]:
    """(core, "aic" or "aiv", pipe) -> time its phases' loads and stores take on the pipe (pipe_trace's
    segments, summed; each phase's tile schedule computed once per stretch it ran at)."""
    nodes, tr = run.template.nodes, run.traced()
    per_event: dict[tuple[int, float], dict[str, float]] = {}
    out: dict[tuple[int, str, str], float] = defaultdict(float)
    for k, c, x in zip(tr.node, tr.core, tr.stretch):
        nd = nodes[k]
        if nd.kind != PHASE or nd.pipe is None or nd.pipe.io_us <= 0:
            continue
        if (k, x) not in per_event:
            sums: dict[str, float] = defaultdict(float)
            for pipe, _, a, b in nd.pipe.schedule(x, run.serial):
                if pipe != "compute" and b > a:
                    sums[pipe.lower()] += b - a
            per_event[(k, x)] = sums
        side = "aic" if nd.resource == CUBE else "aiv"
        for pipe, t in per_event[(k, x)].items():
            out[(c, side, pipe)] += t
    return out


def _pass_row(cores: list[dict]) -> dict:
    """A pass's row: its first start to its last end; per-core times averaged over its cores."""
    start = min(r["Task Start Time(us)"] for r in cores)
    end = max(r["Task Start Time(us)"] + r["Task Duration(us)"] for r in cores)
    row = {k: cores[0][k] for k in ("Op Name", "OP Type", "Task Type", "Block Dim")}
    row.update({"block_id": "all", "Task Start Time(us)": start, "Task Duration(us)": end - start})
    for k in COLUMNS[7:]:
        if k.endswith("(us)"):
            row[k] = sum(r[k] for r in cores) / len(cores)
    return _ratios(row)


def _ratios(row: dict) -> dict:
    for k in COLUMNS:
        if k.endswith("_ratio"):
            base = row[f"{k[:3]}_time(us)"]
            row[k] = row[k.replace("_ratio", "_time(us)")] / base if base > 0 else 0.0
    return row


def _cell(key: str, v):
    """Times to the nanosecond, ratios to four places, as msprof writes them."""
    if not isinstance(v, float):
        return v
    return f"{v:.4f}" if key.endswith("_ratio") else f"{v:.3f}"
