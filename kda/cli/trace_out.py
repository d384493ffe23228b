"""kda.run's --trace and --op-summary, forward or backward: the designs' Chrome trace, cut to --trace-window,
with a warning when it is large, and their msprof-shaped rows; each written whole or not at all
(npusim/output/trace_file.py, npusim/output/files.py)."""
from __future__ import annotations

import sys


def write_trace(args, timed, labels: list[str], design_axis: bool, limit: int | None = None) -> None:
    """The Chrome trace of the forward or backward designs `timed`: the window --trace-window asks, or, when
    the whole would pass `limit` bytes (trace_file.LARGE_BYTES unless given), its first whole work items
    under it, a line on stderr saying so; only that part is built."""
    from npusim.output import chrome_trace, trace_file
    from npusim.output.trace_part import Part
    limit = trace_file.LARGE_BYTES if limit is None else limit
    runs = [r.design_serial if args.serial else r.design_run for r in timed]
    kw = dict(labels=labels, heads=timed[0].settings.heads, design_axis=design_axis)
    if args.trace_window is not None:
        trace = chrome_trace.build(runs, part=Part(*trace_file.parse_window(args.trace_window)), **kw)
        size = trace_file.estimate_bytes(trace)
        if size > limit:
            print(f"warning: --trace {args.trace}: about {size / 1e6:.0f} MB ({len(trace['traceEvents'])} events), "
                  f"as --trace-window asked", file=sys.stderr)
    else:
        items, per_item, fixed = chrome_trace.item_sizes(runs, heads=kw["heads"], design_axis=design_axis)
        part = trace_file.first_items(items, per_item, limit, fixed)
        trace = chrome_trace.build(runs, part=part, **kw)
        if part is not None:                       # asked for no part: the first one
            whole = fixed + sum(per_item[v] for _, v in items)
            print(f"--trace {args.trace}: the whole trace would be about {whole / 1e6:.0f} MB, slow to open; it "
                  f"holds its first {part.end:,.1f} us (the work items that start by then, about "
                  f"{limit / 1e6:.0f} MB). --trace-window START:END (us) writes another part, --trace-window 0: "
                  f"all of it", file=sys.stderr)
    from npusim.output import perfetto_trace
    if args.trace.suffix.lower() in perfetto_trace.SUFFIXES:
        perfetto_trace.write(args.trace, trace)
        print(f"wrote {args.trace} (Perfetto protobuf trace: open in https://ui.perfetto.dev)", file=sys.stderr)
        return
    trace_file.write(args.trace, trace)
    print(f"wrote {args.trace} (Chrome trace: open in https://ui.perfetto.dev)", file=sys.stderr)


def untraced(r):
    """The result `r` with its runs' traces dropped (its report as a run that kept none prints it)."""
    from dataclasses import replace

    def drop(dr):
        if dr is None:
            return None
        return replace(dr, passes=[replace(p, run=replace(p.run, trace=None)) for p in dr.passes])
    return replace(r, design_run=drop(r.design_run), design_serial=drop(r.design_serial))


def write_op_summary(args, timed, labels: list[str]) -> None:
    """--op-summary: the pipelined runs (serial ones with --serial) as msprof's columns, one file."""
    from npusim.output import files
    from npusim.output.op_summary import op_summary_csv
    runs = [(r.design_serial if args.serial else r.design_run, label) for r, label in zip(timed, labels)]
    files.write_text("--op-summary", args.op_summary, op_summary_csv(runs))
    print(f"wrote {args.op_summary} (msprof op summary columns)", file=sys.stderr)
