"""python -m kda.sweep SPEC.toml [-o results.parquet] [--workers N | --scheduler tcp://HOST:PORT]
python -m kda.sweep plot results.parquet [-o DIR] [--heatmap X,Y] [--metric COLUMN]

Runs every point of a sweep spec (kda/sweep/spec.py) and writes one row per point: its settings, status,
error and metrics. Bad input gets one line on stderr and exit status 2; a failing point is a row, and
a sweep with failed points exits 1 once its table is written (0 when every point ran). A sweep that stops
part-way keeps what it finished: Ctrl-C exits 130 with one line (the rows are in the cache, or on stdout
under --no-cache); a cache write that fails after the start exits 2 with the rows on stdout.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from npusim import NpuSimError
from npusim.command import as_command, sigint_held
from npusim.output import files

from kda.cli.common import Parser, fail, prog_name


def _fail(message: str) -> int:
    return fail(message)


def run_parser() -> argparse.ArgumentParser:
    prog = prog_name("kda.sweep")
    p = Parser(prog=prog, description="Run every point of a sweep spec (TOML): one row per point, with its "
               "settings, status, error and metrics. Exit status: 0 every point ran; 1 the table is written but "
               "some points failed (their rows say why); 2 bad input, or a cache write that failed (the finished rows on "
               "stdout); 130 interrupted (Ctrl-C: the finished rows kept).", epilog=f"""examples:
  # every point of a spec on a local Dask cluster, one worker per core
  {prog} benchmarks/sweep_kimi.toml -o kimi.parquet
  # in this process (no Dask), then the Pareto front and heat maps of the table
  {prog} spec.toml --workers 0 -o results.parquet
  {prog} plot results.parquet --heatmap sync.latency_us,chunk-size""")
    p.add_argument("spec", type=Path, help="the spec file: [axes], [fixed], metrics, numerics")
    p.add_argument("-o", "--output", type=Path, help="the table (.parquet, or .csv); default SPEC.parquet "
                   "(.csv without pyarrow)")
    p.add_argument("--workers", type=int, help="worker processes of the local Dask cluster (default: one per "
                   "core); 0 runs in this process")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="an existing Dask cluster's scheduler. It "
                   "connects to any scheduler at that address, and Dask exchanges pickles with it: a scheduler "
                   "or worker can run code in this process, so name only a cluster you trust")
    p.add_argument("--cache", type=Path, help="the cache of finished points (default OUTPUT.cache.jsonl)")
    p.add_argument("--no-cache", action="store_true", help="run every point, read and write no cache")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary line")
    p.add_argument("--per-point", action="store_true", help="evaluate every point on its own (default: "
                   "timing-only points that differ only in profile fields are recorded once and timed on each "
                   "profile by the compiled event model; the rows are the same)")
    return p


def plot_parser() -> argparse.ArgumentParser:
    p = Parser(prog=prog_name("kda.sweep") + " plot", description="Pareto front, heat maps and the best point "
                "per shape of a sweep's table.")
    p.add_argument("table", type=Path, help="a sweep's .parquet or .csv")
    p.add_argument("--outdir", type=Path, help="the folder the figures go into (default TABLE_plots/)")
    p.add_argument("-o", dest="table_output", help=argparse.SUPPRESS)    # kda.sweep's -o is a table file
    p.add_argument("--heatmap", action="append", default=[], metavar="X,Y",
                   help="a heat map of two axis columns (repeatable; default: the first two axes that vary)")
    p.add_argument("--metric", help="the metric of the heat maps and of the best point (default: the layer "
                   "latency)")
    return p


@as_command
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv[:1] == ["plot"]:
            return plot_main(argv[1:])
        return run_main(argv)
    except KeyboardInterrupt:              # before the first point (run_main keeps the rest): nothing to keep
        print("interrupted: nothing had finished" + (" (each figure is written whole or not at all)"
                                                     if argv[:1] == ["plot"] else ""), file=sys.stderr)
        return 130


def run_main(argv: list[str]) -> int:
    args = run_parser().parse_args(argv)
    from kda.sweep.runner import CacheWriteError, Interrupted, SchedulerError, run_sweep
    from kda.sweep.spec import SpecError, load_spec
    from kda.sweep.table import have_parquet, write_table
    if args.workers is not None and args.workers < 0:
        return _fail(f"--workers must be >= 0, got {args.workers}")
    if args.scheduler is not None and args.workers is not None:
        return _fail("--scheduler runs on that cluster's workers: it does not go with --workers")
    output = args.output or args.spec.with_suffix(".parquet" if have_parquet() else ".csv")
    if output.suffix not in (".parquet", ".csv"):
        return _fail(f"--output {output}: the table must end in .parquet or .csv")
    try:
        files.check_writable("--output", output)
    except files.OutputError as err:
        return _fail(str(err))
    try:
        spec = load_spec(args.spec)
    except SpecError as err:
        return _fail(str(err))
    cache = None if args.no_cache else (args.cache or output.with_name(output.stem + ".cache.jsonl"))
    if cache is not None:                  # before the first point, not after it is computed
        try:
            if cache.is_dir():
                raise IsADirectoryError(21, "a directory")
            with cache.open("a", encoding="utf-8"):
                pass
        except OSError as err:
            return _fail(f"--cache {cache}: cannot write there ({err.strerror or err}); name another file "
                         f"or use --no-cache")
    start = time.perf_counter()
    try:
        out = run_sweep(spec, workers=args.workers, scheduler=args.scheduler, cache=cache,
                        progress=not args.quiet, batch=not args.per_point)
    except SchedulerError as err:
        return _fail(str(err))
    except Interrupted as stop:            # Ctrl-C: one line, and the finished rows kept
        n = len(stop.rows)
        if cache is None:
            print_rows(stop.rows)
        print(f"interrupted: {_points(n)} finished, kept in {cache}; run again to go on" if cache else
              f"interrupted: {_points(n)} finished, {_rows(n)} on stdout (--no-cache: nothing else keeps them)",
              file=sys.stderr)
        return 130
    except CacheWriteError as err:         # after the up-front check: a full disk, a file gone read-only
        print_rows(err.rows)
        return _fail(f"--cache {err.path}: cannot write there ({err.strerror}); the sweep stopped: "
                     f"{_points(len(err.rows))} finished, {_rows(len(err.rows))} on stdout")
    try:
        with sigint_held():                # the table goes out whole; a Ctrl-C meanwhile waits for it
            written = write_table(out.rows, output)
    except KeyboardInterrupt:
        print(f"interrupted: all {_points(len(out.rows))} finished, the table is written to {output}",
              file=sys.stderr)
        return 130
    except (OSError, ValueError, NpuSimError) as err:      # the points are computed: say where they are kept
        if cache is None:
            print_rows(out.rows)
        kept = f"the {len(out.rows)} rows are in {cache}: run again to write the table" if cache else \
            f"the {len(out.rows)} rows are on stdout (--no-cache)"
        why = str(err) if isinstance(err, NpuSimError) else f"--output {output}: cannot write it ({err})"
        return _fail(f"{why}; {kept}")
    for m in out.unmatched_metrics:
        print(f"warning: metric {m!r} matched no column", file=sys.stderr)
    if out.unusable_cache_lines:
        print(f"warning: --cache {cache}: {out.unusable_cache_lines} line(s) could not be used (cut short, not "
              f"text, or not matching their digest): those points ran again", file=sys.stderr)
    for note in out.notes:
        print(f"note: {note}", file=sys.stderr)
    if not args.quiet:
        where = f"{out.workers} Dask workers" if out.workers else "in-process"
        print(f"{len(out.rows)} points ({out.ran} run {where}, {out.cached} from the cache), "
              f"{out.failed} failed, {time.perf_counter() - start:.1f} s -> {written}", file=sys.stderr)
    if out.failed:
        print(f"error: {out.failed} of {len(out.rows)} points failed (status 'failed' in {written}, the "
              f"error column says why)", file=sys.stderr)
        return 1
    return 0


def _points(n: int) -> str:
    return "1 point" if n == 1 else f"{n} points"


def _rows(n: int) -> str:
    return "its row" if n == 1 else "their rows"


def print_rows(rows: list[dict]) -> None:
    """The finished rows as CSV on stdout, for a sweep that stopped before it could write its table."""
    from kda.sweep.table import write_csv
    write_csv(rows, sys.stdout)
    sys.stdout.flush()


def plot_main(argv: list[str]) -> int:
    args = plot_parser().parse_args(argv)
    if args.table_output is not None:
        return _fail("-o names kda.sweep's table file; the figures' folder is --outdir")
    from kda.sweep.plot import PlotError, plot_table
    try:
        written, best = plot_table(args.table, args.outdir, [h.split(",") for h in args.heatmap], args.metric)
    except PlotError as err:
        return _fail(str(err))
    print(best)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
