"""The host's part of the measured kernels' timed regions (npusim/model/host.py on kda/kernels/): the wrappers
counted from their source, and what a design's uncertainty draws."""
from __future__ import annotations

import pytest

from npusim import load_profile
from npusim.model.host import Host, Op

from kda.kernels.registry import model
from tests.npusim.model.test_host import _profile


def _counts(kernel, stage):
    """(ops, syncs, launches) of a stage's wrapper, as the model times them: the region's growth per us of
    each host field on a 1-sequence shape, where the host, not the device, sets the pace."""
    m = model(kernel, "B=1;T=128;H=1;K=128;V=128;C=64", "bf16", stage=stage)
    base = m.kernel_us(_profile(0, 0, 0))
    zero = m.around(base, _profile(0, 0, 0))
    return tuple(round((m.around(base, _profile(*unit)) - zero) / 1000) for unit in
                 ((1000, 0, 0), (0, 0, 1000), (0, 1000, 0)))


@pytest.mark.parametrize("stage, counts", [
    # fla_vendor/utils.py prepare_chunk_indices: prepare_lens (1 op), triton.cdiv on a tensor ((x + BT - 1) // BT:
    # 3 ops), .tolist() and .to(cu_seqlens) (2 blocking copies); cumsum.py: torch.empty_like, one launch
    ("cumsum", (5, 2, 1)),
    # chunk_scaled_dot_kkt.py: torch.empty, permute(beta).contiguous(), permute(g).contiguous(), one launch
    ("kkt", (3, 0, 1)),
    # solve_tril.py: torch.empty Ad, prepare_chunk_indices, K1; torch.empty Ai, prepare_chunk_indices, K2
    ("solve_tril", (10, 4, 2)),
    # wy_fast.py: empty_like u, new_empty w, beta and g transposed, one launch
    ("wy_fast", (4, 0, 1)),
    # chunk_delta_h.py: new_empty h and h_update, empty_like v_new, g transposed (indices passed in)
    ("chunk_h", (4, 0, 1)),
    # chunk_o.py: empty_like o; prepare_chunk_offsets: lens, cdiv (3), new_tensor([0]) (a blocking copy),
    # cat, cumsum; g transposed
    ("chunk_o", (8, 1, 1)),
])
def test_triton_wrappers_counted_from_their_source(stage, counts):
    assert _counts("gdn_triton64", stage) == counts


def test_solve_trils_second_tolist_waits_for_k1():
    m = model("gdn_triton64", "B=1;T=128;H=1;K=128;V=128;C=64", "bf16", stage="solve_tril")
    k = m.kernel_us(_profile(0, 0, 0))
    slow = {**k, "solve_tril:k1": 1e6}          # K1 far longer than any host step: nothing hides it
    p = _profile(10, 30, 40)
    # before K1's launch: Ad and the 4 index ops, 2 blocking copies, the launch. After it the host issues Ai
    # and 4 ops while K1 runs (hidden), the .tolist waits for K1's end, then 40 + the .to copy 40 + the launch
    # 30, and K2 on the device
    host_before = 5 * 10 + 2 * 40 + 30
    after = 40 + 40 + 30
    assert m.around(slow, p) == pytest.approx(host_before + 1e6 + after + k["solve_tril:k2"], rel=1e-9)


def test_pto_stage_rows_never_see_the_host():
    m = model("gdn_pto", "B=16;T=4096;H=16;Hg=16;K=128;V=128;C=128", "fp16", stage="kkt")
    k = m.kernel_us(_profile())
    assert m.around(k, _profile(0, 0, 0)) == m.around(k, _profile(1e3, 1e3, 1e3)) == k[""]


def test_fused_kernel_region_adds_its_zero_fills_and_o_scale():
    """run_mega_kernel (megagdn_pto/mega_kernel.py), bytes counted by hand: A fp16, A_inv_f32, A_inv fp16
    ([T, H, C]), s ([chunks x H, D, D] fp16), fs ([N x H, D, D] fp16), seven workspaces of block_dim 24, and
    o * scale reading and writing [T, H, V] fp16; each a device op with its own launch."""
    B, T, H, C, D = 2, 256, 4, 128, 128
    m = model("gdn_pto_fused", f"B={B};T={T};H={H};Hg={H};K={D};V={D};C={C}", "fp16")
    p = _profile(0, 0, 0)
    k = m.kernel_us(p)
    tokens, chunks = B * T, B * T // C
    nbytes = (tokens * H * C * (2 + 4 + 2) + chunks * H * D * D * 2 + B * H * D * D * 2
              + (48 + 24 + 24 + 24 + 24) * C * C * 2 + 96 * D * D * 2 + 24 * C * D * 2 + tokens * H * D * 4)
    assert m.around(k, p) == pytest.approx(k[""] + nbytes / 1.6e6 + 13 * 20.0)


def test_a_designs_samples_leave_the_host_alone():
    """A design is timed as its kernels: `--uncertainty` draws the chip's fields, not the wrapper's (which
    only kda.validate's Triton and fused rows see), so adding [host] did not reshuffle the hypercube."""
    from npusim.fit.uncertainty import assumptions

    from kda.studies.uncertainty import design_fields
    p = load_profile("ascend-910b2")
    drawn = {f.field for f in design_fields(p)}
    assert {"host.op_us", "host.launch_us", "host.sync_us"} <= {f.field for f in assumptions(p)}
    assert not {f for f in drawn if f.startswith("host.")} and "sync.latency_us" in drawn


def test_a_wrapper_that_misses_a_pass_or_names_no_dimension_is_refused():
    """A pass no wrapper launches would time as 0 us: the design is refused when it is declared."""
    from dataclasses import replace

    from kda.kernels.triton import GDN_TRITON, HOST
    stages = dict(HOST.stages)
    stages["kkt"] = stages["kkt"][:-1]                           # kkt's launch left out
    with pytest.raises(ValueError, match="not each of its passes"):
        replace(GDN_TRITON, host=Host(stages, idle=True))
    with pytest.raises(ValueError, match="size names 'L'"):
        Op("a copy", ("L", 2))

