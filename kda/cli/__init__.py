"""The command lines.

    common.py        what every command shares: its name as invoked, one-line errors, help, progress
    run.py           python -m kda.run: designs, numerics and timing
    run_options.py   its options, in groups, and the Settings they make
    checks.py        its options checked after parsing: bounds, conflicts, --seqlens/--set/--inputs
    jsonout.py       JSON without Infinity or NaN (null instead)
    run_backward.py  python -m kda.run --backward
    trace_out.py     a run's Chrome trace, only the part written built (forward and backward)
    attribution.py   python -m kda.attribution
    stability.py     python -m kda.stability
    validate.py      python -m kda.validate
    decode.py        python -m kda.decode (python -m kda.run --decode): decode steps
"""
