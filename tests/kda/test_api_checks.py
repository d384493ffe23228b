"""kda.chunk_kda refuses bad input in one KdaInputError line, before any work, and never
returns inf/NaN without a word."""
import math

import pytest
import torch

import kda
from kda.driver.checks import KdaInputError, KdaOverflowWarning
from kda.driver.inputs import make_inputs


def _execute(*tensors, transfer_dtype=None, precision=None, **kw):
    """kda.execute with the types as chunk_kda names them."""
    from kda.driver.execute import Types, execute
    return execute(*tensors, types=Types(transfer=transfer_dtype, policy=precision), **kw)


@pytest.fixture
def x():
    return make_inputs(1, 150, 1, 16, 16, "seed", 0, False)


def test_non_integer_cu_seqlens_are_refused_not_truncated(x):
    for cu in ([0., 40.5, 150.], torch.tensor([0., 40.5, 150.])):
        with pytest.raises(KdaInputError, match="whole token offsets"):
            kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, cu_seqlens=cu)
    o, _ = kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, cu_seqlens=[0., 40., 150.])   # whole floats are fine
    assert o.shape == x.q.shape[:3] + (16,)


def test_two_dimensional_cu_seqlens_are_refused(x):
    with pytest.raises(KdaInputError, match="one row"):
        kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, cu_seqlens=torch.tensor([[0, 40], [40, 150]]))


@pytest.mark.parametrize("cu", [None, [0, 40, 150]])
def test_an_initial_state_that_is_not_a_tensor_is_refused(x, cu):
    with pytest.raises(KdaInputError, match="initial_state must be a torch.Tensor"):
        kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, initial_state=[[0.0]], cu_seqlens=cu)


def test_meta_tensors_are_refused(x):
    with pytest.raises(KdaInputError, match="q must be a dense tensor with data"):
        kda.chunk_kda(x.q.to("meta"), x.k, x.v, x.g, x.beta)


@pytest.mark.parametrize("scale", [math.nan, math.inf, "0.25"])
def test_a_scale_that_is_not_a_finite_number_is_refused(x, scale):
    with pytest.raises(KdaInputError, match="scale must be a finite number"):
        kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, scale=scale)


def test_an_output_that_overflows_warns_with_where(x):
    big = x.k * 1e30                                  # finite inputs whose products overflow fp32
    with pytest.warns(KdaOverflowWarning, match="inf/NaN first appears in"):
        o, _ = kda.chunk_kda(x.q, big, x.v, x.g, x.beta)
    assert not torch.isfinite(o).all()


def test_a_backward_chunk_size_is_refused_at_the_forward(x):
    q = x.q.clone().requires_grad_()
    with pytest.raises(KdaInputError, match="backward: chunk_size"):
        kda.chunk_kda(q, x.k, x.v, x.g, x.beta, chunk_size=16, version="v4")


# ---- the keyword options, the tensors' types and the work limits: one line, before any work ----------------
@pytest.mark.parametrize("kw, needle", [
    ({"precision": "bf16"}, "precision must be an npusim.Precision"), ({"precision": 1}, "precision must be"),
    ({"version": "v9"}, "unknown version 'v9'"), ({"version": None}, "unknown version None"),
    ({"transfer_dtype": "fp8"}, "transfer_dtype"), ({"transfer_dtype": torch.int8}, "transfer_dtype"),
    ({"chunk_size": True}, "chunk_size must be a positive integer"), ({"scale": 10 ** 400}, "scale must be")])
@pytest.mark.parametrize("entry", ["chunk_kda", "fla", "execute"])
def test_bad_options_are_one_line(x, kw, needle, entry):
    from kda.driver.chunk_kda import chunk_kda as fla
    call = {"chunk_kda": kda.chunk_kda, "fla": fla, "execute": _execute}[entry]
    with pytest.raises(KdaInputError, match=needle) as err:
        call(x.q, x.k, x.v, x.g, x.beta, **kw)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2", "int32", "complex64"])
