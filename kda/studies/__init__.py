"""Studies: what one run, or many, says about a design.

    evaluate.py       one evaluation: numerics, parity, timing (Settings -> VersionResult)
    work.py           the work a run asks for, refused beyond what this machine can do
    timing.py         the timing replay of a design for a run's settings
    oracle.py         the fp64 reference on exactly the inputs the NPU saw
    attribution.py    which hand-off's rounding costs the most accuracy
    stability.py      where each design breaks numerically
    uncertainty.py    every latency with its interval over the profile's ranges
    validate.py       the model against published Ascend timings
    backward_eval.py  one backward evaluation; backward_attribution.py: which backward hand-offs stay fp32
    claims.py         the design document's own figures
"""
