"""FLA's in-kernel options in the timing (python -m kda.run --qk-l2norm-in-kernel --gate-in-kernel
--beta-sigmoid-in-kernel; kda/programs/in_kernel.py): a Vector phase of the design, charged by the ISA model.
Expectations counted by hand from the shapes and the instruction classes of npusim/chip/isa.py's docstring;
the formulas checked against FLA's, written out here."""
from __future__ import annotations

import json
import math

import pytest
import torch

from kda.cli.run import main
from kda.programs.in_kernel import (
    BETA_SIGMOID,
    GATE,
    IN_KERNEL,
    QK_L2NORM,
    prep_program,
)
from npusim import Executor, Precision, load_profile

C, DK, AIV = 64, 128, 2           # a chunk of 64 tokens, d_k 128, split over a core's 2 Vector units


def _instruction(isa, cls_cycles: float, elements: float) -> float:
    """One Vector instruction on one AIV over fp32 `elements`: max(min, class x repeats) + the dependent wait,
    repeats = ceil(bytes / 256)."""
    repeats = math.ceil(elements * 4 / isa.vec_repeat_bytes)
    return max(isa.vec_min_cycles, cls_cycles * repeats) + isa.vec_dependent_cycles


def hand_cycles(option: str, isa) -> float:
    """The Vector cycles of one chunk item's in-kernel work on each AIV, instruction by instruction."""
    b, u, e, d, r = (isa.vec_binary_cycles, isa.vec_unary_cycles, isa.vec_exp_cycles, isa.vec_div_cycles,
                     isa.vec_reduce_cycles)
    full, rows, one = C * DK / AIV, C / AIV, 1 / AIV          # elements per AIV: [C, K], [C] or [C, 1], [1]
    I = lambda cls, n: _instruction(isa, cls, n)         
    if option == QK_L2NORM:     # per tensor: x*x, a row sum, + eps, rsqrt, x * r (r broadcast: expand + mul)
        return 2 * (I(b, full) + I(r, full) + I(u, rows) + I(u, rows) + I(b, full) + I(u, full))
    if option == GATE:          # g + dt_bias (broadcast), exp(A_log), neg, softplus (exp, unary, exp), * (scalar)
        return (I(b, full) + I(u, full) + I(e, one) + I(u, one) + I(e, full) + I(u, full) + I(e, full)
                + I(u, full))
    return I(e, rows) + I(u, rows) + I(d, rows)                # sigmoid: exp, unary, div