@pytest.mark.parametrize("entry", ["chunk_kda", "fla", "recurrent"])
def test_tensors_of_a_type_no_design_computes_from_are_refused(x, dtype, entry):
    from kda.driver.chunk_kda import chunk_kda as fla, recurrent_kda
    call = {"chunk_kda": kda.chunk_kda, "fla": fla, "recurrent": recurrent_kda}[entry]
    q = x.q.to(getattr(torch, dtype))
    with pytest.raises(KdaInputError, match="q must be fp16, bf16, fp32 or fp64"):
        call(q, x.k, x.v, x.g, x.beta)


@pytest.mark.parametrize("entry", ["chunk_kda", "fla"])
def test_no_heads_and_nested_tensors_are_refused(x, entry):
    from kda.driver.chunk_kda import chunk_kda as fla
    call = {"chunk_kda": kda.chunk_kda, "fla": fla}[entry]
    with pytest.raises(KdaInputError, match="empty input"):
        call(*(t[:, :, :0] for t in (x.q, x.k, x.v, x.g, x.beta)))
    nested = torch.nested.nested_tensor([x.q[0, :, 0], x.q[0, :40, 0]])
    with pytest.raises(KdaInputError, match="q must be a dense tensor with data, got a nested"):
        call(nested, x.k, x.v, x.g, x.beta)


@pytest.mark.parametrize("chunk_size", [10 ** 9, 2 ** 62])
def test_the_api_has_the_command_lines_work_limits(x, chunk_size):
    from npusim.model.limits import LimitError
    with pytest.raises(LimitError, match="chunk_size .*NPUSIM_NO_LIMITS"):
        kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, chunk_size=chunk_size)


@pytest.mark.parametrize("cpu, needle", [([[0, 40], [40, 150]], "whole token offsets"), ([0, None, 150], "whole"),
                                         ([0, 40.7, 150], "whole"), (torch.tensor([0.0, 40.5, 150.0]), "whole"),
                                         (torch.tensor([[0, 40, 150]]), "one row"), ([0, 41, 150], "same values")])
def test_a_bad_cu_seqlens_cpu_is_one_line_never_rounded(x, cpu, needle):
    from kda.driver.chunk_kda import chunk_kda as fla
    with pytest.raises(KdaInputError, match=needle):
        fla(x.q, x.k, x.v, x.g, x.beta, cu_seqlens=torch.tensor([0, 40, 150]), cu_seqlens_cpu=cpu)


def test_dt_bias_of_another_shape_with_the_same_count_is_refused():
    from kda.driver.chunk_kda import chunk_kda as fla
    y = make_inputs(1, 64, 1, 8, 8, "seed", 0, False)
    raw = torch.randn(1, 64, 1, 8, generator=torch.Generator().manual_seed(1))
    with pytest.raises(KdaInputError, match=r"dt_bias must have shape \[8\] or \[1, 8\] .*got \[2, 4\]"):
        fla(y.q, y.k, y.v, raw, y.beta, use_gate_in_kernel=True, A_log=torch.zeros(1), dt_bias=torch.zeros(2, 4))
    o, _ = fla(y.q, y.k, y.v, raw, y.beta, use_gate_in_kernel=True, A_log=torch.zeros(1), dt_bias=torch.zeros(1, 8))
    assert torch.isfinite(o).all()


# ---- what a warning says --------------------------------------------------------------------------------
def test_an_overflow_warning_names_the_safe_designs(x):
    big = x.k * 1e30
    with pytest.warns(KdaOverflowWarning, match="version='v6'.*exponent <= 0") as caught:
        kda.chunk_kda(x.q, big, x.v, x.g, x.beta, version="v3")
    assert "the output" in str(caught[0].message) and "hold" in str(caught[0].message)


def test_a_warning_never_says_the_output_holds_inf_when_it_is_finite(x):
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        o, s = kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, scale=1e30, output_final_state=True)
    said = [str(w.message) for w in caught if issubclass(w.category, KdaOverflowWarning)]
    if torch.isfinite(o).all() and torch.isfinite(s).all():
        assert all("hold" not in m and "are finite" in m for m in said), said
    else:
        assert said and "hold" in said[0]


def test_the_recurrence_warns_when_it_diverges(x):
    from kda.driver.chunk_kda import recurrent_kda
    with pytest.warns(KdaOverflowWarning, match="recurrent_kda: the output holds inf/NaN"):
        o, _ = recurrent_kda(x.q, x.k, x.v, x.g, x.beta * 100)
    assert not torch.isfinite(o).all()
