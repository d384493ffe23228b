// kda_chunk_v3: the design document's v3 (kda/programs/v3.py) as an AscendC mix kernel for Atlas A2 (910B).
//
// One AI core = 1 AIC (Cube: Phases B, D, F) + 2 AIVs (Vector: Phases A, C, E, G). Sequences (b, h) go
// over AI cores by GetBlockIdx(); chunks of a sequence run in order on its core. Every Cube<->Vector
// hand-off goes through this core's GM workspace and one mode-2 cross-core flag, numbered as the
// simulator numbers its syncs (①..⑥); the state S lives in the workspace and rides on sync ③.
//
// Flag order per chunk t (both AIVs do the Vector side, each on its half of the data):
//   AIV: A(t) ->set①  [G(t-1) | S := h0]  wait② C(t) set③  wait④ E(t) set⑤  wait⑥
//   AIC:        wait① B(t) set②           wait③ D(t) set④  wait⑤ F(t) set⑥
// Phase G of chunk t-1 runs after set① of chunk t (the Cube meanwhile does B(t), which does not read
// the state), so the state it writes is published by set③ of chunk t: the state hand-off rides on ③, as
// in the simulator's report. The last chunk's G runs after the loop and writes the state to ht only.
//
// Compiles with CANN (bisheng, SOC_VERSION=Ascend910B2) or with g++ against ascendc_stubs/host. The flags, the
// workspace and the Vector side's tile I/O are shared with kda_chunk_v4 (ascendc_stubs/common/).
#define ASCENDC_CUBE_ONLY   // the Matmul API runs on the AIC that calls it (no AIV->AIC message queue)
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "kda_kernel_io.h"
#include "kda_sync.h"
#include "kda_tiles.h"
#include "../op_host/kda_chunk_v3_tiling.h"

namespace kda_v3 {
using namespace AscendC;
using namespace kda;   // SetSyncFlag / WaitSyncFlag (flag ids 3-8 for syncs 1-6), PipeFence, Workspace, VecIo

template <typename T>
using Workspace = kda::Workspace<T, KdaChunkV3TilingData, KDA_WS_FIRST_SLOT_TENSOR>;

// ---- Cube: Phases B, D, F ---------------------------------------------------------------------------
template <typename T>
class KdaV3Cube {
public:
    using OperandType = MatmulType<TPosition::GM, CubeFormat::ND, T, true>;   // isTrans: A^T and B^T are used
    using ResultType = MatmulType<TPosition::GM, CubeFormat::ND, T>;           // FixPipe rounds to T
    Matmul<OperandType, OperandType, ResultType> mm;

    __aicore__ inline void Init(GM_ADDR user, const KdaChunkV3TilingData& td)
    {
        td_ = &td;
        ws_.Init(user, td, static_cast<uint32_t>(GetBlockIdx()));
    }

    __aicore__ inline void Process()
    {
        const KdaChunkV3TilingData& td = *td_;
        for (uint32_t seq = GetBlockIdx(); seq < td.sequences; seq += GetBlockNum()) {
            for (uint32_t t = 0; t < td.numChunks; ++t) {
                const uint32_t slot = t % td.slots;
                WaitSyncFlag<1>();                  // ① K_scaled, K_div, Q_scaled, K_decay, V are in the workspace
                PhaseB(slot);
                SetSyncFlag<2, PIPE_FIX>();         // ② A_raw
                WaitSyncFlag<3>();                  // ③ M, and the state S (written by G of chunk t-1)
                PhaseD(slot);
                SetSyncFlag<4, PIPE_FIX>();         // ④ U, WS, O_inter, A_qk_raw
                WaitSyncFlag<5>();                  // ⑤ A_qk, V_pseudo
                PhaseF(slot);
                SetSyncFlag<6, PIPE_FIX>();         // ⑥ O_intra, S_delta
            }
        }
        mm.End();
    }

private:
    // C[M, N] = op(A) op(B) over K, all operands in this core's workspace.
    __aicore__ inline void MatMul(const GlobalTensor<T>& c, const GlobalTensor<T>& a, bool transA,
                                  const GlobalTensor<T>& b, bool transB, int m, int n, int k)
    {
        mm.SetOrgShape(m, n, k);
        mm.SetSingleShape(m, n, k);
        mm.SetTensorA(a, transA);
        mm.SetTensorB(b, transB);
        mm.IterateAll(c);
    }

