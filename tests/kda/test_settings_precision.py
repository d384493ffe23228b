"""The precision policy's names and bytes, by hand on the toy program of the npusim tests (P hands y [1000, 1]
to Q, which makes z)."""
from types import SimpleNamespace

import pytest

from kda.settings.precision import check_policy_names, uniform_bytes, unknown_payloads
from tests.conftest import randn, record, toy_program


def _graph():
    return record(toy_program(), x=randn(1000, 100), w=randn(1000, 1000, seed=1))


def test_a_uniform_policy_s_bytes_are_its_hand_offs_at_that_width():
    graph = _graph()
    assert uniform_bytes(graph, "bf16") == 1000 * 2 and uniform_bytes(graph, "fp32") == 1000 * 4


def test_a_policy_naming_a_tensor_the_program_never_hands_over_is_refused():
    graph, program = _graph(), SimpleNamespace(name="toy")
    assert unknown_payloads(graph, ["y", "A_raw"]) == ["A_raw"]
    made_here = SimpleNamespace(payload_dtypes={"z": "fp32"})          # made by the program: not refused
    check_policy_names([graph], made_here, program, foreign_payloads_ok=False)
    foreign = SimpleNamespace(payload_dtypes={"A_raw": "fp32"})
    check_policy_names([graph], foreign, program, foreign_payloads_ok=True)
    with pytest.raises(ValueError, match="toy hands over no tensor named 'A_raw'; its payloads are y"):
        check_policy_names([graph], foreign, program, foreign_payloads_ok=False)
