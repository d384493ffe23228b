"""Reports and traces of what the event model ran.

    report.py         hand-offs, serial and pipelined latency, utilisation, bound
    design_report.py  the same for a design of several passes, with the HBM floor
    overlap.py        how much a run overlaps (interval merging)
    chrome_trace.py   Chrome Trace Event JSON (Perfetto, MindStudio Insight)
    design_trace.py   Chrome traces of multi-pass designs
    pipe_trace.py     the data-movement segments as traces and Gantt charts draw them
"""