    // Phase B: A_raw = K_scaled K_div^T                                             [C, C]
    __aicore__ inline void PhaseB(uint32_t slot)
    {
        const int C = td_->chunk, dk = td_->dk;
        MatMul(ws_.Get(KDA_WS_A_RAW, slot), ws_.Get(KDA_WS_K_SCALED, slot), false, ws_.Get(KDA_WS_K_DIV, slot), true,
               C, C, dk);
    }

    // Phase D: five matmuls; W never leaves the Cube (its own GM scratch, not a hand-off).
    __aicore__ inline void PhaseD(uint32_t slot)
    {
        const int C = td_->chunk, dk = td_->dk, dv = td_->dv;
        const GlobalTensor<T> M = ws_.Get(KDA_WS_M, slot), W = ws_.Get(KDA_WS_W, slot);
        const GlobalTensor<T> S = ws_.Get(KDA_WS_S, slot), Q = ws_.Get(KDA_WS_Q_SCALED, slot);
        MatMul(W, M, false, ws_.Get(KDA_WS_K_SCALED, slot), false, C, dk, C);              // W = M K_scaled
        MatMul(ws_.Get(KDA_WS_U, slot), M, false, ws_.Get(KDA_WS_V, slot), false, C, dv, C);  // U = M V
        PipeBarrier<PIPE_ALL>();   // W went out through FixPipe; WS reads it back through MTE2
        MatMul(ws_.Get(KDA_WS_WS, slot), W, false, S, false, C, dv, dk);                   // WS = W S
        MatMul(ws_.Get(KDA_WS_O_INTER, slot), Q, false, S, false, C, dv, dk);              // O_inter = Q_scaled S
        MatMul(ws_.Get(KDA_WS_A_QK_RAW, slot), Q, false, ws_.Get(KDA_WS_K_DIV, slot), true, C, C, dk);  // Q K_div^T
    }

    // Phase F: O_intra = A_qk V_pseudo; S_delta = K_decay^T V_pseudo                [C, d_v], [d_k, d_v]
    __aicore__ inline void PhaseF(uint32_t slot)
    {
        const int C = td_->chunk, dk = td_->dk, dv = td_->dv;
        const GlobalTensor<T> Vp = ws_.Get(KDA_WS_V_PSEUDO, slot);
        MatMul(ws_.Get(KDA_WS_O_INTRA, slot), ws_.Get(KDA_WS_A_QK, slot), false, Vp, false, C, dv, C);
        MatMul(ws_.Get(KDA_WS_S_DELTA, slot), ws_.Get(KDA_WS_K_DECAY, slot), true, Vp, false, dk, dv, C);
    }

    const KdaChunkV3TilingData* td_ = nullptr;
    Workspace<T> ws_;
};

// ---- Vector: Phases A, C, E, G ----------------------------------------------------------------------
// The two AIVs split every phase in halves (GetSubBlockIdx()): A by key channels (and V by value columns),
// C by columns of M (the columns of the forward substitution are independent), E and G by rows, and the
// state update of G by the rows of S, i.e. by key channel again, so each AIV's gamma_C (kept in its UB
// since Phase A) is exactly the half it needs. No AIV reads what the other wrote: no AIV<->AIV flags.
template <typename T>
class KdaV3Vec {
public:
    static constexpr int BUFFER_NUM = 2;   // double buffering: MTE2/MTE3 move one tile while V works on the other

