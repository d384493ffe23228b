"""fla-core's whole `chunk_kda` signature on top of the simulated NPU: `kda.chunk_kda`, the public entry.

    o, ht = kda.chunk_kda(q, k, v, g, beta, A_log=A_log, dt_bias=dt_bias, initial_state=h0,
                          output_final_state=True, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                          cu_seqlens=cu_seqlens, version="v4")

Every parameter of fla-core's chunk_kda (0.6) is either honoured with FLA's meaning or refused by name
(KdaInputError, one line), so FLA code switches by changing an import. What fla-core fuses into its kernels
is computed here around the phase programs (autograd.py) with plain differentiable torch ops, each the
exact formula (fla_options.py), so gradients flow through them by autograd (to A_log and dt_bias too):

    grouped value heads   v [B, T, HV, V], HV a multiple of q/k's H: value head j uses q/k head j // (HV/H)
                          (q/k repeated over the group; their gradient is the sum over the group); g [B, T, HV, K],
                          beta [B, T, HV], states [N, HV, K, V], as in FLA
    use_qk_l2norm_in_kernel   q, k <- x / sqrt(sum x^2 + 1e-6) (FLA's l2norm_fwd), in fp32, back to x's type
    use_gate_in_kernel    g <- -exp(A_log) * softplus(g + dt_bias)                (lower_bound None)
                          g <- lower_bound * sigmoid(exp(A_log) * (g + dt_bias))  (lower_bound set; without
                                                                                   A_log: sigmoid(g + dt_bias))
                          A_log [HV], dt_bias [HV * K] or [HV, K] (optional), the gate in fp32
    use_beta_sigmoid_in_kernel  beta <- sigmoid(beta) in fp32 (2 sigmoid(beta) with allow_neg_eigval)
    state_v_first         initial_state, final state and intermediate states as [.., V, K]
    return_intermediate_states  (o, final_state, h): h [B, NT, HV, K, V] the state before each chunk (varlen:
                          [1, chunks of all sequences, HV, K, V]), k's dtype; no autograd (FLA: inference only)
    cu_seqlens_cpu        a host copy of cu_seqlens; must hold the same values
    safe_gate             FLA's promise of gates in [lower_bound, 0) for its faster intra-chunk kernel; with
                          use_gate_in_kernel it needs lower_bound in [-5, 0) (as in FLA). The simulated designs
                          pick their intra-chunk form by `version`, so it changes no number here
    disable_recompute     how FLA's backward trades memory for time; changes no number (the simulated
                          backward's choice is kda.driver.backward's `states`)
    chunk_size            a keyword, as in FLA's **kwargs (any positive size here; FLA takes 32 or 64)

Refused by name: cp_context (context parallelism over several devices), use_graph and max_num_seqs (FLA's
fixed-shape CUDA/NPU graph capture), and any keyword fla-core does not know (fla-core ignores those; here
they would be silently dropped, so they are refused).
"""
from __future__ import annotations

import torch

from kda.driver.autograd import differentiable_kda
from kda.driver.checks import KdaInputError, check_inputs, seqlens_of, warn_recurrence
from kda.driver.execute import Types, execute
from kda.driver.fla_options import beta_sigmoid, check_gate, check_heads, check_refused, expand_groups, kda_gate, l2norm
from kda.reference.recurrence import naive_recurrent_kda


