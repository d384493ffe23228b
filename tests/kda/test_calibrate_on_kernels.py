"""The calibration fit (npusim/fit/) on the measured kernels' models (kda/kernels/): msprof's op summary and
every written shape read, a known profile recovered from its own noisy timings, a field the data cannot
determine named, the written profile loaded back, and a kernel model timed as kda-run times it."""
import math
from pathlib import Path

import numpy as np
import pytest

from npusim import load_profile
from npusim.fit.calibrate import main
from npusim.fit.least_squares import fit
from npusim.fit.measurements import read_measurements
from npusim.fit.uncertainty import assumptions

from kda.kernels.registry import model, parse_shape
from tests.npusim.fit.test_calibrate import _csv

DATA = Path(__file__).parent.parent / "data"
BASE = load_profile("ascend-910b2-uncalibrated")    # the model whose ASSUMED fields these fits recover


def test_msprof_op_summary_in_the_documented_layout():
    """The sample holds made-up durations in msprof's op_summary columns (CANN profiling docs): the kernel is
    the OP Type, the shape its Input Shapes (q;k;v;g;beta), the type the first Input Data Type."""
    rows = read_measurements(DATA / "op_summary_sample.csv")
    assert [(r.kernel, r.dtype, r.measured_us, r.row, r.form) for r in rows] == [
        ("KdaChunkV3", "bf16", 1262.5, 2, "msprof"), ("KdaChunkV3", "bf16", 1255.0, 3, "msprof"),
        ("KdaChunkV4", "bf16", 1711.75, 4, "msprof")]
    assert {r.stage for r in rows} == {""}                  # msprof times whole operators
    m = model(rows[0].kernel, rows[0].shape, rows[0].dtype, rows[0].form)
    assert m.name == "kda_v3" and m.shape.seqlens == (4096,) and m.shape.heads == 32 and m.shape.d_v == 128


def test_shapes_in_every_written_form():
    assert parse_shape("1x65+129x32x128x128")[0].chunk_counts(64) == [2] * 32 + [3] * 32
    shape, C = parse_shape("B=2;T=100;H=3;K=64;V=32;C=32")     # ascendc_stubs/scripts/op_summary_to_csv.py
    assert (shape.batch, shape.seqlens, shape.heads, shape.d_k, shape.d_v, C) == (2, (100,), 3, 64, 32, 32)
    assert shape.chunk_counts(32) == [4] * 6
    with pytest.raises(ValueError, match="is not BxTxHxKxV"):
        parse_shape("1x2x3")


TRUE = {"sync.latency_us": 1.2, "cube.fp32_macs_per_cycle": 512.0, "cube.op_overhead_cycles": 200.0,
        "vector.op_overhead_cycles": 10.0, "vector.step_latency_cycles": 80.0, "memory.l2_bandwidth_gbps": 2500.0}


def _synthetic(kernels, shapes, dtypes, noise, seed=0):
    truth = BASE.replace(**{k.replace(".", "__"): v for k, v in TRUE.items()})
    models = [model(k, s, d) for k in kernels for s in shapes for d in dtypes]
    clean = np.array([m.predict(truth) for m in models])
    rng = np.random.default_rng(seed)
    return models, clean * np.exp(rng.normal(0.0, noise, len(clean)))


def test_recovers_a_known_profile_from_its_own_noisy_timings():
    """Timings made by the simulator under TRUE (every assumed field moved inside its range) with 1 % seeded
    noise. Stated tolerance: a field the fit calls determined lies within 3 of its standard errors of the
    truth, and within 10 % where that error is below 5 %. fp32 Cube rate, sync latency and L2 bandwidth
    are pinned by the fp32, 1-head and 48-head rows; the barrier is in no fused kernel (zero sensitivity)."""
    models, measured = _synthetic(["kda_v1", "kda_v3", "kda_v4"],
                                  ["1x64x1x128x128", "1x64x1x16x16", "1x1024x1x16x16", "1x512x1x128x128",
                                   "1x256x48x128x128"], ["bf16", "fp32"], noise=0.01)
    result = fit(BASE, assumptions(BASE), [m.predict for m in models], measured)
    by = {f.field: f for f in result.fields}
    for name in ("cube.fp32_macs_per_cycle", "sync.latency_us", "memory.l2_bandwidth_gbps"):
        assert by[name].determined and by[name].rel_se < 0.1, name
    for f in result.fields:
        if f.determined:
            err = abs(math.log(f.value / TRUE[f.field]))
            assert err <= 3 * f.rel_se, (f.field, f.value, f.rel_se)
            if f.rel_se < 0.05:
                assert err < math.log(1.10), (f.field, f.value)
    assert not by["chip.barrier_us"].determined and "zero sensitivity" in by["chip.barrier_us"].why
    assert result.rms_after < 0.02 < result.rms_before