    __aicore__ inline void Init(GM_ADDR q, GM_ADDR k, GM_ADDR v, GM_ADDR g, GM_ADDR beta, GM_ADDR h0, GM_ADDR o,
                                GM_ADDR ht, GM_ADDR user, const KdaChunkV3TilingData& td, TPipe* pipe)
    {
        td_ = &td;
        sub_ = static_cast<uint32_t>(GetSubBlockIdx());
        ws_.Init(user, td, static_cast<uint32_t>(GetBlockIdx() / GetSubBlockNum()));
        qGm_.SetGlobalBuffer((__gm__ T*)q);
        kGm_.SetGlobalBuffer((__gm__ T*)k);
        vGm_.SetGlobalBuffer((__gm__ T*)v);
        gGm_.SetGlobalBuffer((__gm__ float*)g);
        betaGm_.SetGlobalBuffer((__gm__ float*)beta);
        h0Gm_.SetGlobalBuffer((__gm__ float*)h0);
        oGm_.SetGlobalBuffer((__gm__ float*)o);
        htGm_.SetGlobalBuffer((__gm__ float*)ht);
        const uint32_t tileBytes = td.calcElems * sizeof(float);
        io_.Init(pipe, tileBytes);
        // four work tiles in one buffer: Phase G takes two neighbours as one tile where the plan's piece is larger
        pipe->InitBuffer(calcBuf_, 4 * tileBytes);
        pipe->InitBuffer(gammaBuf_, 2 * (td.dk / 2) * sizeof(float));   // gamma_C of chunks t and t-1
        pipe->InitBuffer(betaBuf_, td.chunk * sizeof(float));
        pipe->InitBuffer(eyeBuf_, td.chunk * (td.chunk / 2) * sizeof(float));
        for (uint32_t i = 0; i < 4; ++i) calc_[i] = calcBuf_.template Get<float>()[i * td.calcElems];
        gamma_ = gammaBuf_.template Get<float>();
        beta_ = betaBuf_.template Get<float>();
        // this AIV's columns of the identity [C, C/2], the start of every forward substitution (Phase C)
        const uint32_t C = td.chunk, ch = C / 2, c0 = sub_ * ch;
        eye_ = eyeBuf_.template Get<float>();
        Duplicate(eye_, 0.0f, C * ch);
        PipeFence<HardEvent::V_S>();
        for (uint32_t j = 0; j < ch; ++j) eye_.SetValue((c0 + j) * ch + j, 1.0f);
        PipeFence<HardEvent::S_V>();
    }

    __aicore__ inline void Process()
    {
        const KdaChunkV3TilingData& td = *td_;
        const uint32_t core = static_cast<uint32_t>(GetBlockIdx() / GetSubBlockNum());
        for (uint32_t seq = core; seq < td.sequences; seq += GetBlockNum()) {
            for (uint32_t t = 0; t < td.numChunks; ++t) {
                const uint32_t slot = t % td.slots;
                PhaseA(seq, t, slot);
                SetSyncFlag<1, PIPE_MTE3>();        // ① K_scaled, K_div, Q_scaled, K_decay, V
                // The state for chunk t: G of chunk t-1, or h0. Slot reuse is safe: G(t-1) reads O_inter,
                // O_intra, S_delta, which the Cube next overwrites in D(t) / F(t), after ③ / ⑤ of chunk t.
                if (t == 0) InitState(seq);
                else PhaseG(seq, t - 1, (t - 1) % td.slots, false);
                WaitSyncFlag<2>();                  // ② A_raw
                PhaseC(seq, t, slot);
                SetSyncFlag<3, PIPE_MTE3>();        // ③ M, and the state S (rides on ③)
                WaitSyncFlag<4>();                  // ④ U, WS, O_inter, A_qk_raw
                PhaseE(slot);
                SetSyncFlag<5, PIPE_MTE3>();        // ⑤ A_qk, V_pseudo
                WaitSyncFlag<6>();                  // ⑥ O_intra, S_delta
            }
            // Writing chunk t+1's ① payload (in A above) after ⑥ of chunk t is what makes the resident
            // Q_scaled and K_decay and every slot safe to overwrite: the Cube has read them all by then.
            PhaseG(seq, td.numChunks - 1, (td.numChunks - 1) % td.slots, true);
        }
    }

private:
    __aicore__ inline uint64_t TokenOffset(uint32_t seq, uint32_t t, uint32_t row, uint32_t width) const
    {
        return kda::TokenOffset(*td_, seq, t, row, width);
    }

