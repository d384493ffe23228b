"""flash-linear-attention-npu's AscendC KDA forward (github flashserve/flash-linear-attention-npu,
`fla/ops/ascendc/kda/`, commit 3f80e2e6, the kernel timed in KDA_FORWARD_VALIDATION_REPORT.md section 6),
stage by stage as its four kernels run on an A2: chunk C = 64, K = V = 128, q/k/v fp16, gk and beta fp32
(gk already summed within the chunk, in log2 space: every exp is exp(x ln 2)), inputs head-major (NTD /
BNSD: a [C, D] tile of one head is one run of rows). Each stage is one launch over (chunk, value head)
items on every AI core (GetCoreNumAic), the AIC and its two AIVs working one item at a time; the AIVs split every tile by rows.
Read from the kernels' source (common/kda/chunk_kda_fwd_kernel.hpp, the GDN fwd_h of gdn/chunk_gdn_fwd):

    prepare   per block of BC = 16 rows (ScoreRefBlockSize), on the AIVs: the block's middle row of gk is
              the reference; q e^(g - g_ref) and k e^(g - g_ref) for the block's rows, k e^(g_ref - g) for
              every row up to the block's end (the columns it scores), all through the score scratch in GM
              (fp16); on the AIC the block's Aqk and Akk rows, two MMADs sharing k's L1 tile, out to an fp32
              workspace. A two-slot ready/free queue lets the AIVs make block b + 1 while the AIC scores b.
              Then q e^g, k e^g and k e^-g for the chunk (PrepareGateProductsBulk); the solve's inputs
              (beta by Brcb and 8-lane Muls, the causal Selects after a scalar loop that writes the masks,
              I - L row by row); (I + L)^-1 on the AIC by 16 x 16 diagonal blocks: L_ii^2, then three
              rounds of X_ii Y_ii (the AIVs add each round's result into X's diagonal, a flag each way) while
              Y squares, then the 32 and 64 merges; every one of these 30 fp32 matmuls a Catlass call of its
              own, its operands loaded from GM (strided 16- or 32-row blocks), its result written back
              (FixPipe) and PIPE_ALL after it. Last, w and v scaled by beta, and Aqk, Akk, q e^g scale
              cast to fp16.
    post_wu   on the AIC W = Akk (k e^g beta) into an fp32 scratch and U = Akk (v beta) (PIPE_ALL after
              each); on the AIVs w cast to fp16 and kg = k e^(g_last - g) (row by row Subs).
    fwd_h     FLA-NPU's GDN ChunkGatedDeltaRuleFwdH with the key gate (use_exp2, no scalar gate): one
              (sequence, head) stream per lane, two streams interleaved on each core (PING_PONG_STAGES),
              per chunk C1 WS = W h; V1 v_new = u - WS (a copy into the update buffer, kg copied GM -> UB ->
              GM into the k-decay workspace); C2 K^T v_new; V2 h loaded again from GM, x 1.0, the row decay
              exp2(g_last) broadcast, + K^T v_new, stored fp16 (the state and the output h). Four flags a chunk.
    finalize  on the AIC q g scale h and Aqk v_new (PIPE_ALL after each) into two fp32 scratches; on the
              AIVs their sum clamped, cast and stored.

Every AscendC Vector instruction is one recorded op (a loop over rows one op per row pair: row i of AIV0 and
row i of AIV1 are one instruction on each), casts of 16-bit tiles on their loads and stores. Every stage
declares its barriers (npusim/chip/issue.py): each pipe_barrier(PIPE_V) and WaitFlag<V_S> of the source is a
wall after the instruction before it, an instruction with none after it (the row Subs of a loop, the Casts
issued back to back) costs its issue alone; Duplicate and Brcb are the chip's Dup and Brcb; the scalar loop
that writes the causal Select masks (BuildCausalSelectMasks: two 64-bit stores a row, each AIV its own rows)
is a scalar loop on the AIV's time. fwd_h's epilogues: the walls of the path taken (kGated, no scalar gate,
fp16 h).
Cross-core flags are Catlass's WithReverse flags: with depth 1 the setter waits for the waiter's reverse flag,
which the waiter sets as it passes its wait; in the solve's first two rounds the AIC waits for it before it
squares Y (an empty Vector phase marks the AIV passing its wait); PostWu's and Finalize's done flag ends the
item, so the AIC waits for its reverse flag before its next item (a flag into the next item: the AIC at most
one item ahead of the AIVs). Departures from the source, all small: ScaleRowsByBeta's two 64-lane Muls per
matrix are one op (its walls counted); the score blocks' three earlier free flags and their reverse flags are
left out (the AIVs are behind the AIC, so they gate nothing), and so is the reverse flag of Prepare's last
done flag (the AIC's next item waits for the AIVs' first ready flag, which comes later); V1's load of u,
issued before it waits for C1, waits with it. Not modelled: the flags inside a unit (SetFlag / WaitFlag
between MTE2, V, MTE3: a phase's load, compute and store run in series already; msKPP's simulator charges
a set_flag one cycle beyond the blocking); Catlass's per-call set-up (each BlockMmad's constructor and destructor set and wait its event
flags: no public figure prices them) and its unit flag letting the FixPipe drain L0C while the MMAD runs;
fwd_h's prologue (each AIV copies its streams' initial states into h, then a SyncAll) and the last chunk's
fp32 final state. The fp16 build (the measured one): its ClampFp32ToOutputType Mins/Maxs run before every fp16
store. Timing model: the programs compute on the recording's random inputs, not the kernel's exact arithmetic.
The stages are below in the kernel's order; Prepare's solve is in fla_npu_solve.py, and the helper functions
the stages share (the source's ClampExpInput, LoadAsFloatRow, ...) in fla_npu_ops.py.
"""
from __future__ import annotations

