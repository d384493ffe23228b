"""kda.driver.multipass on its own: the stored types a design's notes name, the names a pass reads, a toy
design of two passes against a plain loop (rounding to the stored type, groups of items, where inf first
appears), and FLA's passes against the fp64 recurrence."""
from functools import partial

import pytest
import torch

from npusim import Precision, phase_program
from npusim.model.schedule import CHUNKS, SEQUENTIAL, Design, Pass

from kda.driver import multipass
from kda.driver.inputs import make_inputs
from kda.driver.multipass import pass_args, record_passes, run_passes, stored_types
from kda.programs import DESIGNS
from kda.programs.v1 import kda_chunk_v1
from kda.reference.recurrence import naive_recurrent_kda


@phase_program("toy.double", returns=("D",))
def double(npu, K):
    with npu.vec("twice"):
        D = K * 2.0
    return D


@phase_program("toy.scan", returns=("O", "S_new"), state=("S_prev", "S_new"))
def scan(npu, D, S_prev):
    with npu.vec("acc"):
        total = D.sum(-2, keepdim=True)
        O = D + S_prev  # noqa: E741 (the design's name)
        S_new = S_prev * 0.5 + total
    return O, S_new


TOY = Design("toy", (Pass("double", double, CHUNKS), Pass("scan", scan, SEQUENTIAL)))


def _run(design, pool, state, precision, input_types=None):
    shapes = {"chunk_size": pool["Q"].shape[2], "d_k": pool["Q"].shape[3], "d_v": pool["Q"].shape[3]}
    _, executors = record_passes(design, dict(pool), state, precision, input_types or {}, shapes)
    return run_passes(design, executors, dict(pool), state, precision, pipeline=False)


def _toy_by_loop(K, S0):
    """The toy design by hand: D = 2 K; per sequence, chunk after chunk, O = D + S, S <- S / 2 + sum of D."""
    N, NT = K.shape[:2]
    D = 2 * K.double()
    out = torch.empty_like(D)
    S = S0.double().clone()
    for n in range(N):
        for t in range(NT):
            out[n, t] = D[n, t] + S[n]
            S[n] = S[n] * 0.5 + D[n, t].sum(0, keepdim=True)
    return D, out, S


def _toy_pool(N=2, NT=3, C=4, d=3, seed=0):
    K = torch.randn(N, NT, C, d, generator=torch.Generator().manual_seed(seed))
    return {"Q": K, "K": K}, torch.randn(N, 1, d, generator=torch.Generator().manual_seed(seed + 1))


# ----- the notes and the names ------------------------------------------------------------------------
def test_stored_types_read_the_designs_notes():
    toy = (Pass("double", double, CHUNKS),)
    assert stored_types(Design("a", toy, notes={"stored": "gc=fp32,A_kk=fp32"})) == {"gc": "fp32", "A_kk": "fp32"}
    assert stored_types(Design("b", toy, notes={"stored": "A_qk=bf16"})) == {"A_qk": "bf16"}
    assert stored_types(Design("c", toy, notes={"stored": ""})) == {}
    assert stored_types(Design("d", toy)) == {}
    assert stored_types(DESIGNS["fla"]) == {"gc": "fp32", "A_kk": "fp32"}       # FLA keeps both in fp32


def test_pass_args_are_the_programs_positional_names_after_npu_but_the_state():
    assert pass_args(Pass("double", double, CHUNKS)) == ["K"]
    assert pass_args(Pass("scan", scan, SEQUENTIAL)) == ["D"]                  # S_prev is the state


def test_pass_args_of_a_partial_program():
    def body(npu, x, w, S_prev, *, flag=False):
        with npu.vec("P"):
            S_new = S_prev + (x * w if flag else x)
        return S_new
    program = phase_program("p", returns=("S_new",), state=("S_prev", "S_new"))(partial(body, flag=True))
    assert pass_args(Pass("p", program, SEQUENTIAL)) == ["x", "w"]
    # v1 is v2's body with a keyword bound: (npu, Q, K, V, g, beta, S_prev, scale, *, state_decay_axis)
    assert pass_args(Pass("v1", kda_chunk_v1, SEQUENTIAL)) == ["Q", "K", "V", "g", "beta", "scale"]


