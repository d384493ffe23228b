"""The references agree with each other: the document's chunk form equals the recurrence exactly in fp64."""
import torch

from kda.inputs import make_inputs
from kda.reference.parity import assert_close, compare
from kda.reference.recurrence import doc_chunk_kda, naive_recurrent_kda, unit_lower_inverse


def test_doc_chunk_references_equal_the_recurrence_in_fp64():
    x = make_inputs(batch=2, tokens=128, heads=2, d_k=32, d_v=16, initial_state=True)
    o, S = naive_recurrent_kda(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, True, dtype=torch.float64)
    for version in ("v2", "v3"):
        oc, Sc = doc_chunk_kda(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, True, version=version,
                               chunk_size=64, dtype=torch.float64)
        assert (oc - o).abs().max() < 1e-10 and (Sc - S).abs().max() < 1e-10


def test_unit_lower_inverse_is_the_inverse():
    A = torch.randn(3, 16, 16, dtype=torch.float64)
    R = unit_lower_inverse(A)
    eye = torch.eye(16, dtype=torch.float64)
    assert torch.allclose(R @ (torch.tril(A, -1) + eye), eye.expand(3, 16, 16), atol=1e-10)


def test_recurrence_matches_a_token_loop_by_hand():
    x = make_inputs(tokens=5, d_k=4, d_v=3)
    o, S = naive_recurrent_kda(x.q, x.k, x.v, x.g, x.beta, 1.0, None, True, dtype=torch.float64)
    St = torch.zeros(4, 3, dtype=torch.float64)
    for t in range(5):
        q, k, v = (y[0, t, 0].double() for y in (x.q, x.k, x.v))
        a, b = x.g[0, t, 0].double().exp(), float(x.beta[0, t, 0])
        St = torch.diag(a) @ St
        St = St + b * torch.outer(k, v - St.T @ k)
        assert torch.allclose(o[0, t, 0], St.T @ q)
    assert torch.allclose(S[0, 0], St)


def test_parity_metric_is_flas():
    ref = torch.ones(100)
    assert compare(ref, ref + 1e-7).passed                       # max abs <= 1e-6
    assert compare(ref, ref * 1.004).passed                      # rel RMS 0.004 < 0.005
    assert not compare(ref, ref * 1.006).passed
    assert not compare(ref, ref * float("nan")).passed
    assert_close("same", ref, ref)
