"""Views: tables and figures of studies.

    render.py          rich tables of evaluations, the design document's claims beside them
    render_design.py   tables of designs of several passes
    render_memory.py   memories and pipes per phase
    plots.py           Gantt charts; gantt.py: their drawing primitives
    plot_occupancy.py  all cores' Cube / Vector occupancy as heat maps
    table.py           a rich table from Columns; render_validate.py: kda.validate's tables with it
    plot_validate.py   kda.validate's plot: predicted against measured, log-log, held-out rows hollow
    render_decode.py   the decode report; plot_decode.py: a decode step's Chrome trace and Gantt chart
"""
