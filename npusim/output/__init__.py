"""Reports and traces of what the event model ran: one shape for every design, of one pass or several.

    report.py         a design's report: latency, bound, HBM floor, roofline; each pass's hand-offs, serial
                      and pipelined latency, utilisation and bound per chunk
    chain.py          the bound's longest dependency path through a sequence's chunks, compiled (numba)
    overlap.py        how much a run overlaps (interval merging)
    critical_path.py  the chain of events that sets a run's makespan
    chrome_trace.py   Chrome Trace Event JSON (Perfetto, MindStudio Insight) of runs and designs
    trace_events.py   the trace events of one pass's run
    pipe_trace.py     the data-movement segments as traces and Gantt charts draw them
    trace_file.py     writing a trace, cutting it to a window (by default a large one to its first part)
    op_summary.py     a run in msprof's columns: a row per pass and per pass and core
    files.py          files a command writes: checked before the long part, written whole or not at all
"""
