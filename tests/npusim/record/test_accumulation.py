"""A Cube matmul that accumulates in fp16, by hand: the running sum is rounded after each 16-deep step."""
import platform

import torch

from npusim.record.accumulation import NarrowAccumulation
from npusim.record.memory import keep_freed_memory


def test_the_running_sum_is_rounded_after_every_16_deep_step():
    # step 1 sums to 2049, which fp16 (spacing 2 at 2048) rounds to 2048 (ties to even); step 2 adds 1: 2049
    # again, 2048 again. In fp32 the sum is 2050.
    a = torch.ones(1, 32)
    b = torch.zeros(32, 1)
    b[0], b[1:16], b[16] = 2034.0, 1.0, 1.0
    assert (a @ b).item() == 2050.0
    with NarrowAccumulation("fp16"):
        assert (a @ b).item() == 2048.0
        assert torch.equal(a[0] * 2, a[0] + a[0])          # anything but a matmul runs as it is


def test_freed_memory_is_kept_where_the_c_library_is_glibc():
    assert keep_freed_memory() == (platform.libc_ver()[0] == "glibc")