    // Phase A: gc = cumsum(g); K_scaled = K e^gc; K_div = K e^-gc; Q_scaled = scale Q e^gc;
    // K_decay = K e^(gc_C - gc); gamma_C = e^gc_C (kept in UB for G); V copied into the workspace.
    __aicore__ inline void PhaseA(uint32_t seq, uint32_t t, uint32_t slot)
    {
        const KdaChunkV3TilingData& td = *td_;
        const uint32_t C = td.chunk, dk = td.dk, dh = dk / 2, dvh = td.dv / 2;
        const uint32_t w = td.phaseATiles == 1 ? dh : dk / td.phaseATiles, n = C * w, last = (C - 1) * w;
        LocalTensor<float> gc = calc_[0], kf = calc_[1], qf = calc_[2], tmp = calc_[3];
        if (sub_ == 0) KDA_PHASE_RUN("A");
        // The simulator's tiles along the key channels: td.phaseATiles of width w per chunk, this AIV's half of them;
        // one tile (phaseATiles = 1) is both AIVs' halves, [C, d_k / 2] each.
        for (uint32_t c0 = sub_ * dh; c0 < (sub_ + 1) * dh; c0 += w) {
            if (td.phaseATiles > 1) KDA_TILE("A", 4ull * n * sizeof(float), C, w);   // the four work tiles it uses
            else if (sub_ == 0) KDA_TILE("A", 4ull * n * sizeof(float), C, dk);      // the same, on each AIV
            io_.Load(gc, gGm_[TokenOffset(seq, t, 0, dk) + c0], C, w, td.heads * dk);
            if (!td.gateIsLog) Ln(gc, gc, n);                       // the document's g = log(alpha)
            for (uint32_t i = 1; i < C; ++i) Add(gc[i * w], gc[i * w], gc[(i - 1) * w], w);   // cumsum over tokens
            Exp(gamma_[(t % 2) * dh + c0 - sub_ * dh], gc[last], w);   // gamma_C, ping/pong: G(t-1) needs its own
            io_.Load(kf, kGm_[TokenOffset(seq, t, 0, dk) + c0], C, w, td.heads * dk);
            io_.Load(qf, qGm_[TokenOffset(seq, t, 0, dk) + c0], C, w, td.heads * dk);
            Exp(tmp, gc, n);                                        // Gamma
            Muls(qf, qf, td.scale, n);
            Mul(qf, qf, tmp, n);
            io_.Store(ws_.Get(KDA_WS_Q_SCALED, slot)[c0], qf, C, w, dk);
            Mul(tmp, kf, tmp, n);
            io_.Store(ws_.Get(KDA_WS_K_SCALED, slot)[c0], tmp, C, w, dk);
            Muls(tmp, gc, -1.0f, n);
            Exp(tmp, tmp, n);                                       // Gamma_inv
            Mul(tmp, kf, tmp, n);
            io_.Store(ws_.Get(KDA_WS_K_DIV, slot)[c0], tmp, C, w, dk);
            for (uint32_t i = 0; i < C; ++i) Sub(tmp[i * w], gc[last], gc[i * w], w);   // gc_C - gc
            Exp(tmp, tmp, n);                                       // decay to the chunk's end
            Mul(tmp, kf, tmp, n);
            io_.Store(ws_.Get(KDA_WS_K_DECAY, slot)[c0], tmp, C, w, dk);
        }
        // V rides on ① as in the simulator's graph (which flags it redundant: the Cube could load it from GM).
        io_.Load(gc, vGm_[TokenOffset(seq, t, 0, td.dv) + sub_ * dvh], C, dvh, td.heads * td.dv);
        io_.Store(ws_.Get(KDA_WS_V, slot)[sub_ * dvh], gc, C, dvh, td.dv);
    }

    // Phase C: M = (I + StrictTril(A_raw * beta[:, None]))^-1 * beta[None, :], this AIV's columns of M.
    __aicore__ inline void PhaseC(uint32_t seq, uint32_t t, uint32_t slot)
    {
        const KdaChunkV3TilingData& td = *td_;
        const uint32_t C = td.chunk, ch = C / 2, c0 = sub_ * ch;
        LocalTensor<float> a = calc_[0], r = calc_[1], tmp = calc_[2];
        io_.Load(a, ws_.Get(KDA_WS_A_RAW, slot), C, C, C);
        PipeFence<HardEvent::V_S>();                            // the previous chunk's vector reads of beta_
        for (uint32_t i = 0; i < C; ++i) beta_.SetValue(i, betaGm_.GetValue(TokenOffset(seq, t, i, 1)));
        PipeFence<HardEvent::S_V>();
        for (uint32_t i = 0; i < C; ++i) Muls(a[i * C], a[i * C], beta_.GetValue(i), C);   // A = A_raw * beta[:, None]
        Muls(r, eye_, 1.0f, C * ch);
        PipeFence<HardEvent::V_S>();                            // A's elements are read as scalars below
        // Forward substitution, row by row: R[i, :] = e_i - sum_{k<i} A[i, k] R[k, :] on columns c0..c0+ch.
        // Rows k < c0 of R are zero on these columns (R is unit lower triangular), so they are skipped.
        for (uint32_t i = 0; i < C; ++i) {
            LocalTensor<float> row = r[i * ch];
            for (uint32_t k = c0; k < i; ++k) {
                Muls(tmp, r[k * ch], a.GetValue(i * C + k), ch);
                Sub(row, row, tmp, ch);
            }
        }
        for (uint32_t i = 0; i < C; ++i) Mul(r[i * ch], r[i * ch], beta_[c0], ch);        // * beta[None, :]
        io_.Store(ws_.Get(KDA_WS_M, slot)[c0], r, C, ch, C);
    }

