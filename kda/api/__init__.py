"""The Python calls built on the studies, shaped like FLA's.

simulate.py   kda.simulate(q, k, v, g, beta, ..., version=, profile=): the simulated timing of that call on
              a chip, the report and the JSON of `kda.run --json`
"""
