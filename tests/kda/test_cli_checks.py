"""The CLI's small parsers: what they accept, and the one line that names what is wrong otherwise."""
import pytest

from kda.cli.checks import parse_overrides, parse_payload_dtypes, parse_seqlens
from kda.driver.checks import KdaInputError


def test_sequence_lengths_are_whole_positive_token_counts():
    assert parse_seqlens("4096, 131072") == (4096, 131072)
    for text, says in (("", "empty"), ("64,x", "'x' is not a whole number"), ("64,0", "at least one token")):
        with pytest.raises(KdaInputError, match=says):
            parse_seqlens(text)


def test_profile_overrides_are_section_field_equals_a_finite_number():
    assert parse_overrides(["sync.latency_us=0.3", " chip.ai_cores = 8 "]) == {"sync.latency_us": 0.3,
                                                                              "chip.ai_cores": 8.0}
    for item, says in (("latency_us=0.3", "SECTION.FIELD=VALUE"), ("sync.latency_us=fast", "not a number"),
                       ("sync.latency_us=inf", "finite number >= 0"), ("sync.latency_us=-1", "finite number >= 0")):
        with pytest.raises(KdaInputError, match=says):
            parse_overrides([item])


def test_payload_types_are_name_equals_a_16_or_32_bit_float():
    assert parse_payload_dtypes("A_raw=fp32, M=bf16,") == {"A_raw": "fp32", "M": "bf16"}
    assert parse_payload_dtypes(None) == {}
    with pytest.raises(KdaInputError, match="'M=int8' is not NAME=TYPE"):
        parse_payload_dtypes("M=int8")
