"""mform: the state kept on the Cube (tilelang-ascend PR 1799's "M-form", h_new = M h + C) in a fused
three-stage kernel (vllm-ascend PR 11687: intra-chunk preprocessing, inter-chunk state propagation and
output assembly in one launch, an all-core barrier between the stages).

The chunk's update S_new = Diag(gamma_C) S + K_decay^T (U - W S) is affine in S, and so is its output
O = Q_scaled S + A_qk (U - W S):

    S_new = T S + C_state        T = Diag(gamma_C) - K_decay^T W   [d_k, d_k],  C_state = K_decay^T U
    O     = Q_h S + O_intra      Q_h = Q_scaled - A_qk W            [C, d_k],   O_intra = A_qk U

Everything but the product with S is computed over all (sequence, chunk) items:
  - intra (CHUNKS): v5's safe intra-chunk pass (every exp <= 1; the same helpers), then W, U and the four
    matrices above: six more Cube matmuls and one more hand-off, for T and Q_h's subtractions.
  - state (SEQUENTIAL): one Cube phase per chunk, [T | I] [S ; C_state]: no cross-core hand-off at all.
    The state goes L0C -> FixPipe -> GM -> L1 between chunks (A2 has no L0C -> L1 path), so it is kept
    in its stored type, the transfer type (bf16 for bf16: as tilelang's M-form, L0C fp32 -> fixpipe bf16).
    Each chunk's starting state H is stored for the output stage (FLA's h); its FixPipe write is the
    round trip's write, counted once per chunk.
  - out (CHUNKS): O = [Q_h | I] [H ; O_intra], one Cube matmul per item.
The identity blocks stand for an L0C accumulation started from C_state (O_intra): the same MACs.

What it costs (the figures: `python -m kda.run --version mform --no-numerics --heads 32 --tokens 131072`,
and README "Which design wins"): mform gains nothing from interleaving, since its walk has no gaps to fill.
The walk is one Cube phase a chunk: 96 KiB of loads (T, C_state, S) at the per-core GM rate, the matmul
and the H store, one after another. The intra pass builds the d_k x d_k matrices too, so it is longer than
v5's, and HBM carries more. What it buys: no hand-off in the walk, so it overtakes v3 once a hand-off costs
enough (`--set sync.latency_us=...`), though not v6. Numerics: T, C_state and the state are
rounded to the transfer type every chunk; unlike v5 it passes bf16 on the slow gates with its defaults.
Shapes per chunk: Q, K, g [.., C, d_k]; V [.., C, d_v]; beta [.., C]; S [.., d_k, d_v].
"""
from __future__ import annotations

import torch

from npusim import phase_program
from npusim.model.schedule import BARRIER, CHUNKS, SEQUENTIAL, Design, Pass

from kda.programs.v5 import assemble_and_invert_diagonal, intra_factors, inverse_times_beta, off_diagonal_phase


@phase_program("mform.intra", returns=("T", "C_state", "Q_h", "O_intra"))
def mform_intra(npu, Q, K, V, g, beta, scale):
    """Per (sequence, chunk): v5's M and A_qk, then T, C_state, Q_h and O_intra (module docstring)."""
    with npu.vec("A"):
        gc = g.cumsum(-2)
        Qs, factors, kk_blocks, qk_blocks = intra_factors(Q, K, gc, scale)
        K_left, Q_left, K_right, K_left4, Q_left4, K_right4 = factors      # named: the payloads of ①
        Gamma = gc.exp()
        K_scaled = K * Gamma
        Q_scaled = Qs * Gamma
        gc_C = gc[..., -1:, :]
        K_decay = K * (gc_C - gc).exp()
        D_gamma = gc_C.exp() * torch.eye(K.shape[-1], dtype=gc.dtype, device=gc.device)
    npu.keep(kk_blocks, qk_blocks, Q_scaled, D_gamma)
    off = off_diagonal_phase(npu, K.shape[-2], factors, K_scaled, K_decay)      # ① (+ K_scaled, K_decay) B ②
    with npu.vec("C"):
        Ai_diag, A_neg, D_beta, A_qk = assemble_and_invert_diagonal(npu, kk_blocks, qk_blocks, off, beta)
    npu.sync(Ai_diag, A_neg, D_beta, A_qk)                                              # ③
    with npu.cube("D"):
        M = inverse_times_beta(Ai_diag, A_neg, D_beta)
        W = M @ K_scaled
        U = M @ V
        KW = K_decay.mT @ W
        C_state = K_decay.mT @ U
        AW = A_qk @ W
        O_intra = A_qk @ U
    npu.sync(KW, AW)                                                                    # ④
    with npu.vec("E"):
        T = D_gamma - KW
        Q_h = Q_scaled - AW
    return T, C_state, Q_h, O_intra


@phase_program("mform.state", returns=("H", "S_new"), state=("S_prev", "S_new"))
def mform_state(npu, T, C_state, S_prev):
    """Per chunk, in order: S_new = T S + C_state on the Cube; H = S (the chunk's starting state) to GM."""
    with npu.cube("M"):
        H = S_prev.clone()
        eye = torch.eye(T.shape[-1], dtype=T.dtype, device=T.device).expand(T.shape)
        S_new = torch.cat([T, eye], -1) @ torch.cat([S_prev, C_state], -2)
    return H, S_new


@phase_program("mform.out", returns=("O",))
def mform_out(npu, Q_h, H, O_intra):
    """Per (sequence, chunk): O = Q_h H + O_intra, one Cube accumulation."""
    with npu.cube("O"):
        eye = torch.eye(Q_h.shape[-2], dtype=Q_h.dtype, device=Q_h.device).expand(Q_h.shape[:-1] + Q_h.shape[-2:-1])
        O = torch.cat([Q_h, eye], -1) @ torch.cat([H, O_intra], -2)
    return O


MFORM = Design("mform", (
    Pass("intra", mform_intra, CHUNKS),
    Pass("state", mform_state, SEQUENTIAL, boundary=BARRIER),
    Pass("out", mform_out, CHUNKS, boundary=BARRIER),
), description="mform: the state on the Cube (h_new = T h + C), three stages of one kernel (every exp <= 1)")
