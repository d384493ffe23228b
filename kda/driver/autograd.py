"""`kda.chunk_kda` under autograd: the forward runs a design on the simulated NPU (execute.py), the backward
runs that design's backward phase program (kda/driver/backward.py), the reverse walk over the chunks.

    o, ht = kda.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True, version="v4")
    ((o * do).sum() + (ht * dht).sum()).backward()     # q.grad, ..., h0.grad from the simulated NPU

Without gradients (no input requires one, or torch.no_grad) it is forward_kda. With fp64 inputs both
directions compute and hand over in fp64 (the exactness check `torch.autograd.gradcheck` uses).
"""
from __future__ import annotations

import torch

from npusim import Precision

from kda.driver import backward as kda_backward
from kda.driver.backward import backward_design, check_backward_chunk_size, execute_backward
from kda.driver.checks import KdaInputError, check_options, warn_nonfinite
from kda.driver.execute import ChunkLoop, Types, execute
from kda.driver.multipass import stored_types
from kda.programs import DEFAULT_DESIGN, get_design


def _precision(q, transfer_dtype, precision, version: str) -> Precision | None:
    """fp64 inputs: every hand-off and every stored intermediate in fp64 (a design's fp32 GM types too)."""
    if precision is None and transfer_dtype is None and q.dtype == torch.float64:
        names = {**stored_types(get_design(version)), **stored_types(backward_design(version))}
        return Precision(transfer="fp64", overrides={n: "fp64" for n in names}, compute=torch.float64)
    return precision


class ChunkKdaFunction(torch.autograd.Function):
    """(q, k, v, g, beta, h0) -> (o, ht); gradients of all six from the backward phase program."""

    @staticmethod
    def forward(ctx, q, k, v, g, beta, h0, scale, version, chunk_size, transfer_dtype, precision, cu_seqlens):
        compute = precision.compute if precision is not None else torch.float32
        batched = kda_backward.BATCHED if kda_backward.BATCHED is not None else q.device.type != "cpu"
        ex = execute(q, k, v, g, beta, scale, h0, version=version, chunk_size=chunk_size, cu_seqlens=cu_seqlens,
                     types=Types(transfer=transfer_dtype, policy=precision, out=v.dtype, compute=compute),
                     loop=ChunkLoop(batched=batched))        # as the backward's passes (backward.py)
        warn_nonfinite(ex, version)
        ctx.save_for_backward(q, k, v, g, beta, h0)
        ctx.settings = (scale, version, chunk_size, transfer_dtype, precision, h0 is None, cu_seqlens)
        return ex.o, ex.final_state.to(torch.float64 if q.dtype == torch.float64 else torch.float32)

    @staticmethod
    def backward(ctx, do, dht):
        q, k, v, g, beta, h0 = ctx.saved_tensors
        scale, version, chunk_size, transfer_dtype, precision, no_h0, cu_seqlens = ctx.settings
        if do is None:
            do = torch.zeros_like(v)
        bx = execute_backward(q, k, v, g, beta, scale, None if no_h0 else h0, do, dht, version=version,
                              chunk_size=chunk_size, transfer_dtype=transfer_dtype, precision=precision,
                              compute_dtype=precision.compute if precision is not None else torch.float32,
                              cu_seqlens=cu_seqlens)
        if bx.nonfinite is not None:
            raise KdaInputError(f"backward: inf/NaN first in {bx.nonfinite}")
        gr = bx.grads
        def cast(x, like):
            return x.to(like.dtype)
        return (cast(gr["dq"], q), cast(gr["dk"], k), cast(gr["dv"], v), cast(gr["dg"], g),
                cast(gr["dbeta"], beta), None if no_h0 else cast(gr["dh0"], h0),
                None, None, None, None, None, None)


def forward_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False, *,
                version: str = DEFAULT_DESIGN, chunk_size: int = 64, transfer_dtype=None, precision: Precision | None = None,
                cu_seqlens=None):
    """KDA's forward computed by running a design on the simulated NPU, without gradients. Returns (o,
    final_state or None); o has v's dtype, the final state is fp32 (FLA's conventions). With `cu_seqlens` (FLA's varlen), q is
    [1, total tokens, H, K] and the final state [number of sequences, H, K, V]."""
    ex = execute(q, k, v, g, beta, scale, initial_state, version=version, chunk_size=chunk_size,
                 types=Types(transfer=transfer_dtype, policy=precision, out=v.dtype), cu_seqlens=cu_seqlens)
    warn_nonfinite(ex, version)
    o, final_state = ex.computed()
    return o, (final_state.to(torch.float32) if output_final_state else None)


def differentiable_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False, *,
              version: str = DEFAULT_DESIGN, chunk_size: int = 64, transfer_dtype=None, precision: Precision | None = None,
              cu_seqlens=None):
    """KDA on the simulated NPU, differentiable (the core of kda.chunk_kda, without FLA's options). Returns
    (o, final_state or None)."""
    tensors = [x for x in (q, k, v, g, beta, initial_state) if isinstance(x, torch.Tensor)]
    if not (torch.is_grad_enabled() and any(x.requires_grad for x in tensors)):
        return forward_kda(q, k, v, g, beta, scale, initial_state, output_final_state, version=version,
                             chunk_size=chunk_size, transfer_dtype=transfer_dtype, precision=precision,
                             cu_seqlens=cu_seqlens)
    check_options(version=version, transfer_dtype=transfer_dtype, precision=precision, chunk_size=chunk_size)
    try:                                      # one line if the design has no backward program, before any work
        backward_design(version)
    except KdaInputError as err:
        raise KdaInputError(f"version={version!r} under autograd: {err} (gradients need one of them)") from None
    check_backward_chunk_size(chunk_size)     # and one if the backward cannot take this chunk size
    precision = _precision(q, transfer_dtype, precision, version)
    o, ht = ChunkKdaFunction.apply(q, k, v, g, beta, initial_state, scale, version, chunk_size, transfer_dtype,
                                   precision, cu_seqlens)
    return o, (ht if output_final_state else None)
