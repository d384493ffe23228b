"""The chunks each sequence of a run walks, worked by hand, and a run past the machine refused before it runs."""
from types import SimpleNamespace

import pytest

from npusim import NpuSimError, load_profile

from kda.settings.work import check_work, chunk_counts


def test_chunks_are_counted_per_sequence_and_head():
    # two sequences of 130 tokens at chunk 64: 3 chunks each (the last one partial), one q/k head
    assert chunk_counts(SimpleNamespace(seqlens=None, T=130, batch=2, chunk_size=64, heads=1)) == [3, 3]
    # a packed batch of 100 and 64 tokens, two heads: each sequence's count once per head
    assert chunk_counts(SimpleNamespace(seqlens=[100, 64], T=0, batch=1, chunk_size=64, heads=2)) == [2, 2, 1, 1]


def test_too_many_value_heads_per_q_k_head_are_refused_in_one_line():
    s = SimpleNamespace(seqlens=None, T=64, batch=1, chunk_size=64, heads=1, v_heads=2048, group=2048, d_k=128,
                        d_v=128, cores=0, keep_trace=False, numerics=False, device="cpu")
    with pytest.raises(NpuSimError, match="value heads per q/k head") as err:
        check_work(s, load_profile("ascend-910b2"))
    assert "\n" not in str(err.value)
