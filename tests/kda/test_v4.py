"""v4: sub-chunk reference points make every exp factor <= 1; it passes where v3 overflows."""
import pytest
import torch
from torch.overrides import TorchFunctionMode

from kda import chunk_kda, execute
from kda.settings import Settings
from kda.studies.evaluate import evaluate
from kda.driver.inputs import make_inputs
from kda.reference.parity import assert_close
from kda.reference.recurrence import naive_recurrent_kda
from kda.driver.execute import Types
from npusim.record.ops import base_name

KIB = 1024


@pytest.mark.parametrize("gates", ["seed", "kimi", "strong"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_v4_passes_every_transfer_type_and_gate_family(dtype, gates):
    r = evaluate("v4", Settings(chunks=4, dtype=dtype, gates=gates), timing=False)
    assert r.execution.nonfinite is None and r.passed, (r.parity_o, r.parity_state)
    if dtype == "fp32":
        assert r.parity_o.rel_rms_err < 1e-5 and r.parity_state.rel_rms_err < 1e-5


class _ExpInputs(TorchFunctionMode):
    """Largest argument any exp() sees."""
    def __init__(self):
        super().__init__()
        self.largest = -float("inf")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if base_name(func) == "exp":
            self.largest = max(self.largest, float(args[0].max()))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("version, safe", [("v3", False), ("v4", True)])
def test_every_exp_factor_of_v4_is_at_most_one(version, safe):
    x = make_inputs(tokens=128, d_k=32, d_v=32, gates="kimi")
    with _ExpInputs() as watch:
        execute(x.q, x.k, x.v, x.g, x.beta, version=version, types=Types(transfer="fp32"))
    assert (watch.largest <= 0.0) == safe        # v3's exp(-gc) reaches ~+160 with these gates


def test_v4_survives_any_decay_in_fp16():
    # 64 x 40 = 2560 nats per chunk: exp(-gc) would be e^2560; v4 only ever forms exp(<= 0)
    x = make_inputs(tokens=128, d_k=32, d_v=32)
    g = torch.full_like(x.g, -40.0)
    ex = execute(x.q, x.k, x.v, g, x.beta, version="v4", types=Types(transfer="fp16"))
    o_ref, _ = naive_recurrent_kda(x.q, x.k, x.v, g, x.beta, None, None, True, dtype=torch.float64)
    assert ex.nonfinite is None
    assert_close("o", o_ref, ex.o)


def test_v4_keeps_six_syncs_and_shows_what_it_hands_over():
    g = evaluate("v4", Settings(chunks=2), timing=False).execution.graph
    assert [s.tensors for s in g.syncs] == [
        ("K_scaled", "Q_scaled", "K_decay", "K_left", "Q_left", "K_right"), ("A_kk_off",), ("M", "A_qk_diag"),
        ("U", "WS", "O_inter"), ("V_pseudo",), ("O_intra", "S_delta")]
    assert "K_div" not in g.tensors and "Gamma_inv" not in g.tensors
    # bf16: 96 (3 x 16 + left 12 + 12 + right 6 blocks x 4), 3 (6 blocks of 16x16), 8 + 2, 48, 16, 48
    assert [b / KIB for b in g.sync_bytes] == [96, 3, 10, 48, 16, 48] and sum(g.sync_bytes) == 221 * KIB
    assert g.redundant_bytes == 0 and g.unused_bytes == 0
    assert g.macs == 5_111_808                   # v3: 5,767,168; B is 6 blocks of 16x16x128, A_qk's in D
    assert g.phase("A").element_ops == 632_000   # v3: 90,240; the diagonal blocks cost the Vector
    assert g.kept == ("gamma_C", "A_kk_diag", "A_qk_diag", "A_qk_off")


def test_v4_keeps_its_state_in_fp32_unless_told_and_that_is_why():
    # slow gates: the state carries memory across chunks; a bf16 state puts 24 chunks past FLA's 0.005
    default = evaluate("v4", Settings(chunks=24, gates="slow"), timing=False)
    bf16 = evaluate("v4", Settings(chunks=24, gates="slow", state_dtype="bf16"), timing=False)
    assert default.execution.precision.state_type == "fp32" and default.passed
    assert bf16.execution.precision.state_type == "bf16" and not bf16.parity_o.passed
    for dtype in ("fp32", "fp16"):      # fp16's mantissa keeps an fp16 state accurate: no default there
        assert evaluate("v4", Settings(chunks=1, dtype=dtype), timing=False).execution.precision.state is None


def test_v4_fits_the_workspace_plans():
    for dtype in ("fp32", "bf16", "fp16"):
        assert evaluate("v4", Settings(chunks=2, dtype=dtype)).workspace_error is None
    # the document's 64 KiB resident region holds the bf16 state, not the fp32 one
    assert evaluate("v4", Settings(chunks=2, profile="seed-doc", state_dtype="bf16")).workspace_error is None
    err = evaluate("v4", Settings(chunks=2, profile="seed-doc")).workspace_error
    assert "resident region needs 96 KiB" in err and "S_prev 64" in err


@pytest.mark.parametrize("B, T, H, chunk_size", [(1, 100, 1, 64), (2, 77, 3, 32), (3, 64, 2, 16), (1, 96, 1, 48),
                                                 (1, 20, 1, 8)])
def test_v4_chunk_kda_matches_the_recurrence(B, T, H, chunk_size):
    x = make_inputs(batch=B, tokens=T, heads=H, d_k=32, d_v=24, initial_state=True, seed=T, gates="kimi")
    o, S = chunk_kda(x.q, x.k, x.v, x.g, x.beta, initial_state=x.initial_state, output_final_state=True,
                     version="v4", chunk_size=chunk_size)
    o_ref, S_ref = naive_recurrent_kda(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, True, dtype=torch.float64)
    assert_close("o", o_ref, o)
    assert_close("S", S_ref, S)


def test_v4_needs_whole_sub_chunks():
    x = make_inputs(tokens=80, d_k=16, d_v=16)
    with pytest.raises(ValueError, match="multiple of 16"):
        chunk_kda(x.q, x.k, x.v, x.g, x.beta, version="v4", chunk_size=40)


def test_the_api_applies_v4s_default_state_type():
    from kda import execute
    from kda.driver.inputs import make_inputs
    x = make_inputs(tokens=64, d_k=32, d_v=32)
    bf = [t.bfloat16() for t in (x.q, x.k, x.v)]
    assert execute(*bf, x.g, x.beta, version="v4").precision.state_type == "fp32"
    assert execute(*bf, x.g, x.beta, version="v3").precision.state_type == "bf16"