def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
              use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
              allow_neg_eigval=False, safe_gate=False, lower_bound=None, disable_recompute=False,
              return_intermediate_states=False, state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
              cp_context=None, use_graph=False, max_num_seqs=None, *, version: str = "v3", chunk_size: int = 64,
              transfer_dtype=None, precision=None, **kwargs):
    """fla-core's chunk_kda (the module docstring lists what each parameter does here), run by a design on the
    simulated NPU (`version`, `transfer_dtype`, `precision` as in autograd.differentiable_kda), differentiable.
    Returns (o [B, T, HV, V], final state [N, HV, K, V] or None), and h with return_intermediate_states."""
    if "transpose_state_layout" in kwargs:            # FLA's deprecated name of state_v_first
        if state_v_first:
            raise KdaInputError("pass state_v_first or the deprecated transpose_state_layout, not both")
        state_v_first = bool(kwargs.pop("transpose_state_layout"))
    check_refused(cp_context=cp_context, use_graph=use_graph, max_num_seqs=max_num_seqs, cu_seqlens=cu_seqlens,
                  cu_seqlens_cpu=cu_seqlens_cpu, kwargs=kwargs)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise KdaInputError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    H, HV = check_heads(q, k, v, g, beta)
    if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
        raise KdaInputError("allow_neg_eigval=True scales the in-kernel sigmoid of beta: it needs "
                            "use_beta_sigmoid_in_kernel=True")
    A_log, dt_bias = kwargs.get("A_log"), kwargs.get("dt_bias")
    check_gate(g, A_log, dt_bias, use_gate_in_kernel=use_gate_in_kernel, safe_gate=safe_gate,
               lower_bound=lower_bound, d_k=q.shape[3])
    h0 = _state_in(initial_state, state_v_first, HV, q.shape[3], v.shape[3])
    if return_intermediate_states:
        leaves = (q, k, v, g, beta, initial_state, A_log, dt_bias)
        if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in leaves):
            raise KdaInputError("return_intermediate_states bypasses autograd (in FLA: inference only): run "
                                "under torch.inference_mode() or torch.no_grad()")
        if disable_recompute:
            raise KdaInputError("return_intermediate_states needs disable_recompute=False (as in fla-core)")

    if use_qk_l2norm_in_kernel:
        q, k = l2norm(q), l2norm(k)
    if use_gate_in_kernel:
        g = kda_gate(g, A_log, dt_bias, lower_bound)
    if use_beta_sigmoid_in_kernel:
        beta = beta_sigmoid(beta, allow_neg_eigval)
    k_dtype = k.dtype
    q, k = expand_groups(q, HV // H), expand_groups(k, HV // H)

    if return_intermediate_states:       # the states each chunk starts from, kept by the one chunk loop
        with torch.no_grad():
            ex = execute(q, k, v, g, beta, scale, h0, version=version, chunk_size=chunk_size,
                             types=Types(transfer=transfer_dtype, policy=precision, out=v.dtype),
                             cu_seqlens=cu_seqlens, intermediate_states=True)
        o, ht = ex.computed()
        h = ex.states
        if h is None:
            raise ValueError("the execution kept no intermediate states")
        if h0 is not None:               # FLA's first state of a sequence is initial_state as given
            if cu_seqlens is None:
                h[:, 0] = h0.to(h.dtype)
            else:
                t = 0
                for i, n in enumerate(seqlens_of(cu_seqlens, q.shape[1])):
                    h[0, t] = h0[i].to(h.dtype)
                    t += -(-n // chunk_size)
        ht = ht.to(torch.float64 if ht.dtype == torch.float64 else torch.float32)
        return (o, _state_out(ht, state_v_first) if output_final_state else None,
                _state_out(h.to(k_dtype), state_v_first))
    o, ht = differentiable_kda(q, k, v, g, beta, scale, h0, output_final_state, version=version,
                               chunk_size=chunk_size, transfer_dtype=transfer_dtype, precision=precision,
                               cu_seqlens=cu_seqlens)
    return o, _state_out(ht, state_v_first)


def _state_in(initial_state, state_v_first: bool, HV: int, K: int, V: int):
    """initial_state in the core's [N, HV, K, V] layout."""
    if initial_state is None or not isinstance(initial_state, torch.Tensor):
        return initial_state
    want = ["N", HV, V, K] if state_v_first else ["N", HV, K, V]
    if initial_state.dim() != 4 or list(initial_state.shape[1:]) != want[1:]:
        layout = "state_v_first=True: [N, HV, V, K]" if state_v_first else "[N, HV, K, V]"
        raise KdaInputError(f"initial_state must be {want} ({layout}), got {list(initial_state.shape)}")
    return initial_state.transpose(-1, -2) if state_v_first else initial_state


def _state_out(S, state_v_first: bool):
    return S.transpose(-1, -2) if (S is not None and state_v_first) else S


# -- the per-chunk states (return_intermediate_states) ------------------------------------------------------

def _segment_runner(scale, version, chunk_size, transfer_dtype, precision):
    """The core as `_intermediate_states` calls it: one segment of chunks from a given state."""
    def segment(q, k, v, g, beta, h0, cu):      # the state as kept between chunks (the state type)
        ex = execute(q, k, v, g, beta, scale, h0, version=version, chunk_size=chunk_size,
                         types=Types(transfer=transfer_dtype, policy=precision, out=v.dtype), cu_seqlens=cu)
        return ex.o, ex.final_state
    return segment


def _intermediate_states(core, q, k, v, g, beta, h0, cu_seqlens, C: int):
    """The reference path of return_intermediate_states (chunk_kda takes the states from its one chunk loop
    instead, the same numbers): (o, final state, h): the core run a chunk at a time, each chunk starting
    from the state the one before left; h [B, NT, HV, K, V] holds the state before each chunk (varlen: [1, chunks of every sequence, ...],
    sequence by sequence, as FLA orders them). A chunk computes the same from a given state whether it runs
    alone or in a sequence, so o and the final state are those of one whole run."""
    HV, K, V = v.shape[2], q.shape[3], v.shape[3]
    if h0 is None:
        N = len(seqlens_of(cu_seqlens, q.shape[1])) if cu_seqlens is not None else q.shape[0]
        h0 = torch.zeros(N, HV, K, V, dtype=torch.float32, device=q.device)
    if cu_seqlens is None:
        B, T = q.shape[:2]
        S = h0
        outs, hs = [], []
        for lo in range(0, T, C):
            def cut(x):
                return x[:, lo:lo + C]
            hs.append(S)
            o, S = core(cut(q), cut(k), cut(v), cut(g), cut(beta), S, None)
            outs.append(o)
        return torch.cat(outs, 1), S, torch.stack([x.to(S.dtype) for x in hs], 1)
    lengths = seqlens_of(cu_seqlens, q.shape[1])
    starts = [sum(lengths[:i]) for i in range(len(lengths))]
    S = list(h0)
    h: list[list[torch.Tensor]] = [[] for _ in lengths]
    o = None
    for lo in range(0, max(lengths), C):
        active = [i for i, n in enumerate(lengths) if n > lo]
        spans = [(starts[i] + lo, starts[i] + min(lengths[i], lo + C)) for i in active]
        def cut(x):
            return torch.cat([x[:, a:b] for a, b in spans], 1)
        cu = [0]
        for a, b in spans:
            cu.append(cu[-1] + b - a)
        for i in active:
            h[i].append(S[i])
        part, states = core(cut(q), cut(k), cut(v), cut(g), cut(beta), torch.stack([S[i] for i in active]), cu)
        o = part.new_empty(1, q.shape[1], HV, V) if o is None else o
        for j, (i, (a, b)) in enumerate(zip(active, spans)):
            o[:, a:b] = part[:, cu[j]:cu[j + 1]]
            S[i] = states[j]
    dtype = S[0].dtype if all(s.dtype == S[0].dtype for s in S) else torch.float32
    return o, torch.stack([s.to(dtype) for s in S]), torch.stack([s.to(dtype) for per_seq in h for s in per_seq])[None]


def recurrent_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False):
    """The token-by-token recurrence (FLA's naive_recurrent_kda), in fp32. Returns (o, final_state or None)."""
    check_inputs(q, k, v, g, beta, initial_state, 1, scale)
    o, S = naive_recurrent_kda(q, k, v, g, beta, scale, initial_state, output_final_state, dtype=torch.float32)
    warn_recurrence(o, S)
    return o.to(v.dtype), S
