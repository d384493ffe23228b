"""Studies: what one run, or many, says about a design.

    evaluate.py       one evaluation: numerics, parity, timing (Settings -> VersionResult)
    timing.py         the timing replay of a design for a run's settings
    oracle.py         the fp64 reference on exactly the inputs the NPU saw
    attribution.py    which hand-off's rounding costs the most accuracy
    stability.py      where each design breaks numerically
    uncertainty.py    every latency with its interval over the profile's ranges
    validate.py       the model against published Ascend timings
    predictions.py    predictions registered before the measured values
    backward_eval.py  one backward evaluation; backward_attribution.py: which backward hand-offs stay fp32
    claims.py         the design document's own figures
    run_json.py       the JSON of a run: one shape for every design
    whatif.py         an evaluated design timed under many profiles at once
"""