    // Phase E: V_pseudo = U - WS; A_qk = tril(A_qk_raw), this AIV's rows.
    __aicore__ inline void PhaseE(uint32_t slot)
    {
        const KdaChunkV3TilingData& td = *td_;
        const uint32_t C = td.chunk, ch = C / 2, r0 = sub_ * ch, dv = td.dv;
        io_.Load(calc_[0], ws_.Get(KDA_WS_U, slot)[r0 * dv], ch, dv, dv);
        io_.Load(calc_[1], ws_.Get(KDA_WS_WS, slot)[r0 * dv], ch, dv, dv);
        Sub(calc_[0], calc_[0], calc_[1], ch * dv);
        io_.Store(ws_.Get(KDA_WS_V_PSEUDO, slot)[r0 * dv], calc_[0], ch, dv, dv);
        io_.Load(calc_[2], ws_.Get(KDA_WS_A_QK_RAW, slot)[r0 * C], ch, C, C);
        for (uint32_t i = 0; i < ch; ++i) {                     // keep columns 0..r0+i of row r0+i
            Duplicate(calc_[3][i * C], 0.0f, C);
            Muls(calc_[3][i * C], calc_[2][i * C], 1.0f, r0 + i + 1);
        }
        io_.Store(ws_.Get(KDA_WS_A_QK, slot)[r0 * C], calc_[3], ch, C, C);
    }

    // Phase G: O = O_inter + O_intra (this AIV's rows, to o); S_new = Diag(gamma_C) S_prev + S_delta in the
    // simulator's tiles: td.gTiles slices of d_v, [d_k, w] each, split between the AIVs by rows (this AIV's key
    // channels, whose gamma_C it keeps), into the workspace, or for the last chunk into ht (rounded to T as the
    // state is).
    __aicore__ inline void PhaseG(uint32_t seq, uint32_t t, uint32_t slot, bool lastChunk)
    {
        const KdaChunkV3TilingData& td = *td_;
        const uint32_t C = td.chunk, ch = C / 2, r0 = sub_ * ch, dv = td.dv, dh = td.dk / 2, k0 = sub_ * dh;
        const uint32_t w = dv / td.gTiles, n = dh * w;
        io_.Load(calc_[0], ws_.Get(KDA_WS_O_INTER, slot)[r0 * dv], ch, dv, dv);
        io_.Load(calc_[1], ws_.Get(KDA_WS_O_INTRA, slot)[r0 * dv], ch, dv, dv);
        Add(calc_[0], calc_[0], calc_[1], ch * dv);
        io_.Store(oGm_[TokenOffset(seq, t, r0, dv)], calc_[0], ch, dv, td.heads * dv);
        const LocalTensor<float> gamma = gamma_[(t % 2) * dh];
        PipeFence<HardEvent::V_S>();                            // gamma_C (Phase A, vector) is read as scalars
        const uint64_t htBase = uint64_t(seq) * td.dk * dv;
        if (sub_ == 0) KDA_PHASE_RUN("G");
        // S in calc_[0] and S_delta in calc_[2]: a piece [d_k / 2, w] may take two neighbouring work tiles each
        // (the tiling checks it)
        const LocalTensor<float> st = calc_[0], delta = calc_[2];
        for (uint32_t c0 = 0; c0 < dv; c0 += w) {
            if (sub_ == 0) KDA_TILE("G", 2ull * n * sizeof(float), td.dk, w);   // both AIVs; S and S_delta each
            const uint64_t at = uint64_t(k0) * dv + c0;
            io_.Load(st, ws_.Get(KDA_WS_S, slot)[at], dh, w, dv);
            io_.Load(delta, ws_.Get(KDA_WS_S_DELTA, slot)[at], dh, w, dv);
            for (uint32_t j = 0; j < dh; ++j) Muls(st[j * w], st[j * w], gamma.GetValue(j), w);
            Add(st, st, delta, n);
            if (!lastChunk) {
                io_.Store(ws_.Get(KDA_WS_S, slot)[at], st, dh, w, dv);
            } else {
                if constexpr (sizeof(T) != sizeof(float)) {    // the state is kept in T between chunks
                    LocalTensor<T> rounded = delta.template ReinterpretCast<T>();
                    Cast(rounded, calc_[0], RoundMode::CAST_RINT, n);
                    Cast(calc_[0], rounded, RoundMode::CAST_NONE, n);
                }
                io_.Store(htGm_[htBase + at], calc_[0], dh, w, dv);
            }
        }
    }

