"""Views: tables and figures of studies.

    render.py          rich tables of evaluations, one report for every design, the design document's
                       claims beside them; the versions and the designs side by side
    render_pass.py     a pass's detail per chunk: hand-offs, work, latency, the chip, the overlap
    render_memory.py   memories and pipes per phase
    plots.py           the plot of a run (`--plot`): Gantt charts; gantt.py: their drawing primitives
    plot_occupancy.py  all cores' Cube / Vector occupancy as heat maps, a design's passes above them
    figure.py          writing a figure by extension, with no timestamp
    table.py           a rich table from Columns; render_validate.py: kda.validate's tables with it
    plot_validate.py   kda.validate's plot: predicted against measured, log-log, held-out rows hollow
    plot_training.py   training as figures: forward + backward on one timeline, the training ranking
    render_decode.py   the decode report; plot_decode.py: a decode step's Chrome trace and Gantt chart
"""
