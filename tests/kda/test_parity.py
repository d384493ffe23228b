"""Parity of the versions on the document's test inputs, v1's defect, and overflow naming."""
import pytest

from kda.settings import Settings
from kda.studies.evaluate import evaluate


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_v2_and_v3_pass_in_fp32_on_the_documents_inputs(version):
    r = evaluate(version, Settings(chunks=16, dtype="fp32", gates="seed"), timing=False)
    assert r.passed and r.parity_o.rel_rms_err < 1e-5 and r.execution.nonfinite is None


def test_v1_fails_once_the_state_survives_a_chunk():
    r = evaluate("v1", Settings(chunks=6, dtype="fp32", gates="slow"), timing=False)
    assert not r.passed
    # chunk 1 still reads the right state (chunk 0 started from zeros); its update is already wrong
    assert r.first_failing_chunk == 2 and all(e < 1e-5 for e in r.chunk_errors[:2])
    assert "v1's known defect" in r.note
    r = evaluate("v1", Settings(chunks=6, dtype="fp32", gates="slow", initial_state=True), timing=False)
    assert r.first_failing_chunk == 1


def test_v1_passes_when_the_gates_erase_the_state_every_chunk():
    # the document's gates decay each channel by ~e^-50 per 64-token chunk: the wrong axis scales ~0
    r = evaluate("v1", Settings(chunks=6, dtype="fp32", gates="seed"), timing=False)
    assert r.passed and r.note is None


def test_overflow_names_the_first_phase_and_tensor():
    # fp16 transfer: exp(-gc) is ~e^50 in Phase A; rounding K_div to fp16 at sync ① makes inf
    r = evaluate("v3", Settings(chunks=2, dtype="fp16", gates="seed"), timing=False)
    nf = r.execution.nonfinite
    assert (nf.chunk, nf.where, nf.tensor) == (0, "sync ① (fp16)", "K_div")
    assert r.to_json()["overflow"] == {"phase": "A", "tensor": "K_div", "where": "sync ① (fp16)", "chunk": 0,
                                       "sequence": 0}
    assert not r.passed
    # fp32 with FLA's -5*sigmoid gates: ~160 nats per chunk, past exp's 88.7: inf already in Phase A
    nf = evaluate("v3", Settings(chunks=1, dtype="fp32", gates="kimi"), timing=False).execution.nonfinite
    assert (nf.where, nf.tensor) == ("Phase A", "Gamma_inv")