    // The state for chunk 0: h0 (fp32 in GM, rounded to T) or zeros, this AIV's rows of S.
    __aicore__ inline void InitState(uint32_t seq)
    {
        const KdaChunkV3TilingData& td = *td_;
        const uint32_t dv = td.dv, dh = td.dk / 2, k0 = sub_ * dh;
        for (uint32_t r = 0; r < dh; r += td.stateTileRows) {
            const uint32_t n = dh - r < td.stateTileRows ? dh - r : td.stateTileRows, row = k0 + r;
            if (td.hasInitialState) io_.Load(calc_[0], h0Gm_[uint64_t(seq) * td.dk * dv + uint64_t(row) * dv], n, dv, dv);
            else Duplicate(calc_[0], 0.0f, n * dv);
            io_.Store(ws_.Get(KDA_WS_S, 0)[row * dv], calc_[0], n, dv, dv);
        }
    }

    const KdaChunkV3TilingData* td_ = nullptr;
    uint32_t sub_ = 0;
    Workspace<T> ws_;
    GlobalTensor<T> qGm_, kGm_, vGm_;
    GlobalTensor<float> gGm_, betaGm_, h0Gm_, oGm_, htGm_;
    VecIo<BUFFER_NUM> io_;   // loads through a VECIN queue, stores through a VECOUT queue, BUFFER_NUM buffers each
    TBuf<TPosition::VECCALC> calcBuf_, gammaBuf_, betaBuf_, eyeBuf_;
    LocalTensor<float> calc_[4], gamma_, beta_, eye_;
};

template <typename T>
__aicore__ inline void Run(GM_ADDR q, GM_ADDR k, GM_ADDR v, GM_ADDR g, GM_ADDR beta, GM_ADDR h0, GM_ADDR o, GM_ADDR ht,
                           GM_ADDR user, const KdaChunkV3TilingData& td)
{
    if ASCEND_IS_AIC {
        TPipe pipe;
        KdaV3Cube<T> cube;
        cube.Init(user, td);
        REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), cube.mm, &td.mmTiling);
        cube.Process();
    }
    if ASCEND_IS_AIV {
        TPipe pipe;
        KdaV3Vec<T> vec;
        vec.Init(q, k, v, g, beta, h0, o, ht, user, td, &pipe);
        vec.Process();
    }
}

}  // namespace kda_v3

extern "C" __global__ __aicore__ void kda_chunk_v3(GM_ADDR q, GM_ADDR k, GM_ADDR v, GM_ADDR g, GM_ADDR beta,
                                                   GM_ADDR h0, GM_ADDR o, GM_ADDR ht, GM_ADDR workspace,
                                                   GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    REGISTER_TILING_DEFAULT(KdaChunkV3TilingData);
    GET_TILING_DATA_WITH_STRUCT(KdaChunkV3TilingData, tilingData, tiling);
    GM_ADDR user = AscendC::GetUserWorkspace(workspace);
    if (TILING_KEY_IS(KDA_TILING_KEY_FP32)) {
        kda_v3::Run<float>(q, k, v, g, beta, h0, o, ht, user, tilingData);
    } else if (TILING_KEY_IS(KDA_TILING_KEY_BF16)) {
        kda_v3::Run<bfloat16_t>(q, k, v, g, beta, h0, o, ht, user, tilingData);
    }
}
