"""A profile field's value and its sampling range: what is accepted as it is, and what is refused in one line
naming the profile and the field."""
import math

import pytest

from npusim.chip.profile_checks import check_number, check_range
from npusim.errors import ProfileError


def test_a_range_is_two_positive_finite_numbers_in_order():
    assert check_range([0.1, 5], "sync.latency_us", "p.toml") == (0.1, 5.0)
    for bad, says in (([0, 1], "lower bound must be > 0"), ([2, 1], "lo > hi"), (["a", 1], "two numbers"),
                      ([1, math.inf], "finite"), ([1], "two numbers")):
        with pytest.raises(ProfileError, match=says) as err:
            check_range(bad, "sync.latency_us", "p.toml")
        assert "profile p.toml: field sync.latency_us" in str(err.value)


def test_a_number_no_chip_could_have_is_refused():
    for value, type_name, where, says in ((math.nan, "float", "sync.latency_us", ">= 0"),
                                          (-1.0, "float", "sync.latency_us", ">= 0"),
                                          (1.5, "int", "chip.ai_cores", "whole number"),
                                          (5000, "int", "chip.ai_cores", r"outside \[1, 4096\]"),
                                          (0.5, "float", "isa.enabled", "a switch"),
                                          (0.0, "float", "chip.clock_ghz", "> 0"),
                                          (math.inf, "float", "sync.latency_us", "finite"),
                                          (True, "float", "sync.latency_us", "must be a number")):
        with pytest.raises(ProfileError, match=says):
            check_number(value, type_name, where, "p.toml")


def test_accepted_numbers_come_back_in_their_field_s_type():
    assert check_number(24.0, "int", "chip.ai_cores", "p.toml") == 24
    assert isinstance(check_number(24.0, "int", "chip.ai_cores", "p.toml"), int)
    assert check_number(3, "float", "sync.latency_us", "p.toml") == 3.0
    assert check_number(math.inf, "float", "memory.chip_bandwidth_gbps", "p.toml") == math.inf   # not modelled
