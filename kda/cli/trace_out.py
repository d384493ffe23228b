"""kda.run's --trace and --op-summary, forward or backward: the designs' Chrome trace, cut to --trace-window,
with a warning when it is large, and their msprof-shaped rows; each written whole or not at all
(npusim/output/trace_file.py, npusim/output/files.py)."""
from __future__ import annotations

import sys


def write_trace(args, timed, labels: list[str], design_axis: bool) -> None:
    """The Chrome trace of the forward or backward designs `timed`, cut to --trace-window; a warning on
    stderr first when it is large."""
    from npusim.output import chrome_trace, trace_file
    trace = chrome_trace.build([r.design_serial if args.serial else r.design_run for r in timed],
                               labels=labels, heads=timed[0].settings.heads, design_axis=design_axis)
    if args.trace_window is not None:
        trace = trace_file.window(trace, *trace_file.parse_window(args.trace_window))
    size = trace_file.estimate_bytes(trace)
    if size > trace_file.LARGE_BYTES and args.trace_window is None:     # asked for no part: the first one
        trace, end = trace_file.first_part(trace, size)
        print(f"--trace {args.trace}: the whole trace would be about {size / 1e6:.0f} MB, slow to open; it holds "
              f"its first {end:,.1f} us (about {trace_file.LARGE_BYTES / 1e6:.0f} MB). --trace-window START:END "
              f"(us) writes another part, --trace-window 0: all of it", file=sys.stderr)
    elif size > trace_file.LARGE_BYTES:
        print(f"warning: --trace {args.trace}: about {size / 1e6:.0f} MB ({len(trace['traceEvents'])} events), "
              f"as --trace-window asked", file=sys.stderr)
    trace_file.write(args.trace, trace)
    print(f"wrote {args.trace} (Chrome trace: open in https://ui.perfetto.dev)", file=sys.stderr)


def write_op_summary(args, timed, labels: list[str]) -> None:
    """--op-summary: the pipelined runs (serial ones with --serial) as msprof's columns, one file."""
    from npusim.output import files
    from npusim.output.op_summary import op_summary_csv
    runs = [(r.design_serial if args.serial else r.design_run, label) for r, label in zip(timed, labels)]
    files.write_text("--op-summary", args.op_summary, op_summary_csv(runs))
    print(f"wrote {args.op_summary} (msprof op summary columns)", file=sys.stderr)
