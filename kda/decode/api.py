"""FLA's `fused_recurrent_kda` on the simulated NPU: a decode step (or MTP's few tokens) computed by a decode
design's phase program, in FLA's layout and with FLA's options.

    o, ht = kda.fused_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                    use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, A_log=A_log,
                                    dt_bias=dt_bias, cu_seqlens=cu, design="step")

q, k [B, T, H, K]; v [B, T, HV, V] (HV a multiple of H: value head j reads q/k head j // (HV / H)); g [B, T, HV, K]
(the log decay, or the raw gate with use_gate_in_kernel); beta [B, T, HV] (None: ones); initial_state
[N, HV, K, V] ([N, HV, V, K] with state_v_first), N = B or the sequences of cu_seqlens (then B = 1), fp32 or
bf16: the state's type in GM. ssm_state_indices [N] picks each sequence's state from a pool (initial_state's
first axis); inplace_final_state writes the final states back into it. Options only the prefill has
(chunk_size, safe_gate, return_intermediate_states, disable_recompute, cp_context, use_graph, max_num_seqs,
version) and keywords FLA does not know are refused by name (KdaInputError), as are num_accepted_tokens and
a state of another type.
"""
from __future__ import annotations

import torch

from kda.decode.numerics import DecodeInputs, run_step
from kda.decode.programs import DESIGNS
from kda.decode.programs.steps import BETA_SIGMOID, GATE, QK_L2NORM
from kda.decode.timing import Types
from kda.driver.checks import KdaInputError, seqlens_of
from kda.driver.fla_options import check_heads

PREFILL_ONLY = ("chunk_size", "safe_gate", "return_intermediate_states", "disable_recompute", "cp_context",
                "use_graph", "max_num_seqs", "version", "cu_seqlens_cpu", "transfer_dtype", "precision")
NOT_MODELLED = ("num_accepted_tokens",)
STATE_TYPES = {torch.float32: "fp32", torch.bfloat16: "bf16"}
IO_TYPES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def fused_recurrent_kda(q, k, v, g, beta=None, scale=None, initial_state=None, output_final_state=False,
                        use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                        allow_neg_eigval=False, lower_bound=None, A_log=None, dt_bias=None, cu_seqlens=None,
                        ssm_state_indices=None, state_v_first=False, inplace_final_state=False, *,
                        design: str = "step", **kwargs):
    """(o [B, T, HV, V] in v's type, final state [N, HV, K, V] fp32 holding the state type's values, or None)."""
    _refuse(kwargs)
    if design not in DESIGNS:
        raise KdaInputError(f"unknown decode design {design!r}: choose from {', '.join(DESIGNS)}")
    if beta is None and isinstance(q, torch.Tensor):
        beta = torch.ones(q.shape[0], q.shape[1], v.shape[2] if isinstance(v, torch.Tensor) else 1)
    H, HV = check_heads(q, k, v, g, beta)
    B, T, _, K = q.shape
    V = v.shape[-1]
    if q.dtype not in IO_TYPES:
        raise KdaInputError(f"q must be fp32, bf16 or fp16, got {q.dtype}")
    lengths = seqlens_of(cu_seqlens, T) if cu_seqlens is not None else [T] * B
    if cu_seqlens is not None and B != 1:
        raise KdaInputError(f"cu_seqlens packs the sequences into one row: q must have B = 1, got B = {B}")
    lo, hi = DESIGNS[design].tokens
    if max(lengths) > hi:
        raise KdaInputError(f"design {design} takes {lo}-{hi} tokens a step, a sequence has {max(lengths)} "
                            f"(the prefill is kda.chunk_kda)")
    N = len(lengths)
    pool = _state(initial_state, N, HV, K, V, state_v_first, ssm_state_indices)
    state_type = STATE_TYPES[initial_state.dtype] if initial_state is not None else "fp32"
    if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
        raise KdaInputError("allow_neg_eigval=True needs use_beta_sigmoid_in_kernel=True (beta = 2 sigmoid(beta))")
    if lower_bound is not None and not use_gate_in_kernel:
        raise KdaInputError("lower_bound bounds the gate computed in the kernel: it needs use_gate_in_kernel=True")
    if use_gate_in_kernel and A_log is None:
        raise KdaInputError("use_gate_in_kernel needs A_log [HV] (and optionally dt_bias [HV * K])")
    options = tuple(o for o, on in ((QK_L2NORM, use_qk_l2norm_in_kernel), (GATE, use_gate_in_kernel),
                                    (BETA_SIGMOID, use_beta_sigmoid_in_kernel and not allow_neg_eigval)) if on)
    if allow_neg_eigval:                       # 2 sigmoid(beta): FLA's formula, before the kernel's other work
        beta = 2.0 * torch.sigmoid(beta.float())
    dt = None if dt_bias is None else dt_bias.float().reshape(HV, K)
    x = DecodeInputs(q.float(), k.float(), v.float(), g.float(), beta.float(), pool,
                     None if A_log is None else A_log.float().reshape(HV), dt,
                     None if cu_seqlens is None else tuple(int(c) for c in torch.as_tensor(cu_seqlens).tolist()),
                     scale)
    o, final = run_step(DESIGNS[design], x, Types(IO_TYPES[q.dtype], "fp32", state_type), options, lower_bound)
    final = final.mT.contiguous() if state_v_first else final
    if inplace_final_state and initial_state is not None:
        idx = ssm_state_indices if ssm_state_indices is not None else torch.arange(N)
        initial_state[idx.long()] = final.to(initial_state.dtype)
    return o.to(v.dtype), (final if output_final_state else None)


