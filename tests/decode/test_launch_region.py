"""The launch a decode prediction charges, and benchmarks/launch_in_region.py's arithmetic, against hand-worked
figures."""
import importlib.util
from pathlib import Path

import pytest

from npusim import load_profile

from kda.kernels.registry import model

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def region():
    spec = importlib.util.spec_from_file_location("launch_in_region", ROOT / "benchmarks" / "launch_in_region.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fixed_part_of_a_time_from_two_lengths(region):
    # MegaGDN-PTO cumsum, H = 16: 87.771 us at L = 4096, 161.772 us at L = 8192 (megagdn.csv).
    # a + b L at L and 2L: 2 (a + b L) - (a + 2 b L) = a; 2 x 87.771 - 161.772 = 175.542 - 161.772 = 13.770.
    assert region.fixed_part(87.771, 161.772) == pytest.approx(13.770, abs=1e-9)
    assert region.fixed_part(10.0 + 3.0 * 4096, 10.0 + 3.0 * 8192) == pytest.approx(10.0)


def test_shape_dims(region):
    assert region.dims("B=16;T=8192;H=32;Hg=16;K=128;V=128;C=128") == (8192, 32)


def test_pairs_are_the_rows_not_held_out_at_both_lengths(region):
    # megagdn.csv, not held out: six stages at L = 4096 and 8192 for H = 16 and 32 (H = 64 only at L = 8192).
    pairs = region.pto_pairs(load_profile("ascend-910b2"))
    assert sorted({(s, h) for s, h, *_ in pairs}) == sorted(
        (s, h) for s in ("cumsum", "kkt", "solve_tril", "wy_fast", "chunk_h", "chunk_o") for h in (16, 32))
    cumsum = {h: measured for s, h, measured, _ in pairs if s == "cumsum"}
    assert cumsum[16] == pytest.approx(13.770, abs=1e-6)            # 2 x 87.771 - 161.772
    assert cumsum[32] == pytest.approx(10.029, abs=1e-6)            # 2 x 93.052 - 176.075


def test_a_decode_prediction_is_its_makespan_plus_the_profiles_launch():
    # ascend-910b2.toml: chip.launch_overhead_us = 20.0; with it at 0 the prediction is the device's part alone.
    profile = load_profile("ascend-910b2")
    m = model("gdn_decode_ascendc", "B=1;T=1;H=16;HV=32;K=128;V=128;state=fp32;L2=warm", "bf16")
    no_launch = profile.replace(chip__launch_overhead_us=0.0)
    assert m.predict(profile) - m.predict(no_launch) == pytest.approx(20.0, abs=1e-9)
