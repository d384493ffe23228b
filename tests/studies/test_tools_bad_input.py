"""The tools beside kda.run (kda.sweep, kda.validate, npusim.calibrate, kda.attribution, kda.stability) and the
files they all write: every refusal is one line with exit status 2, before the work where it can be known
then; a file is written whole or not at all, and what was computed stays on stdout."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

SMALL = ["--no-numerics", "--chunks", "2", "--dk", "16", "--dv", "16"]


def one_line(capsys, code, *needles) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:"), (code, captured.err)
    assert "Traceback" not in captured.err
    for n in needles:
        assert n in err[0], err[0]
    return captured.out


def full_disk(monkeypatch):
    """Every file write fails as on a full disk once it is under way (after any up-front check)."""
    def replace(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr("npusim.output.files.os.replace", replace)


# ---- kda.run's files -----------------------------------------------------------------------------------------
def test_a_plot_onto_a_device_is_refused_before_the_run(tmp_path, capsys):
    from kda.cli.run import main
    link = tmp_path / "x.png"
    link.symlink_to("/dev/full")                 # writes would vanish (or fail): not a file to plot into
    out = one_line(capsys, main([*SMALL, "--plot", str(link)]), "--plot", "not a regular file")
    assert out == ""


@pytest.mark.parametrize("flag, name", [("--plot", "x.png"), ("--trace", "t.json"), ("--plot", "x.svg")])
def test_a_write_that_fails_names_its_option_keeps_the_report_and_leaves_no_file(tmp_path, capsys, monkeypatch,
                                                                                 flag, name):
    from kda.cli.run import main
    full_disk(monkeypatch)
    out = one_line(capsys, main([*SMALL, flag, str(tmp_path / name)]), f"{flag} {tmp_path / name}",
                   "No space left on device")
    assert out.startswith("KDA v3 on")                                 # the report is printed
    assert list(tmp_path.iterdir()) == []                              # no empty, partial or temporary file


def test_one_file_for_both_plot_and_trace_is_refused(tmp_path, capsys):
    from kda.cli.run import main
    one_line(capsys, main([*SMALL, "--plot", str(tmp_path / "x.png"), "--trace", str(tmp_path / "x.png")]),
             "one file")


def test_svg_figures_are_the_same_bytes_every_time(tmp_path):
    import matplotlib.pyplot as plt
    from kda.views.plots import save

    def draw(path):
        fig, ax = plt.subplots()
        ax.plot([0, 1, 2], [1, 3, 2])
        ax.set_title("x")
        return save(fig, path).read_bytes()
    assert draw(tmp_path / "a.svg") == draw(tmp_path / "b.svg")
    assert draw(tmp_path / "a.pdf") == draw(tmp_path / "b.pdf")


# ---- kda.sweep -----------------------------------------------------------------------------------------------
def _spec(tmp_path, body='numerics = false\n[axes]\nversion = ["v2", "v3"]\n[fixed]\nchunks = 2\ndk = 16\ndv = 16\n'):
    spec = tmp_path / "s.toml"
    spec.write_text(body)
    return spec


def test_a_sweep_point_that_fails_parity_is_a_failed_row(tmp_path, capsys):
    """v1's state decays along the wrong axis: with slow gates its final state is far off (as kda.run --strict
    says, exit 1); the sweep says so too, in the row and in its exit status."""
    from kda.sweep.__main__ import main
    from kda.sweep.table import read_table
    spec = _spec(tmp_path, 'numerics = true\n[axes]\nversion = ["v1", "v2"]\n[fixed]\nchunks = 4\ndk = 16\n'
                           'dv = 16\ngates = "slow"\ndtype = "fp32"\n')
    out = tmp_path / "r.csv"
    assert main([str(spec), "--workers", "0", "-o", str(out), "--no-cache", "--quiet"]) == 1
    df = read_table(out)
    assert list(df["status"]) == ["failed", "ok"]
    assert df["error"][0].startswith("fails parity") and "known defect" in df["error"][0]
    assert "1 of 2 points failed" in capsys.readouterr().err


def test_more_workers_than_cores_is_one_line(tmp_path, capsys):
    from kda.sweep.__main__ import main
    one_line(capsys, main([str(_spec(tmp_path)), "--workers", "100000", "--no-cache"]), "--workers 100000",
             "cores")


@pytest.mark.parametrize("where", ["/dev/zero", "dir"])
def test_a_spec_that_is_not_a_file_is_refused_without_reading_it(tmp_path, capsys, where):
    from kda.sweep.__main__ import main
    path = tmp_path if where == "dir" else where
    one_line(capsys, main([str(path), "-o", str(tmp_path / "r.csv")]), "not a regular file")


def test_a_huge_spec_is_refused(tmp_path, capsys):
    from kda.sweep.__main__ import main
    spec = tmp_path / "big.toml"
    spec.write_text("# " + "x" * (2 << 20) + "\n")
    one_line(capsys, main([str(spec), "-o", str(tmp_path / "r.csv")]), "KiB")


@pytest.fixture
def table(tmp_path):
    from kda.sweep.__main__ import main
    out = tmp_path / "r.csv"
    assert main([str(_spec(tmp_path)), "--workers", "0", "-o", str(out), "--no-cache", "--quiet"]) == 0
    return out


def test_plot_a_metric_that_is_not_numbers_is_one_line(table, capsys):
    from kda.sweep.__main__ import main
    one_line(capsys, main(["plot", str(table), "--metric", "version"]), "--metric version", "numbers")


@pytest.mark.parametrize("where", ["file", "/proc/kda_plots"])
def test_plot_into_a_file_or_a_read_only_place_is_one_line(table, tmp_path, capsys, where):
    from kda.sweep.__main__ import main
    outdir = table if where == "file" else Path(where)
    one_line(capsys, main(["plot", str(table), "--outdir", str(outdir)]), "--outdir")


def test_plot_files_that_cannot_be_written_leave_nothing_behind(table, tmp_path, capsys, monkeypatch):
    from kda.sweep.__main__ import main
    full_disk(monkeypatch)
    one_line(capsys, main(["plot", str(table), "--outdir", str(tmp_path / "plots")]), "No space left")
    assert list((tmp_path / "plots").iterdir()) == []


# ---- npusim.calibrate ----------------------------------------------------------------------------------------
ROWS = "kernel,shape,dtype,measured_us\nkda_v3,1x64x1x128x128,bf16,30\nkda_v3,1x1024x1x128x128,bf16,300\n"


@pytest.fixture
def rows(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(ROWS)
    return path


@pytest.mark.parametrize("name", [".registry", "", "pwn", "os.path"])
def test_calibrate_takes_no_module_from_the_working_directory(rows, tmp_path, capsys, monkeypatch, name):
    from npusim.fit.calibrate import main
    (tmp_path / "pwn.py").write_text("raise SystemExit('pwn.py ran')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))          # as `python -m` puts the working directory first
    one_line(capsys, main([str(rows), "--fields", "sync.latency_us", "--kernels", name]), "--kernels",
             "not a kernel table")


def test_calibrate_takes_a_kernel_table_by_its_path_and_names_it(rows, tmp_path, capsys):
    from npusim.fit.calibrate import main
    table = tmp_path / "my_table.py"
    table.write_text("from kda.kernels.registry import resolve\n")
    assert main([str(rows), "--fields", "sync.latency_us", "--kernels", str(table)]) == 0
    assert f"kernel table: {table.resolve()}" in capsys.readouterr().err


@pytest.mark.parametrize("date", ["2026-11-23\n[chip]", "\x00"])
def test_calibrate_refuses_a_date_that_would_break_the_profile(rows, tmp_path, capsys, date):
    from npusim.fit.calibrate import main
    one_line(capsys, main([str(rows), "--fields", "sync.latency_us", "--date", date, "--out",
                           str(tmp_path / "f.toml")]), "--date")
    assert not (tmp_path / "f.toml").exists()


def test_a_data_file_whose_name_holds_a_newline_still_gives_a_profile_that_loads(tmp_path, capsys):
    from npusim import load_profile
    from npusim.fit.calibrate import main
    path = tmp_path / "odd\nname.csv"
    path.write_text(ROWS)
    assert main([str(path), "--fields", "sync.latency_us", "--out", str(tmp_path / "f.toml")]) == 0
    first = (tmp_path / "f.toml").read_text().splitlines()[0]
    assert first.startswith("# Calibrated") and "odd\\nname.csv" in first       # the comment stays one line
    assert "odd\nname.csv" in load_profile(tmp_path / "f.toml").sources["sync.latency_us"]


BIG = "B=22000;T=4096;H=32;K=128;V=128"        # 1.9e6 chunks on the busiest core: one prediction is allowed


@pytest.mark.parametrize("shapes, needle", [(["B=1;T=64;H=1;K=128;V=128;C=100000"], "working set"),
                                            (["100000000x64x1x128x128"], "sequences"),
                                            (["B=100000;T=4096;H=32;K=128;V=128"], "busiest core"),
                                            ([BIG, BIG], "predictions")])
@pytest.mark.parametrize("tool", ["calibrate", "validate"])
def test_rows_beyond_the_work_limits_are_one_line_before_the_work(tmp_path, capsys, shapes, needle, tool):
    path = tmp_path / "m.csv"
    if tool == "calibrate":
        from npusim.fit.calibrate import main
        path.write_text("kernel,shape,dtype,measured_us\n" + "".join(f'kda_v3,"{s}",bf16,30\n' for s in shapes))
        code = main([str(path), "--fields", "sync.latency_us"])
    else:                                   # 51 predictions of each row: the nominal and 50 samples
        from kda.cli.validate import main
        path.write_text("id,kernel,shape,dtype,measured_us,implementation,held_out\n"
                        + "".join(f'r{i},kda_v3,"{s}",bf16,30,x,no\n' for i, s in enumerate(shapes)))
        code = main(["--data", str(path), "--samples", "50"])
    assert one_line(capsys, code, needle, "NPUSIM_NO_LIMITS") == ""


# ---- kda.validate --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, needle", [(["--seed", "-1"], "--seed"), (["--fields", "sync.latency_us"], "--fit"),
                                          (["--plot", "/proc/v.png"], "--plot")])
def test_validate_options_are_checked_before_the_work(capsys, argv, needle):
    from kda.cli.validate import main
    one_line(capsys, main(["--samples", "0", *argv]), needle)


def test_validate_plot_onto_a_directory_is_refused_before_the_work(tmp_path, capsys):
    from kda.cli.validate import main
    (tmp_path / "v.png").mkdir()
    one_line(capsys, main(["--samples", "0", "--plot", str(tmp_path / "v.png")]), "--plot", "directory")


# ---- kda.attribution and kda.stability -----------------------------------------------------------------------
@pytest.mark.parametrize("argv, needle", [(["--chunks", "1000000000"], "limit"), (["--heads", "100000000"], "limit"),
                                          (["--target", "nan"], "--target"), (["--target", "-1"], "--target"),
                                          (["--target", "0"], "--target")])
def test_attribution_refuses_in_one_line(capsys, argv, needle):
    from kda.cli.attribution import main
    one_line(capsys, main(argv), needle)


def test_stability_refuses_a_grid_beyond_the_limits_in_one_line(capsys):
    from kda.cli.stability import main
    one_line(capsys, main(["--chunks", "100000000", "--no-thresholds"]), "limit", "NPUSIM_NO_LIMITS")


# ---- profiles -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["set", "file"])
def test_a_switch_is_0_or_1(tmp_path, capsys, how):
    from kda.cli.run import main
    if how == "set":
        argv = [*SMALL, "--set", "isa.enabled=0.5"]
    else:
        (tmp_path / "p.toml").write_text('inherits = "ascend-910b2"\n[isa]\nenabled = 0.5\n')
        argv = [*SMALL, "--profile", str(tmp_path / "p.toml")]
    one_line(capsys, main(argv), "isa.enabled", "0 (off) or 1 (on)")
    assert main([*SMALL, "--set", "isa.enabled=0"]) == 0


def test_interleaving_more_sequences_than_a_core_holds_is_refused(capsys):
    from kda.cli.run import main
    one_line(capsys, main([*SMALL, "--interleave", "1000000"]), "--interleave 1000000", "at most 1 sequence")
    one_line(capsys, main([*SMALL, "--heads", "48", "--interleave", "3"]), "at most 2 sequence(s)")
    assert main([*SMALL, "--heads", "48", "--interleave", "2"]) == 0


# ---- one check per dimension: a tool that records a chunk inherits it ---------------------------------------
def test_recording_a_chunk_checks_its_dimensions_for_any_tool():
    """A new tool that records a design (timing only, the kernels' registry, the numerics) passes
    kda.driver.execute.check_recording: a chunk this machine cannot hold is one LimitError line before any tensor."""
    from kda.driver.execute import record_graph, record_graphs
    from kda.kernels.recording import record_kernel
    from kda.kernels.registry import KERNELS
    from kda.programs import get_design, get_program
    from npusim import Precision
    from npusim.model.limits import LimitError
    with pytest.raises(LimitError, match="recording one chunk .*C = 1000000"):
        record_graph(get_program("v3"), chunk_size=1_000_000, d_k=16, d_v=16, precision=Precision("bf16"))
    with pytest.raises(LimitError, match="d_k = 100000, d_v = 100000"):    # the state alone: 2 x 4e10 bytes
        record_graphs(get_design("v5"), chunk_size=64, d_k=100_000, d_v=100_000, precision=Precision("bf16"))
    with pytest.raises(LimitError, match="recording one chunk"):
        record_kernel(KERNELS["gdn_pto"][0], 1_000_000, 16, 16, "fp16", 1)
