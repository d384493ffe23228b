"""The references agree with each other: the document's chunk form equals the recurrence exactly in fp64."""
import torch

from kda.driver.inputs import make_inputs
from kda.reference.parity import assert_close, compare
from kda.reference.recurrence import doc_chunk_kda, naive_recurrent_kda, unit_lower_inverse
from kda.driver.execute import Types


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


def test_the_variable_length_reference_keeps_each_sequences_initial_state():
    """With k = 0 nothing is written and with g = 0 nothing decays: each sequence's state stays its own
    initial state, and o_t = scale * q_t @ h0 of the sequence t belongs to (first principles, no recurrence)."""
    import kda
    from kda.studies.oracle import reference
    x = make_inputs(batch=1, tokens=50, heads=2, d_k=8, d_v=4, initial_state=False)
    h0 = torch.randn(2, 2, 8, 4, generator=torch.Generator().manual_seed(3))      # two sequences
    k, g = torch.zeros_like(x.k), torch.zeros_like(x.g)
    ex = kda.execute(x.q, k, x.v, g, x.beta, None, h0, types=Types(transfer="fp32"), cu_seqlens=[0, 20, 50])
    ref = reference(ex)
    assert torch.allclose(ref.state, h0.double(), atol=1e-12)
    scale = 8 ** -0.5
    for i, (a, b) in enumerate(((0, 20), (20, 50))):
        expect = scale * torch.einsum("thk,hkv->thv", x.q[0, a:b].double(), h0[i].double())
        assert torch.allclose(ref.o[0, a:b], expect, atol=1e-9)
