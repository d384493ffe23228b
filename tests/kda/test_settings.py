"""A run's settings: the dimensions checked where they are made, in one line naming the option as kda.run
spells it, and the sizes derived from them."""
import pytest

from kda.driver.checks import KdaInputError
from kda.settings.settings import Settings


def test_the_sizes_a_run_derives():
    assert Settings(chunks=3, chunk_size=64).T == 192                     # chunks x chunk size by default
    assert Settings(tokens=100).T == 100                                   # any T (the last chunk padded)
    assert Settings(seqlens=(100, 28)).T == 128                            # a packed batch: its tokens
    s = Settings(heads=4, value_heads=8)
    assert (s.v_heads, s.group) == (8, 2)
    assert (Settings(heads=4).v_heads, Settings(heads=4).group) == (4, 1)


def test_a_dimension_below_one_is_refused_naming_its_option():
    for kwargs, says in (({"chunks": 0}, "--chunks must be >= 1, got 0"), ({"d_k": -1}, "--dk must be >= 1"),
                         ({"tokens": 0}, "--tokens must be >= 1"), ({"interleave": 0}, "--interleave must be >= 1"),
                         ({"probe_chunks": -1}, "--probe-chunks must be >= 0"),
                         ({"heads": 4, "value_heads": 6}, "--value-heads must be a positive multiple of --heads 4")):
        with pytest.raises(KdaInputError, match=says):
            Settings(**kwargs)


def test_the_same_settings_are_equal_and_hash_alike():
    a, b = Settings(heads=2, overrides={"sync.latency_us": 0.3}), Settings(heads=2, overrides={"sync.latency_us": 0.3})
    assert a == b and hash(a) == hash(b)
