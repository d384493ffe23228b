"""Reports and traces of what the event model ran: one shape for every design, of one pass or several.

    report.py         a design's report: latency, bound, HBM floor, roofline; each pass's hand-offs, serial
                      and pipelined latency, utilisation and bound per chunk
    chain.py          the bound's longest dependency path through a sequence's chunks, compiled (numba)
    overlap.py        how much a run overlaps (interval merging)
    critical_path.py  the chain of events that sets a run's makespan
    chrome_trace.py   Chrome Trace Event JSON (Perfetto, MindStudio Insight) of runs and designs
    trace_events.py   the trace events of one pass's run
    trace_flows.py    its hand-offs' arrows (flow events) and their ends
    pipe_trace.py     the data-movement segments as traces and Gantt charts draw them
    trace_part.py     which part of a trace is built: a time window, or whole work items
    perfetto_trace.py the same events in Perfetto's protobuf format (the optional perfetto package)
    trace_file.py     writing a trace, sizing it before it is built (a large one to its first whole items)
    op_summary.py     a run in msprof's columns: a row per pass and per pass and core
    files.py          files a command writes: checked before the long part, written whole or not at all
"""
