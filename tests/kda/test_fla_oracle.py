"""kda.chunk_kda against fla-core's chunk_kda, parameter by parameter: the same call through FLA's naive path
on the CPU (kda/reference/fla_oracle.py: FLA's naive recurrence and gate functions, the fused l2norm and beta
sigmoid written out) and through the simulated NPU; outputs, final states and every gradient compared in fp32.

fla-core is in the dev extra (a pure-Python wheel needing only einops: no Triton, no torch of its own), so CI
runs this; without it the module is skipped."""
from __future__ import annotations

import ast
import importlib.util
import inspect
from pathlib import Path

import pytest
import torch

from kda.reference import fla_oracle

if not fla_oracle.available():
    pytest.skip("fla-core (and einops) are not installed: pip install -e '.[dev]'", allow_module_level=True)

import kda  # noqa: E402
from kda.driver.fla_options import FLA_KWARGS, FLA_PARAMETERS  # noqa: E402

B, T, H, K, V, C = 2, 48, 2, 16, 8, 32
TOL = 2e-5            # fp32 on both sides: the chunked form against the token-by-token recurrence


def _fla_source() -> ast.Module:
    spec = importlib.util.find_spec("fla")
    return ast.parse((Path(list(spec.submodule_search_locations)[0]) / "ops" / "kda" / "chunk.py").read_text())


def test_every_fla_core_parameter_is_a_parameter_here():
    """fla-core's chunk_kda signature and the keywords it reads from **kwargs, read from its source (importing
    it needs Triton); every one is a parameter of kda.chunk_kda, or a keyword it reads."""
    fn = next(n for n in ast.walk(_fla_source()) if isinstance(n, ast.FunctionDef) and n.name == "chunk_kda")
    named = [a.arg for a in fn.args.args + fn.args.kwonlyargs]
    from_kwargs = {c.args[0].value for c in ast.walk(fn) if isinstance(c, ast.Call)
                   and isinstance(c.func, ast.Attribute) and c.func.attr in ("get", "pop")
                   and isinstance(c.func.value, ast.Name) and c.func.value.id == "kwargs"
                   and c.args and isinstance(c.args[0], ast.Constant)}
    ours = inspect.signature(kda.chunk_kda).parameters
    assert named == list(FLA_PARAMETERS) and from_kwargs <= set(FLA_KWARGS)
    assert [p for p in ours][:len(named)] == named            # the same order: positional calls work too
    assert from_kwargs - set(ours) <= set(FLA_KWARGS) and "kwargs" in ours


def _inputs(HV: int, seed: int = 0, raw: bool = False, varlen: bool = False):
    gen = torch.Generator().manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=gen)
    unit = lambda x: x / x.norm(dim=-1, keepdim=True)
    x = dict(q=unit(rnd(B, T, H, K)), k=unit(rnd(B, T, H, K)), v=rnd(B, T, HV, V),
             g=rnd(B, T, HV, K) if raw else -0.4 * torch.rand(B, T, HV, K, generator=gen),
             beta=rnd(B, T, HV) if raw else torch.rand(B, T, HV, generator=gen),
             initial_state=0.5 * rnd(B, HV, K, V))
    if varlen:
        x = {n: (t.reshape(1, B * T, *t.shape[2:]) if n != "initial_state" else torch.cat([t, t[:1]])) for n, t in x.items()}
    return x


CASES = {   # name: (value heads, raw g and beta, the options)
    "plain": (H, False, {}),
    "grouped_heads": (2 * H, False, {}),
    "grouped_heads_x4": (4 * H, False, {}),
    "l2norm": (H, False, {"use_qk_l2norm_in_kernel": True}),
    "gate_softplus": (2 * H, True, {"use_gate_in_kernel": True, "A_log": True, "dt_bias": True}),
    "gate_lower_bound": (2 * H, True, {"use_gate_in_kernel": True, "A_log": True, "dt_bias": True,
                                       "safe_gate": True, "lower_bound": -5.0}),
    "gate_lower_bound_no_A_log": (H, True, {"use_gate_in_kernel": True, "dt_bias": True, "lower_bound": -2.0}),
    "beta_sigmoid": (H, True, {"use_beta_sigmoid_in_kernel": True}),
    "allow_neg_eigval": (H, True, {"use_beta_sigmoid_in_kernel": True, "allow_neg_eigval": True}),
    "state_v_first": (2 * H, False, {"state_v_first": True}),
    "cu_seqlens": (2 * H, False, {"cu_seqlens": True}),
    "everything": (2 * H, True, {"use_qk_l2norm_in_kernel": True, "use_gate_in_kernel": True, "A_log": True,
                                 "dt_bias": True, "safe_gate": True, "lower_bound": -5.0,
                                 "use_beta_sigmoid_in_kernel": True, "state_v_first": True, "cu_seqlens": True}),
}


def _call(name: str):
    """The leaves (inputs needing gradients) and the keyword arguments of one case, the same for both sides."""
    HV, raw, options = CASES[name]
    options = dict(options)
    x = _inputs(HV, raw=raw, varlen=bool(options.get("cu_seqlens")))
    if raw and not options.get("use_beta_sigmoid_in_kernel"):
        x["beta"] = torch.sigmoid(x["beta"])
    if raw and not options.get("use_gate_in_kernel"):
        x["g"] = -torch.nn.functional.softplus(x["g"])
    if options.get("state_v_first"):
        x["initial_state"] = x["initial_state"].transpose(-1, -2).contiguous()
    gen = torch.Generator().manual_seed(7)
    if options.pop("A_log", False):
        x["A_log"] = torch.log(torch.linspace(0.1, 1.0, HV))
    if options.pop("dt_bias", False):
        x["dt_bias"] = 0.5 * torch.randn(HV * K, generator=gen)
    if options.pop("cu_seqlens", False):
        options["cu_seqlens"] = torch.tensor([0, 30, 61, 2 * T])
        x["initial_state"] = torch.cat([x["initial_state"], x["initial_state"][:1].flip(-1)])[:3]
    leaves = {n: t.requires_grad_(True) for n, t in x.items()}
    return leaves, options


def _run(fn, leaves: dict, options: dict):
    """(o, final state, gradients by leaf name) of <o, do> + <S, dS> with fixed do, dS."""
    fresh = {n: t.detach().clone().requires_grad_(True) for n, t in leaves.items()}
    o, S = fn(**fresh, output_final_state=True, **options)
    gen = torch.Generator().manual_seed(11)
    do, dS = torch.randn(o.shape, generator=gen), torch.randn(S.shape, generator=gen)
    grads = torch.autograd.grad((o * do).sum() + (S * dS).sum(), list(fresh.values()))
    return o.detach(), S.detach(), dict(zip(fresh, grads))


def _close(name, a, b):
    assert a.shape == b.shape, name
    err = float((a - b).abs().max()) / max(1e-3, float(b.abs().max()))
    assert err < TOL, f"{name}: max error {err:.2e} of the largest value"


@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_and_gradients_match_fla_core(case):
    leaves, options = _call(case)
    ours = _run(lambda **kw: kda.chunk_kda(**kw, version="fla", chunk_size=C), leaves, options)
    fla = _run(fla_oracle.fla_chunk_kda, leaves, options)
    _close("o", ours[0], fla[0])
    _close("final state", ours[1], fla[1])
    for name in leaves:
        _close(f"d{name}", ours[2][name], fla[2][name])
