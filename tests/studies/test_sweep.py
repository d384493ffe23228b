"""python -m kda.sweep: the grid, Dask against in-process, the cache, error rows, bad specs, the plots."""
import json
import math

import pytest

from kda.sweep import parse_spec, run_sweep
from kda.sweep import runner as sweep_runner
from kda.sweep.__main__ import main
from kda.sweep.plot import best_per_shape, pareto_mask

pytest.importorskip("pandas")

# timing only, the document's profile, 4 chunks of 64: each point takes milliseconds
SMALL = {"numerics": False, "metrics": ["pipeline.latency_us", "layer.latency_us", "layer.syncs_per_chunk", "workspace_kib"],
         "axes": {"version": ["v2", "v3"], "sync.latency_us": [0.5, 1.0]},
         "fixed": {"profile": "seed-doc", "chunks": 4}}


def _same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _rows_equal(x, y):
    assert [list(r) for r in x] == [list(r) for r in y]
    for r, s in zip(x, y):
        assert all(_same(r[k], s[k]) for k in r), (r, s)


def test_grid_order_and_the_override_reaches_the_profile():
    rows = run_sweep(parse_spec(SMALL)).rows
    assert [(r["point"], r["version"], r["sync.latency_us"]) for r in rows] == [
        (0, "v2", 0.5), (1, "v2", 1.0), (2, "v3", 0.5), (3, "v3", 1.0)]     # the first axis varies slowest
    assert all(r["status"] == "ok" and r["error"] is None for r in rows)
    # serial: every hand-off pays its fixed cost once per chunk; the state rides on an existing sync.
    # +0.5 us per sync x 4 chunks x (10 syncs for v2, 6 for v3)
    assert [r["layer.syncs_per_chunk"] for r in rows] == [10, 10, 6, 6]
    assert rows[1]["pipeline.latency_us.serial"] - rows[0]["pipeline.latency_us.serial"] == pytest.approx(4 * 10 * 0.5)
    assert rows[3]["pipeline.latency_us.serial"] - rows[2]["pipeline.latency_us.serial"] == pytest.approx(4 * 6 * 0.5)
    assert "overlap.cube_vec_concurrent_us" not in rows[0]          # not among the spec's metrics
    assert rows[0]["chunks"] == 4 and rows[0]["heads"] == 1          # the report's settings are always kept


def test_local_cluster_with_two_workers_gives_the_in_process_rows():
    pytest.importorskip("distributed")
    spec = parse_spec(SMALL)
    local = run_sweep(spec, workers=0)
    dask = run_sweep(spec, workers=2)
    assert dask.workers == 2 and dask.ran == 4
    _rows_equal(local.rows, dask.rows)


def test_an_existing_cluster_by_its_scheduler_address():
    distributed = pytest.importorskip("distributed")
    import logging
    spec = parse_spec(SMALL)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster:
        out = run_sweep(spec, scheduler=cluster.scheduler_address)
        assert (out.workers, out.ran) == (1, 4)
        assert len(cluster.scheduler_info["workers"]) == 1           # the sweep leaves the cluster running
    _rows_equal(run_sweep(spec).rows, out.rows)


