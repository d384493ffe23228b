"""vllm-ascend's fused GDN decode operator (vllm-project/vllm-ascend pull request 12869, csrc/attention/
fused_gdn_decode/ at commit 69b24d91d8), a Gated DeltaNet step (one decay per head), read from the source:

    launch     KERNEL_TYPE_AIV_ONLY: a block is one AIV; tiling: totalTasks = B x HV, blockDim =
               ceil(tasks / ceil(tasks / GetCoreNumAiv())), each block a contiguous range of tasks
    items      one (sequence, value head): bv = 128 fits UB for an fp32 state (SelectBv), so vTiles = 1
               and the state [V, K] is one tile; q/k heads H <= HV (grouped value heads)
    inputs     mixed_qkv, a, b in bf16 (tiling key 1: bf16 with an fp32 state); A_log, dt_bias fp32
    in kernel  g = -exp(A_log) softplus(a + dt_bias) (a threshold of 20), beta = sigmoid(b), l2norm of q
               and k (x * rsqrt(sum x^2 + 1e-6)), q * scale
    loop       TQue stateQueue and stateOutQueue, one buffer each (stateBufferNum = 1 when bv >= V): the next
               task's state loads once this task's compute has read its input buffer, and its compute
               starts once this task's store has left the output buffer

Per task (ComputeTile and Store, each Vector instruction followed by PipeBarrier<PIPE_V>):
    the gating chain on the segment's heads (Add, Mins, Exp, Adds, Ln, Max, Exp, Muls, Mul, Exp, Sigmoid,
    Brcb); LoadQK (q, k) and Cast; Normalize q and k (Mul, Add, WholeReduceSum, Adds, Rsqrt, Brcb, Mul
    each); Muls q; the state and v (DataCopyPad), Cast v
    MulBlockScalar S *= e^g; MatVecMul S * k; ReduceRows kS; Sub; MulBlockScalar d *= beta; Brcb d;
    MulAddDst S += k d (RankOneUpdate); MatVecMul S * q; ReduceRows o; Cast o to bf16; DataCopyPad o, S
Modelled per task: the gating chain (once per segment of up to 8 tasks in the kernel) and LoadQK/Normalize
(once per q/k head, HV / H tasks) are charged to every task, a few hundred cycles more than the kernel pays.
"""
from npusim import phase_program

from kda.decode.design import AIVS, RANGES, STORE_BEHIND, DecodeDesign
from kda.decode.programs.steps import BETA_SIGMOID, GATE, QK_L2NORM, cols, row_sum, rows

SOURCE = "vllm-project/vllm-ascend pull request 12869 @ 69b24d91d8, csrc/attention/fused_gdn_decode"
EPS = 1e-6
THRESHOLD = 20.0


@phase_program("gdn_decode_ascendc", returns=("o", "S_out"))
def gdn_decode_ascendc(npu, q, k, v, g, beta, S_in, scale, A_log=None, dt_bias=None, options=(), lower_bound=None):
    """One token of one value head: q, k [1, K]; v [1, V]; g (the raw gate a) [1, 1]; beta (the logit b) [1];
    A_log, dt_bias [1]; S_in [V, K] -> o [1, V], S_out [V, K]."""
    with npu.vec("task"):
        x = g[..., 0, :] + dt_bias                                  # Add
        softplus = x.maximum(((x.clamp_max(THRESHOLD)).exp() + 1.0).log())   # Mins, Exp, Adds, Ln, Max
        e_g = (A_log.exp() * -1.0 * softplus).exp()                 # Exp, Muls, Mul, Exp
        b_t = beta[..., 0, None].sigmoid()                          # Sigmoid
        qk = []
        for x_t in (q[..., 0, :], k[..., 0, :]):                    # Normalize(q), Normalize(k)
            sq = x_t * x_t
            qk.append(x_t * (row_sum(sq[..., None, :]) + EPS).rsqrt())
        q_t, k_t = qk[0] * scale, qk[1]                             # Muls
        S = S_in * rows(e_g.expand(S_in.shape[:-1]), S_in)          # MulBlockScalar
        kS = row_sum(S * cols(k_t, S))                              # MatVecMul; ReduceRows
        d = (v[..., 0, :] - kS) * b_t                               # Sub, MulBlockScalar
        S_out = S.addcmul(cols(k_t, S), rows(d, S))                 # Brcb; MulAddDst (RankOneUpdate)
        o_t = row_sum(S_out * cols(q_t, S_out))                     # MatVecMul; ReduceRows
        o = o_t[..., None, :]
    return o, S_out


def blocks(items: int, cores: int, aivs: int) -> int:
    """FusedGdnDecodeTilingFunc: blockDim = ceil(tasks / ceil(tasks / aivNum))."""
    per = -(-items // aivs)
    return max(1, -(-items // per))


GDN_DECODE_ASCENDC = DecodeDesign(
    "gdn_decode_ascendc", gdn_decode_ascendc, "vllm-ascend PR 12869 (AscendC, GDN): Vector-only, an AIV per "
    "range of (sequence, value head) tasks, gating and l2norm in the kernel, the store behind the next load",
    workers=AIVS, loop=STORE_BEHIND, assign=RANGES, blocks=blocks, state_layout="vk", io_dtype="bf16",
    gate_dtype="bf16", state_dtypes=("fp32", "bf16"), options=(QK_L2NORM, GATE, BETA_SIGMOID), gate="gdn",
    tokens=(1, 1), source=SOURCE)
