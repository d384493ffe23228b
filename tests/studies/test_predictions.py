"""Predictions registered before the measured values (kda/studies/predictions.py, kda.validate): the commit a
prediction came from, registration before or after the measured value, a figure that moved (re-registered,
both figures reported), bad input (one line naming the file and row, exit 2), and the held-out rule for the
measured KDA kernels in every fit (kda.validate --fit, npusim.calibrate, benchmarks/calibrate_910b2.py)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from npusim import load_profile
from npusim.fit.measurements import MeasurementError

from kda.cli.validate import main as validate_cli
from kda.kernels.registry import model
from kda.studies import predictions as preds
from kda.studies.validate import load, validate

KERNEL, SHAPE = "kda_v3", "1x128x1x64x64"             # any modelled kernel: the machinery does not depend on it
MEASURED = "id,kernel,stage,shape,dtype,measured_us,implementation,held_out\n" \
           f"r1,{KERNEL},,{SHAPE},bf16,100,toy,yes\n"
HEADER = "id,kernel,stage,shape,dtype,predicted_us,profile\n"

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture(scope="module")
def now_us():
    return model(KERNEL, SHAPE, "bf16").predict(load_profile("ascend-910b2"))


def _git(repo: Path, *args):
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo, check=True,
                   capture_output=True)


def _commit(repo: Path, files: dict, message: str):
    for name, text in files.items():
        (repo / name).write_text(text)
    _git(repo, "add", *files)
    _git(repo, "commit", "-m", message)


def _head(repo: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()


def _row(tmp: Path):
    rows, *_ = validate([tmp / "m.csv"], samples=0, registered=[tmp / "p.csv"])
    return rows[0]


@needs_git
def test_registered_before_the_measured_value(tmp_path, now_us):
    _git(tmp_path, "init", "-q")
    _commit(tmp_path, {"p.csv": HEADER + f"r1,{KERNEL},,{SHAPE},bf16,{now_us:.1f},ascend-910b2\n"}, "predictions")
    first = _head(tmp_path)
    _commit(tmp_path, {"m.csv": MEASURED}, "measured")
    reg = _row(tmp_path).registration
    assert (reg.status, reg.commit, reg.before) == ("registered", first, True)
    assert reg.registered_us == pytest.approx(round(now_us, 1)) and reg.measured_commit == _head(tmp_path)


@needs_git
def test_a_figure_changed_after_the_measured_value_is_re_registered_with_both(tmp_path, now_us):
    _git(tmp_path, "init", "-q")
    _commit(tmp_path, {"p.csv": HEADER + f"r1,{KERNEL},,{SHAPE},bf16,{2 * now_us:.1f},ascend-910b2\n"}, "predictions")
    _commit(tmp_path, {"m.csv": MEASURED}, "measured")
    _commit(tmp_path, {"p.csv": HEADER + f"r1,{KERNEL},,{SHAPE},bf16,{now_us:.1f},ascend-910b2\n"}, "re-registered")
    r = _row(tmp_path)
    reg = r.registration
    assert reg.status == "re-registered" and reg.commit == _head(tmp_path)
    assert reg.registered_us == pytest.approx(round(2 * now_us, 1))          # the figure before the measurement
    assert reg.file_us == pytest.approx(round(now_us, 1))
    assert r.registered_error == pytest.approx(round(2 * now_us, 1) / 100 - 1)


@needs_git
def test_a_model_that_moved_is_reported_with_both_figures(tmp_path, now_us):
    _git(tmp_path, "init", "-q")
    _commit(tmp_path, {"p.csv": HEADER + f"r1,{KERNEL},,{SHAPE},bf16,{now_us * 1.2:.1f},ascend-910b2\n"}, "predictions")
    _commit(tmp_path, {"m.csv": MEASURED}, "measured")
    reg = _row(tmp_path).registration
    assert reg.status == "re-registered" and reg.now_us == pytest.approx(now_us)
    assert reg.registered_us == pytest.approx(round(now_us * 1.2, 1))


@needs_git
def test_a_prediction_committed_after_its_measured_value_says_so(tmp_path, now_us):
    _git(tmp_path, "init", "-q")
    _commit(tmp_path, {"m.csv": MEASURED}, "measured")
    _commit(tmp_path, {"p.csv": HEADER + f"r1,{KERNEL},,{SHAPE},bf16,{now_us:.1f},ascend-910b2\n"}, "predictions")
    assert _row(tmp_path).registration.status == "registered after the measured value"


def test_without_git_the_file_is_reported_and_why(tmp_path, now_us, monkeypatch):
    monkeypatch.setattr(preds, "_git", lambda args, where: None)              # no git on the machine
    (tmp_path / "m.csv").write_text(MEASURED)
    (tmp_path / "p.csv").write_text(HEADER + f"r1,{KERNEL},,{SHAPE},bf16,{now_us:.1f},ascend-910b2\n")
    reg = _row(tmp_path).registration
    assert (reg.status, reg.git, reg.commit) == ("registered (git absent)", "git absent", "")


@pytest.mark.parametrize("line, message", [
    (f"r1,kda_nothing,,{SHAPE},bf16,12,ascend-910b2", "row 2: unknown kernel 'kda_nothing'"),
    (f"r1,kda_fla_npu,wrong,B=1;T=128;H=1;K=128;V=128;C=64,fp16,12,ascend-910b2", "row 2: kernel kda_fla_npu has no stage 'wrong'"),
    (f"r9,kda_fla_npu,,B=1;T=128;H=1;K=64;V=128;C=64,fp16,12,ascend-910b2", "row 2: kernel kda_fla_npu is modelled on its"),
    (f"r1,{KERNEL},,{SHAPE},bf16,fast,ascend-910b2", "row 2: predicted_us 'fast' is not a number"),
    (f"r1,{KERNEL},,1x256x1x64x64,bf16,12,ascend-910b2", "row 2: prediction 'r1' is for kda_v3 (whole) 1x256x1x64x64"),
    (f"r1,{KERNEL},,{SHAPE},bf16,12,no-such-profile", "row 2: unknown profile 'no-such-profile'"),
])
def test_bad_predictions_are_one_line_naming_the_file_and_row(tmp_path, capsys, line, message):
    (tmp_path / "m.csv").write_text(MEASURED)
    (tmp_path / "p.csv").write_text(HEADER + line + "\n")
    assert validate_cli(["--data", str(tmp_path / "m.csv"), "--predictions", str(tmp_path / "p.csv"),
                         "--samples", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(tmp_path / "p.csv") in err and message in err


def test_an_id_registered_twice_is_refused(tmp_path):
    (tmp_path / "p.csv").write_text(HEADER + f"r1,{KERNEL},,{SHAPE},bf16,12,ascend-910b2\n" * 2)
    with pytest.raises(MeasurementError, match="row 3: id 'r1' is used twice"):
        preds.read(tmp_path / "p.csv")


def test_registering_fills_empty_figures_and_refuses_to_move_one(tmp_path, now_us):
    path = tmp_path / "p.csv"
    path.write_text(HEADER + f"r1,{KERNEL},,{SHAPE},bf16,,ascend-910b2\nr2,{KERNEL},,{SHAPE},bf16,5.0,ascend-910b2\n")
    predict = lambda p: now_us
    with pytest.raises(MeasurementError, match=r"row 3: r2 is registered at 5.0 us, the model now gives"):
        preds.fill(path, predict)
    text, notes = preds.fill(path, predict, re_register={"r2"})
    filled = preds.parse(text, "p.csv")
    assert [p.predicted_us for p in filled] == [pytest.approx(round(now_us, 1))] * 2
    assert notes[0].endswith(f"r1 registered at {now_us:.1f} us") and "r2 re-registered: 5.0 ->" in notes[1]


def test_the_shipped_predictions_name_models_and_are_filled():
    for path in preds.shipped():
        for p in preds.read(path):
            preds.model_of(p)                            # every row is a kernel, stage and shape the model takes


def test_a_row_not_modelled_is_data_listed_apart_never_predicted(tmp_path, capsys):
    text = MEASURED.strip() + ",not_modelled\n"
    text = text.replace("held_out\n", "held_out,not_modelled\n").replace(",toy,yes,not_modelled\n", ",toy,yes,\n")
    text += f"r2,kda_fla_npu,,B=1;T=8192;H=32;K=128;V=256;C=128,bf16,27210,toy,yes,no A5 profile\n"
    (tmp_path / "m.csv").write_text(text)
    from kda.studies.validate import reported
    rows, _ = load(tmp_path / "m.csv")
    assert [r.id for r in rows] == ["r1"]
    assert [(r.id, r.measured_us, r.why) for r in reported(tmp_path / "m.csv")] == [("r2", 27210.0, "no A5 profile")]
    assert validate_cli(["--data", str(tmp_path / "m.csv"), "--samples", "0", "--predictions",
                         str(tmp_path / "none.csv")]) == 2          # a predictions file that is not there
    assert validate_cli(["--data", str(tmp_path / "m.csv"), "--samples", "0"]) == 0
    out = capsys.readouterr().out
    assert "reported, not modelled: 1 rows" in out and "no A5 profile" in out


# ----- held out: no fit ever sees a measured KDA kernel's row ----------------------------------------------
KDA_ROW = "id,kernel,stage,shape,dtype,measured_us,implementation,held_out\n" \
          "k1,kda_fla_npu,fwd_h,B=1;T=8192;H=32;K=128;V=128;C=64,fp16,800,flash-linear-attention-npu,{}\n"


def test_kda_validate_refuses_a_measured_kda_row_not_held_out(tmp_path):
    (tmp_path / "k.csv").write_text(KDA_ROW.format("no"))
    with pytest.raises(MeasurementError, match="row 2: kda_fla_npu models a measured KDA kernel.*set held_out = yes"):
        load(tmp_path / "k.csv")


def test_npusim_calibrate_skips_held_out_rows_and_measured_kda_kernels(tmp_path):
    from npusim import NpuSimError
    from npusim.fit.calibrate import calibrate
    (tmp_path / "k.csv").write_text(KDA_ROW.format("no"))
    with pytest.raises(NpuSimError, match="every row it could use is held out"):
        calibrate(tmp_path / "k.csv", load_profile("ascend-910b2"))
    toy = "kernel,shape,dtype,measured_us,held_out\nkda_v3,1x64x1x64x64,bf16,30,yes\nkda_v3,1x128x1x64x64,bf16,40,no\n"
    (tmp_path / "t.csv").write_text(toy)
    result, used, notes = calibrate(tmp_path / "t.csv", load_profile("ascend-910b2"),
                                    fields=["sync.latency_us"])
    assert [m.row for m in used] == [3] and notes == [f"skipped {tmp_path / 't.csv'} row 2: kda_v3 is held out "
                                                      f"(validation only, never fitted)"]


def test_the_910b2_calibration_refuses_a_kda_row(tmp_path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("cal", Path(__file__).resolve().parents[2] / "benchmarks" /
                                                  "calibrate_910b2.py")
    cal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cal)
    (tmp_path / "k.csv").write_text(KDA_ROW.format("yes"))
    with pytest.raises(SystemExit, match="row 2: kda_fla_npu is a measured KDA kernel: validation only"):
        cal.rows(tmp_path / "k.csv")
    assert cal.rows() and all(r["kernel"] == "gdn_pto" for r in cal.rows())       # the shipped rows as before