def _latency(capsys, *flags) -> dict:
    # 24 heads x 8 chunks = 192 items, 8 on each of the 24 cores
    assert main(["--version", "v4", "--no-numerics", "--heads", "24", "--chunks", "8", *flags, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["layer"]


@pytest.mark.parametrize("options", [(QK_L2NORM,), (GATE,), (BETA_SIGMOID,), IN_KERNEL])
def test_in_kernel_work_adds_at_least_its_vector_instructions(capsys, options):
    profile = load_profile("ascend-910b2")
    flags = [f"--{o.replace('_', '-')}-in-kernel" for o in options]
    base, with_options = _latency(capsys), _latency(capsys, *flags)
    assert [p["name"] for p in with_options["passes"]] == ["in_kernel", "v4"]
    per_item_us = sum(hand_cycles(o, profile.isa) for o in options) / (profile.chip.clock_ghz * 1e3)
    prep = with_options["passes"][0]
    assert prep["makespan_us"] >= 8 * per_item_us
    assert with_options["latency_us"] - base["latency_us"] >= 8 * per_item_us + profile.chip.barrier_us - 1e-9


def test_the_phase_computes_flas_formulas():
    """Phase prep against FLA's formulas written out: l2norm x / sqrt(sum x^2 + 1e-6), the gate
    -exp(A_log) softplus(g + dt_bias), sigmoid(beta); fp32 throughout."""
    gen = torch.Generator().manual_seed(3)
    x = {"Q": torch.randn(3, C, DK, generator=gen), "K": torch.randn(3, C, DK, generator=gen),
         "g": torch.randn(3, C, DK, generator=gen), "beta": torch.randn(3, C, generator=gen),
         "A_log": torch.randn(3, 1, 1, generator=gen), "dt_bias": torch.randn(3, 1, DK, generator=gen)}
    ex = Executor(prep_program(IN_KERNEL), Precision("fp32"))
    ex.record(x, None)
    out, _ = ex.step(x, None, 0)
    norm = lambda t: t / torch.sqrt((t * t).sum(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(out["Q"], norm(x["Q"]))
    torch.testing.assert_close(out["K"], norm(x["K"]))
    torch.testing.assert_close(out["g"], -torch.exp(x["A_log"]) * torch.log1p(torch.exp(x["g"] + x["dt_bias"])))
    torch.testing.assert_close(out["beta"], 1 / (1 + torch.exp(-x["beta"])))


def test_numerics_with_the_options_pass_parity(capsys):
    assert main(["--version", "v6", "--chunks", "2", "--heads", "2", "--dk", "32", "--dv", "32", "--dtype", "fp32",
                 "--qk-l2norm-in-kernel", "--gate-in-kernel", "--beta-sigmoid-in-kernel", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["parity"]["pass"] and [p["name"] for p in d["layer"]["passes"]] == ["in_kernel", "v6"]


def test_in_kernel_with_backward_exits_2_with_one_line(capsys):
    assert main(["--backward", "--version", "v4", "--gate-in-kernel"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--gate-in-kernel times the forward's in-kernel work: it does not go with --backward" in err
    assert "\n" not in err


def _bounded_gate_cycles(isa) -> float:
    """FLA's gate with lower_bound: g + dt_bias (broadcast: add, expand), exp(A_log), exp(A_log) * raw (a
    [1, 1] factor: unary), sigmoid (exp, unary, div), lower_bound * (a Python scalar: unary)."""
    b, u, e, d = isa.vec_binary_cycles, isa.vec_unary_cycles, isa.vec_exp_cycles, isa.vec_div_cycles
    full, one = C * DK / AIV, 1 / AIV
    I = lambda cls, n: _instruction(isa, cls, n)
    return I(b, full) + I(u, full) + I(e, one) + I(u, full) + I(e, full) + I(u, full) + I(d, full) + I(u, full)


def _prep_compute_us(capsys, *flags) -> float:
    assert main(["--version", "v4", "--no-numerics", "--heads", "24", "--chunks", "8", *flags, "--json"]) == 0
    return next(m["compute_us"] for m in json.loads(capsys.readouterr().out)["memory"] if m["phase"] == "prep")


def test_the_gate_phase_is_charged_instruction_by_instruction(capsys):
    """Phase prep's Vector compute per item, to the cycle: the softplus gate (hand_cycles) and, with
    --gate-lower-bound, the sigmoid gate."""
    isa = load_profile("ascend-910b2").isa
    us = lambda cycles: cycles / (1.8 * 1e3)
    assert _prep_compute_us(capsys, "--gate-in-kernel") == pytest.approx(us(hand_cycles(GATE, isa)), rel=1e-9)
    assert _prep_compute_us(capsys, "--gate-in-kernel", "--gate-lower-bound", "-5") == pytest.approx(
        us(_bounded_gate_cycles(isa)), rel=1e-9)


def test_the_bounded_gate_computes_flas_formula():
    gen = torch.Generator().manual_seed(4)
    x = {"Q": torch.randn(2, C, DK, generator=gen), "K": torch.randn(2, C, DK, generator=gen),
         "g": torch.randn(2, C, DK, generator=gen), "beta": torch.randn(2, C, generator=gen),
         "A_log": torch.randn(2, 1, 1, generator=gen), "dt_bias": torch.randn(2, 1, DK, generator=gen)}
    ex = Executor(prep_program((GATE,), lower_bound=-3.0), Precision("fp32"))
    ex.record(x, None)
    out, _ = ex.step(x, None, 0)
    want = -3.0 / (1 + torch.exp(-torch.exp(x["A_log"]) * (x["g"] + x["dt_bias"])))
    torch.testing.assert_close(out["g"], want)


@pytest.mark.parametrize("flags, message", [
    (["--gate-lower-bound", "-2"], "--gate-lower-bound bounds the in-kernel gate: it needs --gate-in-kernel"),
    (["--gate-in-kernel", "--gate-lower-bound", "0"], "--gate-lower-bound must be in [-5, 0)"),
    (["--gate-in-kernel", "--gate-lower-bound", "nan"], "--gate-lower-bound must be in [-5, 0)")])
def test_a_bad_lower_bound_exits_2_with_one_line(capsys, flags, message):
    assert main(["--version", "v4", "--no-numerics", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
