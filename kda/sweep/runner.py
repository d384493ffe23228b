"""Run a sweep's points: from the cache where finished, else in-process (`workers=0`), on a Dask
`LocalCluster` (one worker process per core by default) or on an existing cluster (`scheduler=` address).
Rows come back in point order, whatever order the workers finish in. Timing-only points of one design that
differ only in profile fields run as one task (point.run_points: recorded once, timed on each profile by the
compiled event model), unless `batch=False`; each row is the same either way, cached under its own point's
key."""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import warnings
from dataclasses import dataclass, field

from npusim.command import sigint_ignored, workers_starting
from npusim.model.limits import available_cores

from kda.sweep.cache import Cache, point_key
from kda.sweep.point import FAILED, run_point, run_points
from kda.sweep.spec import Spec


class SchedulerError(RuntimeError):
    """No cluster to run on: one line naming the address and why."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep: `rows` holds the points finished so far, in point order."""

    def __init__(self, rows: list[dict]):
        super().__init__(f"interrupted after {len(rows)} points")
        self.rows = rows


class CacheWriteError(OSError):
    """The cache could not take a finished point's row (a full disk, a file gone read-only): the sweep
    stops there; `rows` holds every point finished so far, that one included, and `path` names the cache."""

    def __init__(self, err: OSError, path, rows: list[dict]):
        super().__init__(err.errno, err.strerror or str(err))
        self.path, self.rows = path, rows


@dataclass
class Outcome:
    rows: list[dict]                       # one per point, in point order
    ran: int = 0                           # points computed in this call
    cached: int = 0                        # points taken from the cache
    failed: int = 0                        # rows whose status is "failed"
    workers: int = 0                       # 0: in-process
    unmatched_metrics: list[str] = field(default_factory=list)
    unusable_cache_lines: int = 0          # lines of the cache skipped (cut short, damaged, edited)
    notes: list[str] = field(default_factory=list)   # points the event model replayed, and why (each once)


def run_sweep(spec: Spec, *, workers: int | None = 0, scheduler: str | None = None,
              cache: str | os.PathLike | None = None, progress: bool = False, batch: bool = True) -> Outcome:
    """Every point of `spec`: one row each with its axis values, its fixed settings, `status`, `error` and
    the metrics. `workers=None` starts one worker per core; `scheduler` uses an existing cluster; `batch`:
    points that differ only in profile fields recorded once (False: each point evaluated on its own)."""
    store = Cache(cache)
    points = spec.points()
    keys = [point_key(p.version, p.settings) for p in points]
    found = {i: store.get(k) for i, k in enumerate(keys) if store.get(k) is not None}
    todo = [p for p in points if p.index not in found]
    tasks = groups(todo) if batch else [[p] for p in todo]
    results = dict(found)
    bar = _Bar(len(points), sum(r.get("status") == FAILED for r in found.values()), len(found), progress)
    n_workers, source = 0, None
    notes: list[str] = []

    def finished() -> list:
        return [_row(spec, p, results[p.index]) for p in points if p.index in results]

    try:
        with bar:
            if scheduler is None and workers == 0:
                source = _in_process(tasks, notes)
            else:
                source, n_workers = _on_dask(tasks, workers, scheduler, notes)
            for index, row, cacheable in source:
                results[index] = row
                if cacheable:
                    try:
                        store.add(keys[index], row)
                    except OSError as err:
                        raise CacheWriteError(err, store.path, finished()) from None
                bar.tick(row.get("status") == FAILED)
    except KeyboardInterrupt:
        raise Interrupted(finished()) from None
    finally:
        if source is not None:
            source.close()                 # the Dask cluster goes down now, not when collected
        try:
            store.close()
        except OSError:                    # a row that did not reach the disk raised already
            pass
    rows = finished()
    return Outcome(rows, len(todo), len(found), sum(r["status"] == FAILED for r in rows), n_workers,
                   _unmatched(spec.metrics, rows), store.skipped, notes)


def _row(spec: Spec, point, result: dict) -> dict:
    """point, the settings (fixed, then axes), status, error, then the metrics the spec keeps."""
    columns = spec.columns
    settings = {columns[n]: _cell(v) for n, v in spec.fixed.items()} | {k: _cell(v) for k, v in point.values.items()}
    if "version" not in settings:
        settings["version"] = point.version
    row = {"point": point.index, **settings, "status": result.get("status", FAILED), "error": result.get("error")}
    for name, value in result.items():
        if name not in row and _kept(name, spec.metrics):
            row[name] = value
    return row


def _cell(value):
    """A list-valued setting (seqlens = [4096, 131072]) as kda.cli.run takes it, "4096,131072": one hashable cell
    that tables, group-bys and heat maps handle alike in Parquet and CSV."""
    return ",".join(map(str, value)) if isinstance(value, list) else value


# the report's own copy of the settings and shapes: kept whatever the spec's metrics say
SETTINGS = {"chunks", "tokens", "batch", "heads", "chunk_size", "d_k", "d_v", "dtype", "gates", "seed", "profile",
            "numerics"}


# whether a point stays finite on its gates: kept whatever the metrics say (no unsafe point is a winner)
SAFETY = ("safe", "probe.")


