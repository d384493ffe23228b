"""fla-core's chunk_kda on its naive path, on the CPU: the oracle kda.chunk_kda's FLA parameters are held to
(tests/kda/test_fla_options.py), when fla-core is installed (the optional extras `bench`, `cuda`, `dev`).

fla-core's kernels need Triton and a GPU; what they fuse is FLA's own PyTorch code here, followed as
ChunkKDAFunction.forward does it:

    use_qk_l2norm_in_kernel     x * rsqrt(sum x^2 + 1e-6)         (l2norm_fwd's kernel, written out here)
    use_beta_sigmoid_in_kernel  scale * sigmoid(beta), fp32       (fused_beta_sigmoid's kernel, written out)
    use_gate_in_kernel          naive_kda_gate / naive_kda_lowerbound_gate (lower_bound set), FLA's own
                                functions, read out of fla/ops/kda/gate.py (which imports Triton) by their source
    the recurrence              naive_recurrent_kda of fla/ops/kda/naive.py (grouped value heads included),
                                one sequence at a time with cu_seqlens
    state_v_first               the states transposed to [.., V, K] at the boundary

    o, ht = fla_chunk_kda(q, k, v, g, beta, A_log=A_log, use_gate_in_kernel=True, output_final_state=True)
"""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import torch
import torch.nn.functional as F

from kda.reference.recurrence_bwd import fla_naive

GATE_FUNCTIONS = ("naive_kda_gate", "naive_kda_lowerbound_gate")


def fla_gate() -> dict | None:
    """FLA's naive gate functions by name, or None without fla-core (or where gate.py no longer has them)."""
    spec = importlib.util.find_spec("fla")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "ops" / "kda" / "gate.py"
    if not path.is_file():
        return None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    wanted: list[ast.stmt] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in GATE_FUNCTIONS]
    if len(wanted) != len(GATE_FUNCTIONS):
        return None
    namespace = {"torch": torch, "F": F}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), str(path), "exec"), namespace)
    return {name: namespace[name] for name in GATE_FUNCTIONS}


def available() -> bool:
    return fla_naive() is not None and fla_gate() is not None


def fla_chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False, *,
                  use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                  allow_neg_eigval=False, safe_gate=False, lower_bound=None, state_v_first=False, cu_seqlens=None,
                  A_log=None, dt_bias=None):
    """fla-core's chunk_kda(...) on FLA's naive code; (o, final state or None). Differentiable. `safe_gate`
    picks FLA's faster intra-chunk kernel for bounded gates, not the math: the naive path has no such choice."""
    naive, gate = fla_naive(), fla_gate()
    if naive is None or gate is None:
        raise RuntimeError("fla-core (and einops) are not installed")
    if use_qk_l2norm_in_kernel:
        def norm(x):
            return (x.float() * torch.rsqrt(x.float().pow(2).sum(-1, keepdim=True) + 1e-6)).to(x.dtype)
        q, k = norm(q), norm(k)
    if use_beta_sigmoid_in_kernel:
        beta = (2.0 if allow_neg_eigval else 1.0) * torch.sigmoid(beta.float())
    if use_gate_in_kernel:
        if lower_bound is None:
            g = gate["naive_kda_gate"](g, A_log, dt_bias)
        else:
            g = gate["naive_kda_lowerbound_gate"](g, A_log, dt_bias, lower_bound)
    if initial_state is not None and state_v_first:
        initial_state = initial_state.transpose(-1, -2)
    if cu_seqlens is None:
        o, S = naive.naive_recurrent_kda(q, k, v, g, beta, scale, initial_state, output_final_state)
    else:
        cu = [int(x) for x in cu_seqlens]
        outs, states = [], []
        for i, (a, b) in enumerate(zip(cu, cu[1:])):
            def part(x):
                return x[:, a:b]
            h0 = None if initial_state is None else initial_state[i:i + 1]
            o, S = naive.naive_recurrent_kda(part(q), part(k), part(v), part(g), part(beta), scale, h0, True)
            outs.append(o)
            states.append(S)
        o, S = torch.cat(outs, 1), (torch.cat(states) if output_final_state else None)
    if S is not None and state_v_first:
        S = S.transpose(-1, -2)
    return o, S