import torch

from npusim import phase_program
from npusim.model.schedule import CHUNKS, SEQUENTIAL, Design, Pass

from kda.kernels.fla_npu_ops import LN2, clamp_out, exp2_of, load_row, minus, pair, reverse_flag, rows_back
from kda.kernels.fla_npu_solve import solve, solve_input

BC = 16                         # KDA_SCORE_REF_BC: rows scored against one reference row
SHAPES = {"C": 64, "K": 128, "V": 128}      # the path read (the kernel tiles other shapes differently)


@phase_program("fla_npu.prepare", returns=("Aqk", "Akk", "QG", "QGs", "Wseed", "Useed"), gm_layout="head-major",
               barriers="explicit")
def prepare(npu, Q, K, V, g, beta, scale):
    """ChunkKdaFwdPrepare on one (chunk, value head) item (ProcessChunkPreAivFp32 / ProcessChunkPreAicFp32)."""
    C = Q.shape[-2]
    def rows(t, a, b):
        return npu.load(t, (..., slice(a, b), slice(None)))
    refs, qg, kw, kg, aqk, akk = [], [], [], [], [], []
    for b in range(C // BC):                             # the score loop, one BC-row block a round
        r0, ref, cols = b * BC, b * BC + BC // 2, (b + 1) * BC
        with npu.vec(f"ref{b}"):                         # LoadAsFloatRow(gk, refToken)
            refs.append(load_row(npu, g, (..., slice(ref, ref + 1), slice(None))))
        npu.keep(refs[b])
        with npu.vec(f"qw{b}"):                          # the block's rows, BC / 2 on each AIV: one tile
            qb, kb, gb = rows(Q, r0, cols), rows(K, r0, cols), rows(g, r0, cols)
            d = rows_back([minus(pair(gb, i, BC // 2), refs[b]) for i in range(BC // 2)], BC // 2)
            npu.pipe_barrier(2)                          # after the two Casts in, after the row Subs
            e = exp2_of(npu, d)
            qm = qb * e                                  # Mul, clamp, Cast (on the store)
            npu.pipe_barrier()
            qg.append(clamp_out(npu, qm))
            km = kb * e
            npu.pipe_barrier()
            kw.append(clamp_out(npu, km))
        with npu.vec(f"kg{b}"):                          # k e^(g_ref - g) of rows 0 .. cols, split in halves
            kc, gc = rows(K, 0, cols), rows(g, 0, cols)
            d = rows_back([minus(refs[b], pair(gc, i, cols // 2)) for i in range(cols // 2)], cols // 2)
            npu.pipe_barrier(2)                          # after the Cast in, after the row Subs
            km = kc * exp2_of(npu, d)
            npu.pipe_barrier()
            kg.append(clamp_out(npu, km))
        npu.sync(qg[b], kw[b], kg[b])                    # ready: the factors through the score scratch (fp16)
        with npu.cube(f"mma{b}"):                        # ComputeRawAqkAkkCubeBlock: B (kg) resident in L1
            aqk.append(qg[b] @ kg[b].mT)                 # BC x cols x K, fp32 to the Aqk workspace
            akk.append(kw[b] @ kg[b].mT)
        npu.spill(aqk[b], akk[b])
    npu.sync()                                           # the last free flag: the AIVs go on
    with npu.vec("gate"):                                # PrepareGateProductsBulk: C / 2 rows on each AIV
        g0 = g + 0.0                                     # Adds copy (after the Casts in: two barriers)
        npu.pipe_barrier(2)
        e = exp2_of(npu, g0)                            # Muls, Mins, Maxs, Exp
        QG = Q * e
        npu.pipe_barrier()
        QG = clamp_out(npu, QG)
        w0 = K * e
        npu.pipe_barrier()
        w0 = clamp_out(npu, w0)
        gn = g * -1.0                                    # Muls -1, ..., stored to qgScaled (rewritten later)
        npu.pipe_barrier()
        kg0 = K * exp2_of(npu, gn)
        npu.pipe_barrier()
        kg0 = clamp_out(npu, kg0)
    npu.spill(QG, w0, kg0)
    L, X, Aqk_m = solve_input(npu, beta, aqk, akk, C)
    Ai, last = solve(npu, L, X, C)
    with npu.vec("wu"):                                  # PrepareWuCubeInputs: w and v scaled by beta
        bw = load_row(npu, beta, (..., slice(None)))    # LoadAsFloatRow
        bb = npu.brcb(bw)                                # Brcb: one repeat per 8 rows
        npu.pipe_barrier()
        Wseed = w0 * bb[..., :, :1].expand_as(w0)        # ScaleRowsByBeta: Cast in, two 64-lane Muls, Cast out
        npu.pipe_barrier(4)                              # (one recorded Mul), a barrier after each
        Useed = V * bb[..., :, :1].expand_as(V)
        npu.pipe_barrier(4)
    with npu.vec("fin"):                                 # FinalizePrepareIntermediates: aqk, akk, qg loaded
        Aqk = Aqk_m * scale                              # Muls, Cast in, barrier, Muls, barrier
        QGs = QG * scale
        npu.pipe_barrier(2)
        Aqk = clamp_out(npu, Aqk, cast=False)           # the three clamps, then the three Casts, a barrier
        QGs = clamp_out(npu, QGs, cast=False)
        Akk_all = clamp_out(npu, torch.cat([Ai, last.reshape(*last.shape[:-2], -1, C)], -2))
        Akk = Akk_all[..., :C, :]                        # the merged blocks ride on the last flag
    return Aqk, Akk, QG, QGs, Wseed, Useed


@phase_program("fla_npu.post_wu", returns=("W", "U", "Kg"), gm_layout="head-major", barriers="explicit")
def post_wu(npu, K, g, Wseed, Akk, Useed):
    """ChunkKdaFwdPostWu on one item: ComputePostWuCube, then CopyScratchWAndFinalizeKg (C / 2 rows on each
    AIV, one tile)."""
    C = K.shape[-2]
    with npu.cube("w_mm"):                               # two Catlass calls, each loading Akk: PIPE_ALL after each
        Wf = Akk @ Wseed                                 # C x K x C: fp32 to the W scratch
    with npu.cube("u_mm"):
        U = Akk @ Useed                                  # C x V x C: stored fp16
    npu.sync(Wf)                                         # done: set after both
    reverse_flag(npu)
    with npu.vec("glast"):                               # LoadAsFloatRow(gk, last)
        g_last = load_row(npu, g, (..., slice(C - 1, C), slice(None)))
    npu.keep(g_last)
    with npu.vec("w"):                                   # DataCopy, Cast, barrier, DataCopy out: the cast on
        W = Wf.clone()                                   # the store
    with npu.vec("kg"):                                  # k e^(g_last - g), row by row Subs
        d = rows_back([minus(g_last, pair(g, i, C // 2)) for i in range(C // 2)], C // 2)
        npu.pipe_barrier(3)                              # W's Cast, the Cast of k in, the row Subs
        km = K * exp2_of(npu, d)
        npu.pipe_barrier()
        Kg = clamp_out(npu, km)
    return W, U, Kg


@phase_program("fla_npu.fwd_h", returns=("V_new", "S_new"), state=("S_prev", "S_new"), state_handoff="own",
               gm_layout="head-major", barriers="explicit")
def fwd_h(npu, Kg, W, U, g, H_in, S_prev):
    """GDNFwdHKernel, one chunk of one stream (kGated, no scalar gate, use_exp2): S_prev is h [K, V] as the
    cube reads it from GM, H_in the same h as the AIVs load it again."""
    C, K = Kg.shape[-2], Kg.shape[-1]
    with npu.cube("c1"):                                 # v_work = w @ h
        WS = W @ S_prev
    npu.sync(WS)                                         # cube1Done
    with npu.vec("v1"):                                  # EpilogueGDNFwdHVnew: C / 2 rows on each AIV
        V_new = U - WS                                   # Sub (u cast on its load), a barrier
        npu.pipe_barrier()
        Vd = V_new + 0.0                                 # Adds: the copy into the update buffer; then the
        npu.pipe_barrier(3)                              # two Casts down (on the stores), a barrier after each
        Kd = Kg.clone()                                  # kg GM -> UB -> GM: the k-decay workspace
    npu.sync(Vd, Kd)                                     # vec1Done
    with npu.cube("c2"):                                 # h_work = kd^T @ v_d
        HW = Kd.mT @ Vd
    with npu.vec("v2_decay"):                            # EpilogueGDNFwdHUpdate before it waits for C2:
        h = H_in * 1.0                                   # h loaded and cast, a barrier, Muls(1.0) (no scalar
        npu.pipe_barrier(2)                              # gate), a barrier;
        gl = npu.load(g, (..., slice(C - 1, C), slice(None))) * LN2     # gk's last row loaded, a barrier,
        npu.pipe_barrier(2)                              # Muls LN2, a barrier;
        gl = gl.exp()                                    # Exp, a barrier;
        npu.pipe_barrier()
        gb = gl.mT.expand(*gl.shape[:-2], K, h.shape[-1]) * 1.0    # Broadcast<float, 2, 1> along the rows,
        npu.pipe_barrier()                               # a barrier;
        hd = h * gb                                      # Mul, a barrier. K / 2 rows of h on each AIV
        npu.pipe_barrier()
    npu.keep(hd)
    npu.sync(HW, after="c2")                             # cube2Done
    with npu.vec("v2_update"):
        S_new = hd + HW                                  # Add, a barrier; the Cast down (on the store: the
        npu.pipe_barrier(2)                              # state hand-off), a barrier
    return V_new, S_new


@phase_program("fla_npu.finalize", returns=("O",), gm_layout="head-major", barriers="explicit")
def finalize(npu, QGs, Aqk, V_new, H):
    """ChunkKdaFwdFinalize on one item: ComputeOutputCube, then FinalizeOutputRows (C / 2 rows on each AIV)."""
    with npu.cube("qh"):                                 # (q g scale) h: fp32 to the state scratch; PIPE_ALL
        OS = QGs @ H
    with npu.cube("av"):                                 # Aqk v_new: fp32 to the local scratch; PIPE_ALL
        OL = Aqk @ V_new
    npu.sync(OS, OL)                                     # done
    reverse_flag(npu)
    with npu.vec("o"):
        O = OS + OL                                      # Add, clamp, Cast (on the store)
        npu.pipe_barrier()
        O = clamp_out(npu, O)
    return O


# What each stage keeps in GM: the score scratch and the stage tensors in the operand type (fp16), the
# Aqk/Akk workspaces, the solve scratch, the W and output scratches in fp32.
_FP32 = ([f"aqk[{b}]" for b in range(4)] + [f"akk[{b}]" for b in range(4)]
         + ["Aqk_m", "L", "X", "Wf", "WS", "HW", "OS", "OL"]
         + [f"Yl[{k}]" for k in range(12)] + [f"T[{k}]" for k in range(12)] + [f"Xs[{k}]" for k in range(4)]
         + [f"merged[{k}]" for k in range(6)])
STORED = {"stored": ",".join(f"{n}=fp32" for n in _FP32), "gate": "channel"}

FLA_NPU = Design("fla_npu", (
    Pass("prepare", prepare, CHUNKS, slots=1, buffers=1),
    Pass("post_wu", post_wu, CHUNKS, slots=2, buffers=1),
    Pass("fwd_h", fwd_h, SEQUENTIAL, slots=1, buffers=1, interleave=2),
    Pass("finalize", finalize, CHUNKS, slots=2, buffers=1),
), description="flash-linear-attention-npu's AscendC ChunkKdaFwd: four kernels at chunk 64", notes=STORED)
