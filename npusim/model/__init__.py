"""The event model: designs of passes laid out over the cores and replayed in SimPy.

    schedule.py   designs of one or more passes and their work layout
    template.py   a recorded graph as timed per-chunk nodes and edges
    workspace.py  the GM workspace plan: resident region, ping/pong slots
    engine.py     the SimPy event model of cores, units, slots and shared bandwidth
    run.py        the outcome of one simulation: makespan, busy times, the trace
    limits.py     the work a run asks for, and the most the model takes on
    multipass.py  a design of several passes, pass after pass
    host.py       the host's part of a measured kernel's timed region (its Python wrapper)
    trace.py      what the model ran
    whatif/       a design timed under many profiles at once (re-timed or replayed compiled)
"""
