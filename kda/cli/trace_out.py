"""kda.run's --trace, forward or backward: the designs' Chrome trace, cut to --trace-window, with a warning
when it is large; written whole or not at all (npusim/output/trace_file.py)."""
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
    if size > trace_file.LARGE_BYTES:
        print(f"warning: --trace {args.trace}: about {size / 1e6:.0f} MB ({len(trace['traceEvents'])} events); "
              f"--trace-window START:END (us) keeps a part of it", file=sys.stderr)
    trace_file.write(args.trace, trace)
    print(f"wrote {args.trace} (Chrome trace: open in https://ui.perfetto.dev)", file=sys.stderr)
