"""The host's part of a timed region (npusim/model/host.py): timelines computed by hand."""
from __future__ import annotations

import pytest

from npusim import load_profile
from npusim.model.host import Host, Launch, Op, Sync, timed_region


def _profile(op=10.0, launch=30.0, sync=40.0):
    p = load_profile("ascend-910b2")
    return p.replace(host__op_us=op, host__launch_us=launch, host__sync_us=sync, chip__launch_overhead_us=20.0,
                     memory__chip_bandwidth_gbps=1600.0)


STEPS = (Op("alloc"), Op("copy", (1_600_000,)), Launch("k"), Sync(".tolist()"), Launch("k2"))
KERNELS = {"k": 100.0, "k2": 50.0}


def test_idle_device_sees_every_host_step():
    # host 10 (alloc) -> 20 (copy issued; on the device 20 + 20 launch + 1.6 MB / 1.6 TB/s = 41)
    # -> 50 (launch k; device max(41, 50) + 100 = 150) -> .tolist waits for 150, + 40 = 190
    # -> 220 (launch k2; device 220 + 50 = 270): the region ends at 270
    host = Host({"s": STEPS}, idle=True)
    assert timed_region(host, "s", KERNELS, {}, _profile()) == pytest.approx(270.0)


def test_host_ahead_shows_only_what_blocks():
    # the host is ahead: the copy runs at 0..21, k at 21..121; .tolist returns at 121 + 40 = 161;
    # launching k2 takes to 191, k2 ends at 241
    host = Host({"s": STEPS}, idle=False)
    assert timed_region(host, "s", KERNELS, {}, _profile()) == pytest.approx(241.0)


def test_without_host_costs_the_region_is_its_device_work():
    host = Host({"s": STEPS}, idle=True)
    assert timed_region(host, "s", KERNELS, {}, _profile(0, 0, 0)) == pytest.approx(21.0 + 100.0 + 50.0)


def test_a_ctypes_launch_costs_an_op_and_sizes_multiply_dimensions():
    host = Host({"": (Launch("", via="ctypes"), Op("o * scale", ("T", "H", 2, 2)))}, idle=True)
    # launch at 10, kernel to 110; then the op at 20 (host), on the device 110 + 20 + 1000 * 4 * 4 / 1.6e6
    got = timed_region(host, "", {"": 100.0}, {"T": 1000, "H": 4}, _profile())
    assert got == pytest.approx(110.0 + 20.0 + 16_000 / 1.6e6)
    with pytest.raises(ValueError, match="via"):
        Launch("k", via="python")