def _kept(name: str, metrics: tuple[str, ...]) -> bool:
    return not metrics or name in SETTINGS or name == SAFETY[0] or name.startswith(SAFETY[1]) or \
        any(name == m or name.startswith(m + ".") for m in metrics)


def _unmatched(metrics, rows) -> list[str]:
    names = {n for r in rows for n in r}
    return [m for m in metrics if not any(n == m or n.startswith(m + ".") for n in names)]


def groups(todo) -> list[list]:
    """The points as tasks, in point order of their first point: timing-only points whose settings differ
    only in profile fields (one design, shape, dtype, gates, seed) form one task; every other point is its own."""
    tasks: dict[str, list] = {}
    for p in todo:
        s = p.settings
        key = str(p.index) if s.numerics else json.dumps(
            [p.version, dataclasses.asdict(dataclasses.replace(s, overrides={}))], sort_keys=True, default=str)
        tasks.setdefault(key, []).append(p)
    return list(tasks.values())


def run_task(task: list, threads: int | None = None) -> tuple[list[tuple[int, dict, bool]], list[str]]:
    """((index, row, cacheable) of each point of one task, notes on how it was timed)."""
    if len(task) == 1:
        return [(task[0].index, *run_point(task[0].version, task[0].settings, threads))], []
    rows, notes = run_points(task[0].version, [p.settings for p in task], threads)
    return [(p.index, *r) for p, r in zip(task, rows)], notes


def _noted(notes: list[str], more: list[str]) -> None:
    notes.extend(n for n in more if n not in notes)


def _in_process(tasks, notes: list[str]):
    """One point after another in this process, with one torch thread as each Dask worker has: the
    points' matmuls are small, and threads only contend (4x slower recording on a busy 2-core machine)."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for task in tasks:
            rows, more = run_task(task)
            _noted(notes, more)
            yield from rows
    finally:
        torch.set_num_threads(threads)


def _on_dask(tasks, workers: int | None, scheduler: str | None, notes: list[str]):
    """(generator of (index, row, cacheable), worker count) on a LocalCluster or the given scheduler."""
    try:
        import dask
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise SchedulerError("dask.distributed is not installed: pip install 'dask[distributed]', "
                             "or run in-process with --workers 0") from None
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError, ValueError) as err:
            raise SchedulerError(f"--scheduler {scheduler}: cannot connect ({err})") from None
        cluster = None
    else:
        cores = available_cores()
        if workers and workers > cores:
            raise SchedulerError(f"--workers {workers}: this machine has {cores} cores; a local cluster takes at "
                                 f"most one worker per core (--scheduler for a larger cluster)")
        n = workers if workers else cores
        cluster = client = None
        try:
            with workers_starting() as method, warnings.catch_warnings(), \
                    dask.config.set({"distributed.worker.multiprocessing-method": method}):
                # the scheduler's HTTP server takes another port when its default is busy: nothing to report
                warnings.filterwarnings("ignore", message="Port .* is already in use")
                cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                                       silence_logs=logging.CRITICAL)
                client = Client(cluster)
        except BaseException:              # a Ctrl-C held while the cluster started arrives here
            with sigint_ignored():
                for part in (client, cluster):
                    if part is not None:
                        part.close()
            raise
    if client is None:
        raise SchedulerError("the local cluster did not start")
    n_workers = len(client.scheduler_info().get("workers", {}))

    def results():
        try:
            futures = {client.submit(run_task, task, 1, pure=False): task for task in tasks}
            for future in as_completed(futures):
                if future.status == "finished":
                    rows, more = future.result()
                    _noted(notes, more)
                    yield from rows
                else:       # the worker died or the task was lost: rows, not the end of the sweep
                    err = future.exception()
                    for p in futures[future]:
                        yield p.index, {"status": FAILED, "error": f"{type(err).__name__}: {err}"}, False
                future.release()
        finally:
            with sigint_ignored():         # a second Ctrl-C does not cut the shutdown short
                client.close()
                if cluster is not None:
                    cluster.close()
    return results(), n_workers


class _Bar:
    """Points done, failed and left, on stderr (a rich bar on a terminal, nothing otherwise)."""

    def __init__(self, total: int, failed: int, done: int, enabled: bool):
        self.total, self.failed, self.done = total, failed, done
        self.enabled = enabled and sys.stderr.isatty()

    def __enter__(self):
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
            self.bar = Progress(TextColumn("sweep"), BarColumn(), TextColumn("{task.description}"),
                                TimeElapsedColumn(), transient=True, console=Console(stderr=True))
            self.bar.__enter__()
            self.task = self.bar.add_task(self._text(), total=self.total, completed=self.done)
        return self

    def _text(self) -> str:
        return f"done {self.done - self.failed}  failed {self.failed}  left {self.total - self.done}"

    def tick(self, failed: bool) -> None:
        self.done += 1
        self.failed += failed
        if self.enabled:
            self.bar.update(self.task, advance=1, description=self._text())

    def __exit__(self, *exc):
        if self.enabled:
            self.bar.__exit__(*exc)
        return False
