"""Calibration's input: measurement files (an optional stage column, other operators in an msprof summary,
bad files in one line), an unknown field and a missing file. The fit on the kernels' models is in
tests/kda/test_calibrate_on_kernels.py."""
from pathlib import Path

import pytest

from npusim import load_profile
from npusim.fit.calibrate import main
from npusim.fit.measurements import MeasurementError, read_measurements

DATA = Path(__file__).resolve().parents[2] / "data"
BASE = load_profile("ascend-910b2-uncalibrated")    # the model whose ASSUMED fields these fits recover


def _csv(tmp_path, text, name="m.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_an_optional_stage_column(tmp_path):
    """`stage` names the stage a row timed alone; absent or empty: the whole kernel."""
    with_stage = _csv(tmp_path, "kernel,stage,shape,dtype,measured_us\nk,kkt,1x64x1x8x8,fp16,3\nk,,1x64x1x8x8,fp16,4\n")
    assert [(m.stage, m.measured_us) for m in read_measurements(with_stage)] == [("kkt", 3.0), ("", 4.0)]
    without = _csv(tmp_path, "kernel,shape,dtype,measured_us\nk,1x64x1x8x8,fp16,3\n", "old.csv")
    assert [m.stage for m in read_measurements(without)] == [""]


@pytest.mark.parametrize("text, message", [
    ("kernel,shape,dtype\nkda_v3,1x64x1x128x128,bf16\n", "missing column 'measured_us'"),
    ("kernel,shape,dtype,measured_us\nkda_v3,1x64x1x128x128,bf16,fast\n", "row 2: measured_us 'fast' is not a number"),
    ("kernel,shape,dtype,measured_us\nkda_v3,1x64x1x128x128,bf16,12\nkda_v3,1x64x1x128x128,bf16,-3\n",
     "row 3: measured_us -3 must be a positive, finite time"),
    ("kernel,shape,dtype,measured_us\nkda_v3,1x64x1x128x128,bf16,nan\n", "row 2: measured_us nan must be a positive"),
    ("kernel,shape,dtype,measured_us\nkda_v3,1x64x1x128x128,int8,12\n", "row 2: dtype 'int8' is not bf16"),
    ("kernel,shape,dtype,measured_us\nflash_attn,1x64x1x128x128,bf16,12\n", "row 2: unknown kernel 'flash_attn'"),
    ("kernel,shape,dtype,measured_us\nkda_v3,64x128,bf16,12\n", "row 2: shape '64x128' is not BxTxHxKxV"),
    ("kernel,shape,dtype,measured_us\n", "no measurements after the header"),
    ("OP Type,Input Shapes,Task Duration(us)\nCast,\"1,2\",3\n", "missing column 'Input Data Types'"),
])
def test_bad_measurement_files_are_one_line_and_exit_2(tmp_path, capsys, text, message):
    path = _csv(tmp_path, text)
    assert main([str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and str(path) in err


def test_other_operators_in_an_msprof_summary(tmp_path, capsys):
    text = (DATA / "op_summary_sample.csv").read_text().splitlines()
    text.insert(2, '0,4294967295,15,2,Cast_3,Cast,AI_VECTOR_CORE,1763985602000.0,3.25,1.0,8,N/A,"1,4096",DT_FLOAT,ND,'
                   '"1,4096",DT_BF16,ND,3.1,5580')
    path = _csv(tmp_path, "\n".join(text) + "\n", "op_summary_0_1.csv")
    assert main([str(path), "--fields", "sync.latency_us"]) == 2
    assert "row 3: unknown kernel 'Cast'" in capsys.readouterr().err
    with pytest.raises(MeasurementError):
        from npusim.fit.calibrate import calibrate
        calibrate(path, BASE, fields=["sync.latency_us"])


def test_unknown_field_and_missing_file(tmp_path, capsys):
    path = _csv(tmp_path, "kernel,shape,dtype,measured_us\nkda_v3,1x64x1x128x128,bf16,30\n")
    assert main([str(path), "--fields", "sync.nope"]) == 2
    assert "'sync.nope' is not a ranged field" in capsys.readouterr().err
    assert main([str(tmp_path / "none.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
