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
    whatif.py     a design timed under many profiles at once
    retime.py     a recorded replay re-timed for many profiles at once
    maxplus.py    re-timing's max-plus pass over the recorded events
    compiled.py   the event model compiled (numba), for samples re-timing cannot reuse
"""
