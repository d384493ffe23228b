"""Design-space sweeps: `python -m kda.sweep spec.toml` runs every point of a grid of `kda.cli.run` settings
(in-process, on a Dask LocalCluster or on an existing cluster), caches each point's row, and writes one
table; `python -m kda.sweep plot results.parquet` draws the Pareto front, heat maps and the best point per
shape.

    spec.py     the spec file (TOML): axes, fixed settings, metrics; its points
    point.py    one point evaluated and flattened into one row (or a profile axis's points, recorded once)
    runner.py   the points run in-process or on Dask, from the cache where finished
    cache.py    each finished point's row, keyed by its settings, the sources and the profile
    table.py    the table written and read (Parquet, or CSV)
    plot.py     the Pareto front, heat maps and the best point per shape
"""
from kda.sweep.runner import Outcome, SchedulerError, run_sweep
from kda.sweep.spec import Point, Spec, SpecError, load_spec, parse_spec
from kda.sweep.table import read_table, write_table

__all__ = ["Outcome", "Point", "SchedulerError", "Spec", "SpecError", "load_spec", "parse_spec", "read_table",
           "run_sweep", "sweep", "write_table"]


def sweep(spec: Spec | dict, *, workers: int | None = 0, cache=None, scheduler: str | None = None):
    """The table of a sweep as a pandas DataFrame (in-process by default), for notebooks and scripts."""
    from kda.sweep.table import frame
    if isinstance(spec, dict):
        spec = parse_spec(spec)
    return frame(run_sweep(spec, workers=workers, cache=cache, scheduler=scheduler).rows)
