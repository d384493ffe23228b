"""The FLA-shaped API against the recurrence: any T, B > 1, H > 1, and clear errors."""
import pytest
import torch

from kda import KdaInputError, chunk_kda, recurrent_kda
from kda.driver.inputs import make_inputs
from kda.reference.parity import assert_close
from kda.reference.recurrence import naive_recurrent_kda
from kda.driver.execute import Types


@pytest.mark.parametrize("version", ["v2", "v3"])
@pytest.mark.parametrize("B, T, H, chunk_size", [(1, 100, 1, 64), (2, 77, 3, 32), (3, 64, 2, 16)])
def test_chunk_kda_matches_the_recurrence(version, B, T, H, chunk_size):
    x = make_inputs(batch=B, tokens=T, heads=H, d_k=32, d_v=24, initial_state=True, seed=T)
    o, S = chunk_kda(x.q, x.k, x.v, x.g, x.beta, initial_state=x.initial_state, output_final_state=True,
                     version=version, chunk_size=chunk_size)
    o_ref, S_ref = naive_recurrent_kda(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, True, dtype=torch.float64)
    assert o.shape == (B, T, H, 24) and S.shape == (B, H, 32, 24)
    assert_close("o", o_ref, o)
    assert_close("S", S_ref, S)


def test_scale_and_dtypes_follow_fla():
    x = make_inputs(tokens=64, d_k=16, d_v=16)
    o, S = chunk_kda(x.q, x.k, x.v, x.g, x.beta, scale=1.0, output_final_state=True)
    o_ref, _ = recurrent_kda(x.q, x.k, x.v, x.g, x.beta, scale=1.0)
    assert_close("o", o_ref, o)
    ob, Sb = chunk_kda(*(t.bfloat16() for t in (x.q, x.k, x.v)), x.g, x.beta, output_final_state=True)
    assert ob.dtype == torch.bfloat16 and Sb.dtype == torch.float32
    assert chunk_kda(x.q, x.k, x.v, x.g, x.beta)[1] is None


def test_transfer_type_follows_the_inputs_unless_given():
    from kda import execute
    x = make_inputs(tokens=64, d_k=16, d_v=16)
    assert execute(x.q, x.k, x.v, x.g, x.beta).graph.transfer_dtype == "fp32"
    assert execute(x.q.half(), x.k.half(), x.v.half(), x.g, x.beta).graph.transfer_dtype == "fp16"
    assert execute(x.q, x.k, x.v, x.g, x.beta, types=Types(transfer="bf16")).graph.transfer_dtype == "bf16"


def test_bad_inputs_get_one_line_errors():
    x = make_inputs(tokens=8, d_k=4, d_v=4)
    with pytest.raises(KdaInputError, match=r"k must have shape \[1, 8, 1, 4\] to match q"):
        chunk_kda(x.q, x.k[:, :4], x.v, x.g, x.beta)
    bad = x.v.clone()
    bad[0, 3, 0, 1] = float("nan")
    with pytest.raises(KdaInputError, match="v contains NaN or inf"):
        chunk_kda(x.q, x.k, bad, x.g, x.beta)
    with pytest.raises(KdaInputError, match=r"g is the log decay and must be <= 0 \(decay alpha = exp\(g\) in \(0, 1\]\)"):
        chunk_kda(x.q, x.k, x.v, -x.g, x.beta)
    with pytest.raises(KdaInputError, match="chunk_size must be a positive integer"):
        chunk_kda(x.q, x.k, x.v, x.g, x.beta, chunk_size=0)
    with pytest.raises(ValueError, match="unknown version 'v9'"):
        chunk_kda(x.q, x.k, x.v, x.g, x.beta, version="v9")
