"""The model against measurements: reading them, fitting the profile, and the uncertainty left.

    measurements.py   measured kernel timings (simple CSV or msprof's op summary)
    op_map.py         which msprof operator is which kernel: a user's TOML of OP Types
    least_squares.py  bounded least squares of a profile's ranged fields
    uncertainty.py    Latin hypercube samples of the ranged fields
    calibrate.py      python -m npusim.calibrate: fit and write a profile
"""
