"""Backward references: the gradients of the fp64 recurrence through autograd (the ground truth), and
FLA's own PyTorch chunk reference (`naive_chunk_kda`) differentiated the same way, as a second oracle for
the benchmarks when fla-core is installed (the optional extra `bench`).

    grads = recurrent_kda_grads(q, k, v, g, beta, None, h0, do, dht)
    grads["dq"], grads["dk"], grads["dv"], grads["dg"], grads["dbeta"], grads["dh0"]

Shapes follow FLA (fla/ops/kda/naive.py): dq, dk, dg like q; dv like v; dbeta like beta; dh0 like the state.
`do` is the output's gradient [B, T, H, V]; `dht` the final state's [B, H, K, V] (None: zero).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from kda.reference.recurrence import naive_recurrent_kda

GRADS = ("dq", "dk", "dv", "dg", "dbeta", "dh0")


def _grads(fn, q, k, v, g, beta, initial_state, do, dht, dtype) -> dict[str, torch.Tensor]:
    B, T, H, K = q.shape
    V = v.shape[-1]
    leaves = [x.detach().to(dtype).requires_grad_(True) for x in (q, k, v, g, beta)]
    h0 = (torch.zeros(B, H, K, V, dtype=dtype, device=q.device) if initial_state is None else initial_state.detach().to(dtype))
    h0.requires_grad_(True)
    with torch.enable_grad():
        o, S = fn(*leaves, h0)
        loss = (o * do.to(dtype)).sum()
        if dht is not None:
            loss = loss + (S * dht.to(dtype)).sum()
        grads = torch.autograd.grad(loss, [*leaves, h0])
    return dict(zip(GRADS, grads))


def recurrent_kda_grads(q, k, v, g, beta, scale=None, initial_state=None, do=None, dht=None, *,
                        dtype: torch.dtype = torch.float64) -> dict[str, torch.Tensor]:
    """dq, dk, dv, dg, dbeta, dh0 of <o, do> + <S_T, dht> through the token-by-token recurrence."""
    def fn(q, k, v, g, beta, h0):
        return naive_recurrent_kda(q, k, v, g, beta, scale, h0, True, dtype=dtype)
    return _grads(fn, q, k, v, g, beta, initial_state, do, dht, dtype)


def fla_naive():
    """FLA's fla/ops/kda/naive.py loaded by file path (fla/ops/__init__ imports triton), or None without fla-core."""
    spec = importlib.util.find_spec("fla")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "ops" / "kda" / "naive.py"
    if not path.is_file() or importlib.util.find_spec("einops") is None:
        return None
    mod_spec = importlib.util.spec_from_file_location("fla_kda_naive", path)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    return module


def fla_chunk_grads(q, k, v, g, beta, scale=None, initial_state=None, do=None, dht=None, *,
                    dtype: torch.dtype = torch.float64) -> dict[str, torch.Tensor] | None:
    """The same gradients through FLA's `naive_chunk_kda` (T % 64 == 0); None without fla-core."""
    naive = fla_naive()
    if naive is None:
        return None

    def fn(q, k, v, g, beta, h0):
        return naive.naive_chunk_kda(q, k, v, g, beta, scale=scale, initial_state=h0, output_final_state=True)
    return _grads(fn, q, k, v, g, beta, initial_state, do, dht, dtype)
