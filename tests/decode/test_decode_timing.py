"""The decode step's timing: how each kernel lays its items over the workers (counted by hand from the
launch rules in its source), a worker's loop rules against their definitions, the HBM floor's bytes, the
bound's regimes, and the long-sweep extrapolation against the full replay."""
from dataclasses import replace

import pytest

from npusim import load_profile

from kda.decode.design import DOUBLE, SERIAL, STORE_BEHIND
from kda.decode.programs import DESIGNS
from kda.decode.timing import FLOOR, LAUNCH, VECTOR, DecodeShape, Types, floor_bytes, on_chip, time_step, types_for
from kda.kernels.decode import DECODE_KERNELS, parse_decode_shape

PROFILE = load_profile("ascend-910b2")


def counts(design: str, items: int) -> list[int]:
    return sorted(DECODE_KERNELS[design].worker_items(items, 24, 48), reverse=True)


def test_kdn_decode_blocks_beyond_the_cores():
    """PR 35: min(items, 40) blocks by a grid stride; 512 items = 40 x 12 + 32: 32 blocks of 13, 8 of 12."""
    assert counts("kdn_decode", 512) == [13] * 32 + [12] * 8
    assert counts("kdn_decode", 7) == [1] * 7


def test_pr34_workers_are_aivs():
    """PR 34: min(24, ceil(items / 2)) blocks of two AIV workers; 32 x 16 heads x 4 tiles of 32 rows = 2048
    items over 48 workers = 42 x 48 + 32: 32 workers of 43, 16 of 42."""
    assert counts("kdn_decode_pr34", 2048) == [43] * 32 + [42] * 16
    assert counts("kdn_decode_pr34", 3) == [1, 1, 1]          # 2 blocks, 4 workers, one idle


def test_ascendc_tiling():
    """vllm-ascend: blockDim = ceil(128 / ceil(128 / 48)) = ceil(128 / 3) = 43; 128 = 43 x 2 + 42: 42 blocks
    of 3 tasks, one of 2."""
    assert counts("gdn_decode_ascendc", 128) == [3] * 42 + [2]


def test_aiv_launches_see_48_workers():
    chip = on_chip(PROFILE, DECODE_KERNELS["sgl_kda_decode"])
    assert (chip.chip.ai_cores, chip.chip.vec_per_core) == (48, 1)
    assert on_chip(PROFILE, DECODE_KERNELS["kdn_decode"]).chip.vec_per_core == 1


def test_floor_bytes_by_hand():
    """B = 2, H = HV = 1, K = V = 4, T = 1; bf16 q, k, v, o; fp32 g, beta and state: the state 2 x (2 x 4 x 4
    x 4) = 256 B; per token 2 x 4 x 2 (q, k) + 2 x 4 x 2 (v, o) + 4 x 4 (g) + 4 (beta) = 52 B, twice: 360 B."""
    assert floor_bytes(DecodeShape(2, 1, 1, 4, 4, 1), Types("bf16", "fp32", "fp32")) == 360


def one_worker(design, loop, items=5):
    """One worker alone on the chip (one AI core, one AIV), its items one after another by `loop`."""
    d = replace(design, loop=loop, blocks=lambda n, c, a: 1)
    chip = replace(PROFILE, chip=replace(PROFILE.chip, ai_cores=1))
    return time_step(d, DecodeShape(items, 1, 1), chip, types=Types("bf16", "fp32", "fp32"))


def test_loop_rules():
    """With nothing shared, a worker's n items take n (l + c + s) serially, n (c + max(l, s)) + min(l, s) with
    the store behind the next load, and n max(l, c, s) + the other two with two items in flight."""
    for loop in (SERIAL, STORE_BEHIND, DOUBLE):
        r = one_worker(DESIGNS["step"], loop)
        l, c, s = r.item_load_us, r.item_compute_us, r.item_store_us
        want = {SERIAL: 5 * (l + c + s), STORE_BEHIND: 5 * (c + max(l, s)) + min(l, s),
                DOUBLE: 5 * max(l, c, s) + (l + c + s - max(l, c, s))}[loop]
        assert r.loop == loop
        assert r.device_us == pytest.approx(want, rel=1e-6), loop


def test_regimes_of_the_plain_step():
    small = time_step(DESIGNS["step"], DecodeShape(1, 32, 32), PROFILE)
    large = time_step(DESIGNS["step"], DecodeShape(256, 32, 32), PROFILE)
    assert small.bound == LAUNCH and large.bound == FLOOR
    assert large.latency_us < 1.2 * large.floor_us                 # within 20 % of the HBM floor
    assert small.floor_us < small.launch_us < large.floor_us


def test_bf16_state_halves_the_state_traffic():
    fp32 = time_step(DESIGNS["step"], DecodeShape(128, 32, 32), PROFILE, types=Types("bf16", "fp32", "fp32"))
    bf16 = time_step(DESIGNS["step"], DecodeShape(128, 32, 32), PROFILE, types=Types("bf16", "fp32", "bf16"))
    assert bf16.floor_bytes < 0.51 * fp32.floor_bytes
    # fp32 waits for HBM; with the state's bytes halved, the step waits for the larger of its halved floor and
    # its Vector work (the two overlap: double buffered), so it saves most of the halved floor, never more
    assert fp32.bound == FLOOR
    assert bf16.latency_us <= 1.1 * (bf16.launch_us + max(bf16.floor_us, bf16.terms()[VECTOR]))
    assert fp32.latency_us - 0.5 * fp32.floor_us <= bf16.latency_us < fp32.latency_us - 0.35 * fp32.floor_us


@pytest.mark.parametrize("design", [*DESIGNS, *DECODE_KERNELS])
def test_extrapolation_within_three_and_a_half_percent(design):
    d = {**DESIGNS, **DECODE_KERNELS}[design]
    for B in (20, 100):
        shape = DecodeShape(B, 32, 32)
        fast = time_step(d, shape, PROFILE, types=types_for(d), exact=False).latency_us
        full = time_step(d, shape, PROFILE, types=types_for(d)).latency_us
        assert fast == pytest.approx(full, rel=0.035)


def test_decode_shapes():
    shape, state, warm = parse_decode_shape("B=4;T=2;H=16;HV=32;K=128;V=64;state=bf16;L2=warm")
    assert (shape, state, warm) == (DecodeShape(4, 16, 32, 128, 64, 2), "bf16", True)
    for bad in ("B=4;H=16", "B=4;H=16;HV=24;K=128;V=128", "B=4;H=4;K=128;V=128;state=fp16", "B=x;H=4;K=1;V=1",
                "B=4;H=4;K=128;V=128;C=64"):
        with pytest.raises(ValueError):
            parse_decode_shape(bad)