def test_says_which_field_the_data_cannot_determine_and_why():
    # one bf16 kernel on one core: no fp32 operand, and one core never reaches the chip's L2 rate
    models, measured = _synthetic(["kda_v3"], ["1x64x1x128x128", "1x1024x1x128x128"], ["bf16"], noise=0.0)
    fields = [f for f in assumptions(BASE) if f.field in
              ("cube.fp32_macs_per_cycle", "memory.l2_bandwidth_gbps", "sync.latency_us")]
    result = fit(BASE, fields, [m.predict for m in models], measured)
    by = {f.field: f for f in result.fields}
    for name in ("cube.fp32_macs_per_cycle", "memory.l2_bandwidth_gbps"):
        assert not by[name].determined and by[name].why.startswith("zero sensitivity")
        assert by[name].value == BASE.value(name)          # left at the profile's value, not a number made up
    # one measurement cannot separate two fields that both add time
    one = fit(BASE, [f for f in assumptions(BASE) if f.field in ("sync.latency_us", "vector.step_latency_cycles")],
              [models[0].predict], measured[:1])
    assert all(not f.determined and f.why.startswith("collinear with") for f in one.fields)


def test_written_profile_marks_fitted_fields_and_loads_back(tmp_path, capsys):
    truth = BASE.replace(sync__latency_us=1.5)
    shapes = ["1x64x1x128x128", "1x1024x1x128x128", "1x4096x1x128x128"]
    rows = "\n".join(f"kda_v3,{s},bf16,{model('kda_v3', s, 'bf16').predict(truth):.3f}" for s in shapes)
    path = _csv(tmp_path, "kernel,shape,dtype,measured_us\n" + rows + "\n", "timings.csv")
    out = tmp_path / "fitted.toml"
    assert main([str(path), "--profile", BASE.name, "--fields", "sync.latency_us,cube.fp32_macs_per_cycle",
                 "--out", str(out), "--date", "2026-11-23"]) == 0
    p = load_profile(out)
    assert p.sync.latency_us == pytest.approx(1.5, rel=0.01)
    assert p.sources["sync.latency_us"].startswith("FIT: timings.csv, 2026-11-23")
    assert p.sources["cube.fp32_macs_per_cycle"].startswith("ASSUMED") and "zero sensitivity" in \
        p.sources["cube.fp32_macs_per_cycle"]
    assert p.ranges == BASE.ranges and p.chip == BASE.chip
    assert "sync.latency_us: 0.5 -> 1.5" in capsys.readouterr().out


@pytest.mark.parametrize("design", ["v3", "v4", "fla", "v5"])
def test_a_kernel_model_times_as_kda_run_does(design):
    """kda.kernels.registry (calibration, validation) and kda.cli.run's timing-only path give one latency for one shape,
    passes that declare their own state hand-off (v5's state pass) included."""
    from kda.settings import Settings
    from kda.studies.evaluate import evaluate
    r = evaluate(design, Settings(heads=2, tokens=256, d_k=64, d_v=64, numerics=False, keep_trace=False,
                                  profile=BASE.name))
    assert model(f"kda_{design}", "1x256x2x64x64", "bf16").predict(BASE) == pytest.approx(r.design_report.latency_us,
                                                                                           rel=1e-12)


def test_host_floor_fitted_beside_the_fields_from_wall_clock_timings(tmp_path, capsys):
    """Wall-clock timings = 250 us of host time + the kernel under sync latency 1.5 us. Without --host-floor
    the fit must push the sync latency up to stand in for the floor; with it, both come back to 1 %."""
    truth = BASE.replace(sync__latency_us=1.5)
    shapes = ["1x64x1x128x128", "1x512x1x128x128", "1x1024x2x128x128", "1x2048x1x128x128"]
    rows = "\n".join(f"kda_v3,{s},bf16,{250.0 + model('kda_v3', s, 'bf16').predict(truth):.4f}" for s in shapes)
    path = _csv(tmp_path, "kernel,shape,dtype,measured_us\n" + rows + "\n", "wall.csv")
    from npusim.fit.calibrate import calibrate
    with_floor, _, _ = calibrate(path, BASE, fields=["sync.latency_us"], host_floor=True)
    (f,) = with_floor.fields
    assert f.determined and f.value == pytest.approx(1.5, rel=0.01)
    assert with_floor.host_floor_us == pytest.approx(250.0, rel=0.01) and with_floor.rms_after < 0.005
    without, _, _ = calibrate(path, BASE, fields=["sync.latency_us"])
    assert without.host_floor_us is None and without.rms_after > 10 * with_floor.rms_after
    assert main([str(path), "--fields", "sync.latency_us", "--host-floor", "--out", str(tmp_path / "f.toml")]) == 0
    out = capsys.readouterr().out
    assert "host floor: 2" in out and "not written" in out
    assert "floor" not in (tmp_path / "f.toml").read_text().split("[chip]")[1]   # the profile holds no floor



def test_the_json_matches_its_schema_and_says_what_was_fitted(tmp_path, capsys):
    import json
    from importlib.resources import files
    jsonschema = pytest.importorskip("jsonschema")
    truth = BASE.replace(sync__latency_us=1.5)
    shapes = ["1x64x1x128x128", "1x1024x1x128x128"]
    rows = "\n".join(f"kda_v3,{s},bf16,{model('kda_v3', s, 'bf16').predict(truth):.3f}" for s in shapes)
    path = _csv(tmp_path, "kernel,shape,dtype,measured_us\n" + rows + "\n", "timings.csv")
    assert main([str(path), "--profile", BASE.name, "--fields", "sync.latency_us", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    schema = json.loads(files("npusim").joinpath("fit/calibrate.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(d)
    assert [f["field"] for f in d["fields"]] == ["sync.latency_us"] and d["fields"][0]["determined"]
    assert d["rms_after"] < d["rms_before"]
