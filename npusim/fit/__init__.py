"""The model against measurements: reading them, fitting the profile, and the uncertainty left.

    measurements.py   measured kernel timings (simple CSV or msprof's op summary)
    least_squares.py  bounded least squares of a profile's ranged fields
    uncertainty.py    Latin hypercube samples of the ranged fields
    calibrate.py      python -m npusim.calibrate: fit and write a profile
"""
