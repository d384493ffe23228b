"""What-ifs: a design timed under many profiles at once, from its replay recorded once.

    timer.py      a design on a shape, timed for any number of profiles (DesignTimer)
    compiled.py   the event model compiled (numba): one sample's replay at a time
    runs.py       a design's replay on a profile by the compiled model, as the event model's runs
    structure.py  a pass's structure for the compiled model: cores, instances, successors
    heaps.py      the compiled model's heaps: timeouts, ready nodes, transfers under way
    threads.py    samples shared among threads
    retime.py     a recorded replay re-timed for many profiles at once
    maxplus.py    re-timing's max-plus pass over the recorded events
"""
from npusim.model.whatif.timer import (
    COMPILED,
    REPLAYED,
    RETIMED,
    STRUCTURAL,
    DesignTimer,
    Timings,
    Ways,
    stacked_templates,
    structural_changes,
)

__all__ = ["COMPILED", "REPLAYED", "RETIMED", "STRUCTURAL", "DesignTimer", "Timings", "Ways", "stacked_templates",
           "structural_changes"]
