"""An op map reads an msprof op summary through the user's names: each mapped OP Type becomes the kernel, stage
and held_out it names, its shape read from the inputs it names; the other operators' rows are skipped and
counted; every mistake is one line naming the file, the operator and the key. Expectations from the files'
text by hand."""
from __future__ import annotations

from pathlib import Path

import pytest

from npusim.fit.measurements import MeasurementError, read_measurements, unmapped
from npusim.fit.op_map import OpMapError, read_op_map

DATA = Path(__file__).resolve().parents[2] / "data"
SUMMARY = DATA / "op_summary_mapped.csv"
EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "op_map.toml"


def write(tmp_path, text: str) -> Path:
    p = tmp_path / "ops.toml"
    p.write_text(text, encoding="utf-8")
    return p


def test_mapped_rows_become_the_kernels_and_stages_the_map_names():
    rows = read_measurements(SUMMARY, read_op_map(EXAMPLE))
    assert [(m.kernel, m.stage, m.measured_us, m.held_out, m.row) for m in rows] == [
        ("kda_fla_npu", "prepare", 9604.0, True, 3), ("kda_fla_npu", "post_wu", 722.0, True, 4)]
    # q is input 0 [1, 8192, 32, 128], v input 2 [1, 8192, 32, 128]; the chunk from the map
    assert rows[0].shape == "B=1;T=8192;H=32;Hg=32;K=128;V=128;C=64" and rows[0].form == "simple"
    assert rows[0].dtype == "fp16"                                        # DT_FLOAT16, the first input's


def test_the_other_operators_are_skipped_and_counted():
    assert unmapped(SUMMARY, read_op_map(EXAMPLE)) == {"Cast": 1, "ArgMaxV2": 1}
    with pytest.raises(MeasurementError, match="row 5: Input Data Types starts with 'DT_INT64'"):
        read_measurements(SUMMARY)                 # without a map the ArgMax row (an int64 input) is refused


def test_the_inputs_the_map_names_set_the_heads(tmp_path):
    ops = read_op_map(write(tmp_path, '[ops.ChunkKdaFwdPrepare]\nkernel = "kda_fla_npu"\nstage = "prepare"\n'
                                      'v_input = 4\n[ops.ChunkKdaFwdPostWu]\nkernel = "kda_fla_npu"\n'))
    with pytest.raises(MeasurementError, match=r"row 3: ChunkKdaFwdPrepare \(op map\).*input 4 \(v\) is not"):
        read_measurements(SUMMARY, ops)            # input 4 is beta [1, 8192, 32]: three dimensions


@pytest.mark.parametrize("text, message", [
    ('[ops.X]\nkernel = "kda_v6"\nstages = "a"\n', r"ops\.X: unknown key 'stages'"),
    ('[ops.X]\nstage = "a"\n', r"ops\.X names no kernel"),
    ('[ops.X]\nkernel = "kda_v6"\nchunk_size = 0\n', r"ops\.X\.chunk_size = 0 must be at least 1"),
    ('[ops.X]\nkernel = "kda_v6"\nheld_out = "yes"\n', r"ops\.X\.held_out must be a bool"),
    ('kernel = "kda_v6"\n', r"expected \[ops\.<OP Type>\] tables"),
    ('[ops.X\n', "not a TOML op map"),
])
def test_a_bad_map_is_one_line_naming_the_operator_and_key(tmp_path, text, message):
    with pytest.raises(OpMapError, match=message):
        read_op_map(write(tmp_path, text))


def test_a_map_naming_an_operator_no_row_has_is_refused(tmp_path):
    ops = read_op_map(write(tmp_path, '[ops.ChunkKdaFwdPrepare]\nkernel = "kda_fla_npu"\n'
                                      '[ops.ChunkKdaFwdFinalize]\nkernel = "kda_fla_npu"\n'))
    with pytest.raises(MeasurementError, match="names OP Type 'ChunkKdaFwdFinalize', which no row of it has"):
        read_measurements(SUMMARY, ops)


def test_a_map_needs_an_op_summary(tmp_path):
    simple = tmp_path / "timings.csv"
    simple.write_text("kernel,shape,dtype,measured_us\nkda_v6,1x4096x32x128x128,bf16,1000\n", encoding="utf-8")
    with pytest.raises(MeasurementError, match="an op map reads an msprof op summary"):
        read_measurements(simple, read_op_map(EXAMPLE))