def _refuse(kwargs: dict) -> None:
    for name in kwargs:
        if name in PREFILL_ONLY:
            raise KdaInputError(f"{name} is an option of chunk_kda (the prefill), not of the decode step")
        if name in NOT_MODELLED:
            raise KdaInputError(f"{name} (speculative decoding's accepted tokens) is not modelled: give each "
                                f"sequence's accepted tokens through cu_seqlens")
        raise KdaInputError(f"fused_recurrent_kda got an unexpected keyword {name!r}")


def _state(initial_state, N: int, HV: int, K: int, V: int, v_first: bool, indices) -> torch.Tensor:
    """Each sequence's state [N, HV, K, V] in fp32 (zeros without one)."""
    if initial_state is None:
        if indices is not None:
            raise KdaInputError("ssm_state_indices picks states from initial_state: give the pool")
        return torch.zeros(N, HV, K, V)
    if not isinstance(initial_state, torch.Tensor) or initial_state.dtype not in STATE_TYPES:
        what = initial_state.dtype if isinstance(initial_state, torch.Tensor) else type(initial_state).__name__
        raise KdaInputError(f"initial_state must be an fp32 or bf16 tensor (the state's type in GM), got {what}")
    want = [HV, V, K] if v_first else [HV, K, V]
    if initial_state.dim() != 4 or list(initial_state.shape[1:]) != want:
        raise KdaInputError(f"initial_state must be [N, {', '.join(map(str, want))}]"
                            f"{' (state_v_first)' if v_first else ''}, got {list(initial_state.shape)}")
    pool = initial_state.float()
    if v_first:
        pool = pool.mT
    if indices is not None:
        idx = torch.as_tensor(indices)
        if idx.dim() != 1 or idx.numel() != N or bool((idx < 0).any()) or bool((idx >= pool.shape[0]).any()):
            raise KdaInputError(f"ssm_state_indices must hold {N} indices into the {pool.shape[0]} states of "
                                f"initial_state, got {idx.tolist()[:8]}")
        pool = pool[idx.long()]
    elif pool.shape[0] != N:
        raise KdaInputError(f"initial_state holds {pool.shape[0]} states for {N} sequences")
    return pool.contiguous()
