"""Recording: a phase program run once with real tensor math, turned into a per-chunk graph.

    program.py       phase programs and the Npu runtime they talk to     ops.py        which unit may run a torch op
    graph.py         the recorded per-chunk phase graph                  dataflow.py   where tensors live; hand-off checks
    precision.py     the type each hand-off and the state carry         accumulation.py  narrow Cube accumulation
    replay.py        fast numerics over many chunks                      hoist.py      state-free / state-bound calls
    pipeline.py      the two-thread CPU replay                           memory.py     freed memory kept (glibc)
    batched.py       the fast replay batched over many chunks
    handoffs.py      syncs, kept and spilled tensors, GM parts           records.py    what the checker records
"""
