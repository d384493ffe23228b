"""A sweep that stops part-way (Ctrl-C, a cache write that fails) keeps what it computed: the finished rows
are in the cache or on stdout, one line on stderr says which, and nothing prints a traceback."""
import csv
import errno
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kda.sweep import runner as sweep_runner
from kda.sweep.__main__ import main

pytest.importorskip("pandas")

# three timing-only points of 1, 2 and 3 chunks: milliseconds each
SPEC = 'numerics = false\n[axes]\nchunks = [1, 2, 3]\n[fixed]\nprofile = "seed-doc"\ndk = 16\ndv = 16\n'


def _spec(tmp_path: Path, body: str = SPEC) -> Path:
    spec = tmp_path / "s.toml"
    spec.write_text(body)
    return spec


def _rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def _stop_at(monkeypatch, n: int, stop):
    """run_point as it is, until its n-th call (1-based), which calls `stop` instead."""
    real, calls = sweep_runner.run_point, []

    def point(version, settings, *a):
        calls.append(settings.chunks)
        if len(calls) == n:
            stop()
        return real(version, settings, *a)
    monkeypatch.setattr(sweep_runner, "run_point", point)


def _interrupt():
    raise KeyboardInterrupt


def test_ctrl_c_with_no_cache_prints_the_finished_rows(tmp_path, monkeypatch, capsys):
    _stop_at(monkeypatch, 3, _interrupt)                 # during the third point
    out = tmp_path / "r.csv"
    assert main([str(_spec(tmp_path)), "--workers", "0", "-o", str(out), "--no-cache", "--quiet"]) == 130
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "interrupted" in err[0] and "stdout" in err[0], captured.err
    rows = _rows(captured.out)
    assert [(r["point"], r["chunks"], r["status"]) for r in rows] == [("0", "1", "ok"), ("1", "2", "ok")]
    assert not out.exists()                              # no table of a grid that did not finish


def test_ctrl_c_with_a_cache_names_it_and_keeps_the_finished_points(tmp_path, monkeypatch, capsys):
    _stop_at(monkeypatch, 2, _interrupt)
    cache = tmp_path / "c.jsonl"
    assert main([str(_spec(tmp_path)), "--workers", "0", "-o", str(tmp_path / "r.csv"), "--cache", str(cache),
                 "--quiet"]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(cache) in err[0] and "1 point finished" in err[0], err
    assert len(cache.read_text().splitlines()) == 1


def _failing_writes(monkeypatch, nth: int):
    """The cache file's n-th write (1-based) and every later one fail as a full disk does."""
    real_open, count = Path.open, [0]

    def opened(self, mode="r", *a, **kw):
        f = real_open(self, mode, *a, **kw)
        if self.name != "c.jsonl" or "a" not in mode:
            return f
        write = f.write

        def failing(text):
            count[0] += 1
            if count[0] >= nth and text:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return write(text)
        f.write = failing
        return f
    monkeypatch.setattr(Path, "open", opened)


def test_a_cache_write_that_fails_part_way_prints_every_computed_row(tmp_path, monkeypatch, capsys):
    _failing_writes(monkeypatch, 2)                      # the second point's row does not reach the disk
    cache, out = tmp_path / "c.jsonl", tmp_path / "r.csv"
    assert main([str(_spec(tmp_path)), "--workers", "0", "-o", str(out), "--cache", str(cache), "--quiet"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and str(cache) in err[0] and "No space left on device" in err[0], captured.err
    assert "Traceback" not in captured.err
    rows = _rows(captured.out)                           # both points computed, the second never cached
    assert [(r["point"], r["chunks"], r["status"]) for r in rows] == [("0", "1", "ok"), ("1", "2", "ok")]
    assert len(cache.read_text().splitlines()) == 1 and not out.exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_a_full_disk_after_the_writability_check_loses_nothing(tmp_path, capsys):
    """/dev/full opens for appending (the up-front check passes); its first write fails with ENOSPC."""
    assert main([str(_spec(tmp_path)), "--workers", "0", "-o", str(tmp_path / "r.csv"), "--cache", "/dev/full",
                 "--quiet"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "/dev/full" in err[0] and "No space left on device" in err[0], captured.err
    assert [r["chunks"] for r in _rows(captured.out)] == ["1"]     # the point whose row could not be cached


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="needs POSIX process groups and SIGINT")
@pytest.mark.parametrize("to", ["group", "process"])
def test_ctrl_c_on_a_dask_sweep_is_one_line_and_no_worker_traceback(tmp_path, to):
    """Ctrl-C in a terminal signals the whole foreground process group, the sweep and its Dask workers;
    `kill -INT` the sweep's process alone (its workers then lose their scheduler mid-task)."""
    pytest.importorskip("dask.distributed")
    # a fast first point, then points that run for many seconds: the signal comes while the sweep runs
    spec = _spec(tmp_path, 'numerics = true\n[axes]\nchunks = [1, 400, 400]\n[fixed]\nprofile = "seed-doc"\n')
    cache = tmp_path / "c.jsonl"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "kda.sweep", str(spec), "--workers", "1", "-o",
                             str(tmp_path / "r.csv"), "--cache", str(cache)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not (cache.is_file() and cache.read_text().endswith("\n")):    # the first point is cached
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no point finished in 120 s"
            time.sleep(0.05)
        if to == "group":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = err.decode()
    assert proc.returncode == 130, text
    assert "Traceback" not in text and len(text.strip().splitlines()) == 1, text
    assert str(cache) in text and "interrupted" in text
    assert len(cache.read_text().splitlines()) == 1


def test_a_table_that_cannot_be_written_with_no_cache_prints_its_rows(tmp_path, capsys, monkeypatch):
    from tests.studies.test_sweep import _full_disk
    _full_disk(monkeypatch)                              # the write fails after the up-front check
    assert main([str(_spec(tmp_path)), "--workers", "0", "-o", str(tmp_path / "r.csv"), "--no-cache",
                 "--quiet"]) == 2
    assert not (tmp_path / "r.csv").exists()
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "the 3 rows are on stdout" in err[0], captured.err
    assert [r["chunks"] for r in _rows(captured.out)] == ["1", "2", "3"]


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="needs POSIX signal masks")
def test_ctrl_c_while_the_cluster_starts_stops_the_sweep(tmp_path, monkeypatch, capsys):
    """A Ctrl-C that arrives while the local cluster starts is held until it has started, then stops the
    sweep (exit 130, one line): it is neither lost (every point run, exit 0) nor a traceback."""
    dd = pytest.importorskip("dask.distributed")
    real = dd.LocalCluster

    def starting(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)         # the user presses Ctrl-C now
        return real(*args, **kwargs)
    monkeypatch.setattr(dd, "LocalCluster", starting)
    cache = tmp_path / "c.jsonl"
    assert main([str(_spec(tmp_path)), "--workers", "1", "-o", str(tmp_path / "r.csv"), "--cache", str(cache),
                 "--quiet"]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("interrupted: 0 points finished"), err
    assert not (tmp_path / "r.csv").exists()