def test_a_cluster_that_cannot_be_reached_gets_one_line_and_exit_2(tmp_path, capsys):
    pytest.importorskip("distributed")
    spec = tmp_path / "s.toml"
    spec.write_text('numerics = false\n[axes]\nchunks = [1, 2]\n')
    assert main([str(spec), "--scheduler", "not-an-address", "-o", str(tmp_path / "out.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "--scheduler not-an-address" in err, err
    assert not (tmp_path / "out.csv").exists()


def test_rows_are_deterministic_and_the_seed_reaches_the_inputs():
    spec = {"axes": {"seed": [0, 1]}, "fixed": {"version": "v3", "chunks": 2},
            "metrics": ["errors", "pipeline.latency_us"]}
    first, again = run_sweep(parse_spec(spec)).rows, run_sweep(parse_spec(spec)).rows
    _rows_equal(first, again)                                      # numerics on, no cache: the same rows
    assert first[0]["errors.o"] != first[1]["errors.o"]            # other inputs, another rounding error
    assert first[0]["pipeline.latency_us.pipelined"] == first[1]["pipeline.latency_us.pipelined"]   # timing: shapes only


def test_axes_range_over_the_multipass_designs_interleave_and_profile_fields():
    # one core, one head; a sequence of 256 tokens is 4 chunks of 64
    spec = parse_spec({"numerics": False, "metrics": ["layer"],
                       "axes": {"version": ["v3", "v5", "fla"], "seqlens": [[256], [256, 256]],
                                "interleave": [1, 2], "sync.latency_us": [0.5, 1.0]},
                       "fixed": {"profile": "ascend-910b2", "heads": 1, "cores": 1}})
    rows = run_sweep(spec).rows
    assert len(rows) == 3 * 2 * 2 * 2 and all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    at = {(r["version"], r["seqlens"], r["interleave"], r["sync.latency_us"]): r for r in rows}
    # v3: one fused kernel; v5: two passes, one kernel with an all-core barrier between; fla: FLA's six kernels
    kernels = {"v3": (1, 0), "v5": (1, 1), "fla": (6, 0)}
    assert {v: (at[(v, "256", 1, 0.5)]["layer.launches"], at[(v, "256", 1, 0.5)]["layer.barriers"])
            for v in kernels} == kernels
    assert at[("v3", "256", 1, 0.5)]["layer.syncs_per_chunk"] == 6             # the document's six syncs
    # v5's state travels on a hand-off of its own, from each chunk to the next (kda/programs/v5.py); v3's
    # rides on sync ③, fla's stays in fwd_h
    own_state = {"v3": 0, "v5": 1, "fla": 0}
    for v, (launches, barriers) in kernels.items():
        one = at[(v, "256", 1, 0.5)]
        # serial: each sync's fixed cost is paid once per chunk, in every pass, and an own state hand-off
        # once between chunks: +0.5 us x (syncs x 4 chunks + 3)
        assert at[(v, "256", 1, 1.0)]["layer.serial_us"] - one["layer.serial_us"] == pytest.approx(
            0.5 * (one["layer.syncs_per_chunk"] * 4 + own_state[v] * 3))
        # two sequences: twice the work, but each launch (20 us on 910B2) and barrier (1 us) is paid once
        two = at[(v, "256,256", 1, 0.5)]
        assert two["layer.serial_us"] == pytest.approx(2 * one["layer.serial_us"] - 20.0 * launches - 1.0 * barriers)
        # interleave: nothing to alternate with in one sequence; with two, the core fills one's gaps
        assert at[(v, "256", 2, 0.5)]["layer.latency_us"] == one["layer.latency_us"]
        both = at[(v, "256,256", 2, 0.5)]
        assert both["layer.serial_us"] == pytest.approx(two["layer.serial_us"], rel=1e-12)
        assert both["layer.latency_us"] < two["layer.latency_us"]


def test_the_cache_skips_finished_points(tmp_path, monkeypatch):
    calls = []
    real = sweep_runner.run_task
    monkeypatch.setattr(sweep_runner, "run_task",
                        lambda task, *a: calls.extend((p.version, p.settings) for p in task) or real(task, *a))
    cache = tmp_path / "c.jsonl"
    first = run_sweep(parse_spec(SMALL), cache=cache)
    assert (first.ran, first.cached, len(calls)) == (4, 0, 4)
    again = run_sweep(parse_spec(SMALL), cache=cache)
    assert (again.ran, again.cached, len(calls)) == (0, 4, 4)
    _rows_equal(first.rows, again.rows)
    extended = {**SMALL, "axes": {**SMALL["axes"], "sync.latency_us": [0.5, 1.0, 2.0]}}
    more = run_sweep(parse_spec(extended), cache=cache)
    assert (more.ran, more.cached) == (2, 4)                      # only v2 and v3 at 2.0 us
    assert [c[1].overrides for c in calls[4:]] == [{"sync.latency_us": 2.0}] * 2
    with cache.open("a") as f:
        f.write('{"key": "cut short by an interr')                # an interrupted write is skipped
    assert run_sweep(parse_spec(extended), cache=cache).ran == 0


def test_a_failing_point_is_a_row_with_its_error():
    spec = parse_spec({"numerics": False, "axes": {"version": ["v3", "fla"], "chunk-size": [64, 256]},
                       "fixed": {"profile": "seed-doc", "chunks": 2, "resident": "Q_scaled,K_decay"}})
    rows = run_sweep(spec).rows
    by = {(r["version"], r["chunk_size"]): r for r in rows}
    assert by[("v3", 64)]["status"] == "ok"
    # C = 256: Q_scaled and K_decay are 256 x 128 bf16 = 64 KiB each, the state 32 KiB: 160 KiB > 64 KiB
    assert by[("v3", 256)]["status"] == "failed"
    assert "resident region needs 160 KiB" in by[("v3", 256)]["error"]
    for C in (64, 256):                                          # fla has no per-chunk plan to replace
        assert by[("fla", C)]["status"] == "failed" and "--resident" in by[("fla", C)]["error"]
    assert [r["point"] for r in rows] == [0, 1, 2, 3]


def test_a_phase_that_fits_no_tiling_of_its_unit_memory_is_a_failed_row():
    # v4 at C = 128 (the core model, on by default): one [8, 136, 128] bf16 tile of Phase A's products is
    # 8 x 136 x 128 x 2 B = 272 KiB, more than a 910B2 Vector core's 192 KiB Unified Buffer; at C = 64 it fits
    spec = parse_spec({"numerics": False, "axes": {"chunk-size": [64, 128]},
                       "fixed": {"version": "v4", "chunks": 2, "profile": "ascend-910b2"}})
    ok, bad = run_sweep(spec).rows
    assert ok["status"] == "ok" and ok["pipeline.latency_us.pipelined"] > 0
    assert bad["status"] == "failed" and "192 KiB UB" in bad["error"], bad["error"]
    assert bad.get("pipeline.latency_us.pipelined") is None                # no timing: never a silently empty "ok" row


def test_an_overflow_is_a_failed_row_with_its_numbers():
    spec = parse_spec({"axes": {"dtype": ["bf16", "fp16"]}, "fixed": {"version": "v3", "chunks": 2}})
    ok, bad = run_sweep(spec).rows
    assert ok["status"] == "ok" and ok["parity.pass"] is True
    assert bad["status"] == "failed" and bad["error"].startswith("overflow: inf/NaN first in K_div")
    assert bad["pipeline.latency_us.pipelined"] > 0                       # the timing of a failed point is kept


@pytest.mark.parametrize("body, message", [
    ('[axes]\nwarp-size = [1, 2]\n', "unknown axis 'warp-size'"),
    ('[axes]\nchunk-size = []\n', "axis 'chunk-size' has no values"),
    ('[axes]\ndtype = ["bf16", "fp8"]\n', "axis 'dtype' value 'fp8'"),
    ('[axes]\nversion = ["v3", "v9"]\n', "unknown version 'v9'"),
    ('[axes]\nchunks = [4, 0]\n', "--chunks must be >= 1"),
    ('[axes]\n"sync.latency_ms" = [1.0]\n', "latency_ms"),
    ('[axes]\njson = [true]\n', "'json' cannot be swept"),
    ('[axes]\nchunks = 4\n', "must be a list"),
    ('numerics = "no"\n', "numerics must be true or false"),
    ('[axes\n', "not a readable TOML file"),
    ('[axes]\nversion = ["v5", "v9"]\n', "unknown version 'v9'"),
    ('[axes]\ninterleave = [1, 0]\n', "--interleave"),
    ('[axes]\n"sync.latency_us" = ["fast"]\n', "sync.latency_us does not take 'fast'"),
    ('[axes]\nseqlens = [[256, 0]]\n', "seqlens"),
    ('[fixed]\nversion = "all"\n', "make version an axis"),
    ('[fixed]\nbackward = true\n', "'backward' cannot be swept or fixed"),   # never a forward row in its place
])
def test_a_bad_spec_gets_one_line_and_exit_2(tmp_path, capsys, body, message):
    spec = tmp_path / "bad.toml"
    spec.write_text(body)
    assert main([str(spec), "--workers", "0", "-o", str(tmp_path / "out.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert not (tmp_path / "out.csv").exists()


def test_cli_writes_the_table_and_plot_finds_the_best_point(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('numerics = false\n[axes]\nversion = ["v2", "v3"]\n"sync.latency_us" = [0.5, 1.0]\n'
                    '[fixed]\nprofile = "seed-doc"\nchunks = 4\n')
    out = tmp_path / "r.parquet"
    assert main([str(spec), "--workers", "0", "-o", str(out)]) == 0
    assert (tmp_path / "r.cache.jsonl").is_file()
    from kda.sweep import read_table
    df = read_table(out)
    assert list(df["point"]) == [0, 1, 2, 3] and set(df["status"]) == {"ok"}
    assert main(["plot", str(out), "--outdir", str(tmp_path / "p")]) == 0
    assert {p.name for p in (tmp_path / "p").iterdir()} == {"pareto.png", "heatmap_version_sync.latency_us.png",
                                                            "best.md"}
    best = best_per_shape(df)
    assert len(best) == 1                                        # one shape
    fastest = df.loc[df["layer.latency_us"].idxmin()]
    assert (best["version"][0], best["sync.latency_us"][0]) == (fastest["version"], fastest["sync.latency_us"])
    assert (fastest["version"], fastest["sync.latency_us"]) == ("v3", 0.5)   # fewer syncs, cheaper syncs
    assert "v3" in capsys.readouterr().out


def _full_disk(monkeypatch):
    """The table's write fails as on a full disk, after the up-front check passed."""
    import errno
    import os

    def replace(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr("npusim.output.files.os.replace", replace)


def test_a_table_that_cannot_be_written_keeps_the_points_in_the_cache(tmp_path, capsys, monkeypatch):
    spec = tmp_path / "s.toml"
    spec.write_text('numerics = false\n[axes]\nchunks = [1, 2, 3]\n[fixed]\nprofile = "seed-doc"\nversion = "v3"\n')
    cache = tmp_path / "c.jsonl"
    with monkeypatch.context() as m:
        _full_disk(m)
        assert main([str(spec), "--workers", "0", "-o", str(tmp_path / "r.csv"), "--cache", str(cache),
                     "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"the 3 rows are in {cache}" in err and "No space left" in err, err
    assert len(cache.read_text().splitlines()) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl", "s.toml"]     # no empty or partial table
    assert main([str(spec), "--workers", "0", "-o", str(tmp_path / "r2.csv"), "--cache", str(cache)]) == 0
    assert "3 points (0 run in-process, 3 from the cache)" in capsys.readouterr().err


def test_the_progress_counts_done_failed_and_left():
    from kda.sweep.runner import _Bar
    bar = _Bar(total=5, failed=1, done=2, enabled=False)         # 2 from the cache, 1 of them failed
    bar.tick(failed=False)
    bar.tick(failed=True)
    assert bar._text() == "done 2  failed 2  left 1"


def test_csv_where_parquet_cannot_be_written(tmp_path, monkeypatch):
    from kda.sweep import read_table, table
    rows = run_sweep(parse_spec(SMALL)).rows
    monkeypatch.setattr(table, "have_parquet", lambda: False)
    written = table.write_table(rows, tmp_path / "r.parquet")
    assert written == tmp_path / "r.csv"
    df = read_table(written)
    assert list(df["version"]) == ["v2", "v2", "v3", "v3"]
    assert list(df["pipeline.latency_us.serial"]) == pytest.approx([r["pipeline.latency_us.serial"] for r in rows])


def test_pareto_mask_keeps_what_nothing_dominates():
    nan = float("nan")
    pts = [[1, 5, nan], [2, 2, nan], [3, 1, nan], [3, 3, nan], [1, 5, nan]]
    assert pareto_mask(pts) == [True, True, True, False, True]   # (3, 3) is beaten by (2, 2); ties both stay


def test_version_all_expands_to_every_design():
    from kda.programs import DESIGNS
    spec = parse_spec({"numerics": False, "axes": {"version": ["all"]}, "fixed": {"chunks": 1}})
    assert [p.version for p in spec.points()] == list(DESIGNS)
    assert json.dumps(spec.axes)                                  # the spec stays plain data


def test_an_edited_profile_is_a_new_point_not_the_cached_row(tmp_path):
    """The cache key holds the profile's content: after the file changes, the old row must not come back."""
    prof, cache = tmp_path / "p.toml", tmp_path / "c.jsonl"
    spec = {"numerics": False, "metrics": ["pipeline.latency_us"], "axes": {"version": ["v3"]},
            "fixed": {"profile": str(prof), "chunks": 2, "dk": 16, "dv": 16}}
    prof.write_text('inherits = "seed-doc"\n[sync]\nlatency_us = 0.5\n')
    first = run_sweep(parse_spec(spec), cache=cache)
    prof.write_text('inherits = "seed-doc"\n[sync]\nlatency_us = 5.0\n')     # 4.5 us more per hand-off
    second = run_sweep(parse_spec(spec), cache=cache)
    assert first.ran == 1 and second.ran == 1 and second.cached == 0
    assert second.rows[0]["pipeline.latency_us.pipelined"] > first.rows[0]["pipeline.latency_us.pipelined"] + 4.5


def test_a_cache_whose_last_line_was_cut_short_keeps_the_next_row(tmp_path):
    from kda.sweep.cache import Cache, row_digest
    path = tmp_path / "c.jsonl"
    whole = json.dumps({"key": "a", "row": {"x": 1}, "digest": row_digest("a", {"x": 1})})
    path.write_text(whole + '\n{"key": "b", "ro')                                # interrupted mid-line
    cache = Cache(path)
    cache.add("c", {"x": 3})
    cache.close()
    again = Cache(path)
    assert again.get("a") == {"x": 1} and again.get("c") == {"x": 3} and again.get("b") is None
    assert again.skipped == 1


def test_an_edited_parent_profile_is_a_new_point(tmp_path):
    """The key holds every file a profile inherits from: editing the parent of the profile a spec names must
    not bring the old row back."""
    base, child, cache = tmp_path / "base.toml", tmp_path / "child.toml", tmp_path / "c.jsonl"
    child.write_text('inherits = "base.toml"\n[chip]\nbarrier_us = 1.0\n')
    spec = {"numerics": False, "metrics": ["pipeline.latency_us"], "axes": {"version": ["v3"]},
            "fixed": {"profile": str(child), "chunks": 2, "dk": 16, "dv": 16}}
    base.write_text('inherits = "seed-doc"\n[sync]\nlatency_us = 0.5\n')
    first = run_sweep(parse_spec(spec), cache=cache)
    base.write_text('inherits = "seed-doc"\n[sync]\nlatency_us = 5.0\n')     # 4.5 us more per hand-off
    second = run_sweep(parse_spec(spec), cache=cache)
    assert first.ran == 1 and second.ran == 1 and second.cached == 0
    assert second.rows[0]["pipeline.latency_us.pipelined"] > first.rows[0]["pipeline.latency_us.pipelined"] + 4.5


def _cached_sweep(tmp_path):
    spec = {"numerics": False, "metrics": ["layer.latency_us"], "axes": {"version": ["v2", "v3"]},
            "fixed": {"profile": "seed-doc", "chunks": 2, "dk": 16, "dv": 16}}
    cache = tmp_path / "c.jsonl"
    return parse_spec(spec), cache, run_sweep(parse_spec(spec), cache=cache)


def test_a_tampered_cache_row_is_computed_again(tmp_path):
    spec, cache, first = _cached_sweep(tmp_path)
    lines = cache.read_text().splitlines()
    entry = json.loads(lines[1])
    entry["row"]["layer.latency_us"] = 1.0                  # v3's latency edited, the digest left as it was
    cache.write_text("\n".join([lines[0], json.dumps(entry)]) + "\n")
    again = run_sweep(spec, cache=cache)
    assert (again.cached, again.ran, again.unusable_cache_lines) == (1, 1, 1)
    assert again.rows[1]["layer.latency_us"] == first.rows[1]["layer.latency_us"] != 1.0


def test_a_cache_of_binary_garbage_is_run_again_with_a_warning(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('numerics = false\n[axes]\nversion = ["v3"]\n[fixed]\nchunks = 2\ndk = 16\ndv = 16\n')
    cache = tmp_path / "c.jsonl"
    cache.write_bytes(bytes(range(256)) * 8 + b"\n\xff\xfe{\n")
    assert main([str(spec), "--workers", "0", "-o", str(tmp_path / "r.csv"), "--cache", str(cache)]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "could not be used" in err and (tmp_path / "r.csv").stat().st_size > 0


@pytest.mark.parametrize("where", ["dir", "/proc/c.jsonl"])
def test_an_unwritable_cache_is_refused_before_the_first_point(tmp_path, capsys, where):
    spec = tmp_path / "s.toml"
    spec.write_text('numerics = false\n[axes]\nversion = ["v3"]\n[fixed]\nchunks = 2\n')
    cache = tmp_path if where == "dir" else where
    assert main([str(spec), "--workers", "0", "-o", str(tmp_path / "r.csv"), "--cache", str(cache)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--cache" in err[0] and not (tmp_path / "r.csv").exists()


def test_a_sweep_with_failed_points_exits_1_after_writing_its_table(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('numerics = false\n[axes]\nslot-kib = [1, 128]\n[fixed]\nchunks = 2\nprofile = "seed-doc"\n')
    out = tmp_path / "r.csv"
    assert main([str(spec), "--workers", "0", "-o", str(out), "--no-cache", "--quiet"]) == 1
    assert out.exists() and "1 of 2 points failed" in capsys.readouterr().err


def test_fla_in_kernel_options_are_axes():
    """--gate-in-kernel and friends go through the sweep as kda.run takes them: one prep pass ahead of the
    design, one barrier, and the run grows by it (kda/programs/in_kernel.py)."""
    spec = parse_spec({"numerics": False, "metrics": ["layer"],
                       "axes": {"gate-in-kernel": [False, True], "qk-l2norm-in-kernel": [False, True]},
                       "fixed": {"version": "v3", "profile": "ascend-910b2", "heads": 1, "cores": 1, "chunks": 4}})
    rows = run_sweep(spec).rows
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    at = {(r["gate_in_kernel"], r["qk_l2norm_in_kernel"]): r for r in rows}
    assert (at[(False, False)]["layer.barriers"], at[(True, False)]["layer.barriers"]) == (0, 1)
    assert at[(False, False)]["layer.latency_us"] < at[(True, False)]["layer.latency_us"] < \
        at[(True, True)]["layer.latency_us"]