# ----- a toy design of two passes --------------------------------------------------------------------
def test_two_passes_equal_the_plain_loop():
    pool, S0 = _toy_pool()
    out, S, first = _run(TOY, pool, S0, Precision("fp32"))
    D, O_ref, S_ref = _toy_by_loop(pool["K"], S0)
    assert first is None
    torch.testing.assert_close(out["D"].double(), D, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out["O"].double(), O_ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(S.double(), S_ref, rtol=1e-6, atol=1e-6)


def test_a_pass_output_is_stored_in_its_type():
    pool, S0 = _toy_pool()
    out, _, _ = _run(TOY, pool, S0, Precision("bf16", {"O": "fp32"}))
    bf16 = (2 * pool["K"]).to(torch.bfloat16).to(torch.float32)      # D in GM, bf16 (the transfer type)
    assert torch.equal(out["D"], bf16)
    assert not torch.equal(out["D"], 2 * pool["K"])
    assert out["O"].to(torch.bfloat16).to(torch.float32).ne(out["O"]).any()   # O kept in fp32: not rounded


def test_groups_of_items_give_the_same_result_as_one_group(monkeypatch):
    pool, S0 = _toy_pool(N=3, NT=5)
    whole, S_whole, _ = _run(TOY, pool, S0, Precision("fp32"))
    monkeypatch.setattr(multipass, "GROUP", 4)                      # 15 items: groups of 4, 4, 4 and 3
    grouped, S_grouped, _ = _run(TOY, pool, S0, Precision("fp32"))
    assert torch.equal(whole["D"], grouped["D"]) and torch.equal(whole["O"], grouped["O"])
    assert torch.equal(S_whole, S_grouped)


@pytest.mark.parametrize("group", [4096, 2])
def test_inf_in_an_items_pass_is_named_with_its_pass_chunk_and_sequence(monkeypatch, group):
    monkeypatch.setattr(multipass, "GROUP", group)
    pool, S0 = _toy_pool(N=2, NT=3)
    K = pool["K"].clone()
    K[1, 2, 0, 0] = 3e38                     # 2 x 3e38 overflows fp32: item 1 x 3 + 2, in the third group of 2
    _, _, first = _run(TOY, {"Q": K, "K": K}, S0, Precision("fp32"))
    assert (first.where, first.tensor, first.chunk, first.sequence) == ("double: Phase twice", "D", 2, 1)
    K[1, 0, 0, 0] = 3e38                     # an earlier item (1 x 3 + 0) overflows too: it comes first
    _, _, first = _run(TOY, {"Q": K, "K": K}, S0, Precision("fp32"))
    assert (first.chunk, first.sequence) == (0, 1)
    assert str(first) == "D in double: Phase twice of chunk 0 (sequence 1)"


def test_inf_in_the_state_pass_is_named_with_its_pass_chunk_and_sequence():
    pool, S0 = _toy_pool(N=3, NT=3, C=8)
    K = pool["K"].clone()
    K[2, 1, :, 1] = 3e37                     # D = 6e37 is finite; its sum over 8 tokens (4.8e38) is not
    _, S, first = _run(TOY, {"Q": K, "K": K}, S0, Precision("fp32"))
    assert (first.where, first.tensor, first.chunk, first.sequence) == ("scan: Phase acc", "total", 1, 2)
    assert torch.isinf(S[2]).any() and torch.isfinite(S[:2]).all()


def test_a_pass_reading_a_name_nothing_provides_is_one_line():
    with pytest.raises(ValueError, match="^pass scan reads D, which neither the inputs nor an earlier pass "
                                         "provide$"):
        _run(Design("lone", (Pass("scan", scan, SEQUENTIAL),)), *_toy_pool(), Precision("fp32"))
    with pytest.raises(ValueError, match="^pass scan carries a state, but none was given$"):
        _run(TOY, _toy_pool()[0], None, Precision("fp32"))


# ----- a real design of several passes ----------------------------------------------------------------
def _chunks(x, C):
    """[B, T, H, ...] -> [B x H, T / C, C, ...] (T a multiple of C)."""
    x = x.movedim(2, 1)
    return x.reshape(x.shape[0] * x.shape[1], x.shape[2] // C, C, *x.shape[3:])


def test_fla_passes_equal_the_fp64_recurrence():
    B, T, H, d, C = 1, 64, 2, 8, 32
    x = make_inputs(B, T, H, d, d, "kimi", 3, True)
    pool = {"Q": _chunks(x.q, C), "K": _chunks(x.k, C), "V": _chunks(x.v, C), "g": _chunks(x.g, C),
            "beta": _chunks(x.beta, C), "scale": d ** -0.5}
    S0 = x.initial_state.reshape(B * H, d, d)
    out, S, first = _run(DESIGNS["fla"], pool, S0, Precision("fp32"), {"g": "fp32", "beta": "fp32"})
    ref_o, ref_S = naive_recurrent_kda(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, True,
                                       dtype=torch.float64)
    assert first is None
    o = out["O"].reshape(B, H, T, d).movedim(1, 2)
    torch.testing.assert_close(o.double(), ref_o, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(S.reshape(B, H, d, d).double(), ref_S, rtol=1e-4, atol=1e-4)
    assert out["H"].shape == (B * H, T // C, d, d)                    # each chunk's starting state, kept
    torch.testing.assert_close(out["H"][:, 0], S0)                    # chunk 0 starts from the initial state
