// kda_chunk_v4: v4 (kda/programs/v4.py), v3 made numerically safe with 16-wide sub-chunk reference points, as
// an AscendC mix kernel for Atlas A2 (910B). Every exp this kernel takes has an argument <= 0.
//
// One AI core = 1 AIC (Cube: Phases B, D, F) + 2 AIVs (Vector: Phases A, C, E, G). Sequences (b, h) go over AI
// cores by GetBlockIdx(); chunks of a sequence run in order on its core. The six Cube<->Vector hand-offs go
// through this core's GM workspace and the mode-2 flags of kda_chunk_v3 (ascendc_stubs/common/kda_sync.h):
//   ① K_scaled, Q_scaled, K_decay, K_left, Q_left, K_right   ② A_kk_off   ③ M, A_qk_diag, and the state S
//   ④ U, WS, O_inter   ⑤ V_pseudo   ⑥ O_intra, S_delta
// Flag order per chunk t, as v3 (the state Phase G of chunk t-1 writes rides on ③ of chunk t):
//   AIV: A(t) ->set①  [G(t-1) | S := h0]  wait② C(t) set③  wait④ E(t) set⑤  wait⑥
//   AIC:        wait① B(t) set②           wait③ D(t) set④  wait⑤ F(t) set⑥
//
// Sub-chunks (n = C / 16; r_I = gc at the first row of sub-chunk I; gc decreases):
//   - blocks below the diagonal (I > J), on the Cube: exp(gc_i - gc_j) = exp(gc_i - r_I) exp(r_I - gc_j), both
//     <= 1. Phase A makes K_left = K_I exp(gc_I - r_I), Q_left (the same with scale Q), K_right = K_J
//     exp(r_I - gc_J) per pair; B and D multiply them, one matmul per row of blocks.
//   - diagonal blocks, on the Vector: exp(gc_i - gc_j) for j <= i, pair by pair (FLA's diagonal path).
//   - A_qk is assembled in place: the Vector writes its diagonal blocks (③) and the Cube the blocks left of
//     them (Phase D, kept for F) into one [C, C] matrix; F reads its lower block triangle only.
// The state is fp32 between chunks (v4's default with bf16 transfers). The Cube's Matmul takes A and B of one
// type, so with bf16 transfers it reads the state as two bf16 parts S = S_hi + S_lo stacked along K, with
// Q_scaled and W written twice side by side: Q_scaled S = [Q_scaled, Q_scaled] [S_hi; S_lo], accumulated in
// fp32 (README, "The v4 kernel": ① carries C x d_k more bf16 values, 16 KiB at C = 64, d_k = 128).
//
// Compiles with CANN (bisheng, SOC_VERSION=Ascend910B2) or with g++ against ascendc_stubs/host.
#define ASCENDC_CUBE_ONLY   // the Matmul API runs on the AIC that calls it (no AIV->AIC message queue)
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "kda_kernel_io.h"
#include "kda_sync.h"
#include "kda_tiles.h"
#include "kda_diagonal_blocks.h"   // PairStart, SumSlot
#include "../op_host/kda_chunk_v4_tiling.h"

namespace kda_v4 {
using namespace AscendC;
using namespace kda;   // SetSyncFlag / WaitSyncFlag (flag ids 3-8 for syncs 1-6), PipeFence, Workspace, VecIo

template <typename T>
using Workspace = kda::Workspace<T, KdaChunkV4TilingData, KDA4_WS_FIRST_SLOT_TENSOR>;


// ---- Cube: Phases B, D, F ---------------------------------------------------------------------------
template <typename T>
class KdaV4Cube {
public:
    using OperandType = MatmulType<TPosition::GM, CubeFormat::ND, T, true>;   // isTrans: A^T and B^T are used
    using ResultType = MatmulType<TPosition::GM, CubeFormat::ND, T>;           // FixPipe rounds to T
    Matmul<OperandType, OperandType, ResultType> mm;

    __aicore__ inline void Init(GM_ADDR v, GM_ADDR user, const KdaChunkV4TilingData& td)
    {
        td_ = &td;
        ws_.Init(user, td, static_cast<uint32_t>(GetBlockIdx()));
        vGm_.SetGlobalBuffer((__gm__ T*)v);
    }

    __aicore__ inline void Process()
    {
        const KdaChunkV4TilingData& td = *td_;
        for (uint32_t seq = GetBlockIdx(); seq < td.sequences; seq += GetBlockNum()) {
            for (uint32_t t = 0; t < td.numChunks; ++t) {
                const uint32_t slot = t % td.slots;
                WaitSyncFlag<1>();                  // ① K_scaled, Q_scaled, K_decay, K_left, Q_left, K_right
                PhaseB(slot);
                SetSyncFlag<2, PIPE_FIX>();         // ② A_kk_off
                WaitSyncFlag<3>();                  // ③ M, A_qk_diag, and the state S (written by G of chunk t-1)
                PhaseD(seq, t, slot);
                SetSyncFlag<4, PIPE_FIX>();         // ④ U, WS, O_inter
                WaitSyncFlag<5>();                  // ⑤ V_pseudo
                PhaseF(slot);
                SetSyncFlag<6, PIPE_FIX>();         // ⑥ O_intra, S_delta
            }
        }
        mm.End();
    }

private:
    // C[m, n] = op(A) op(B) over k. lda, ldb, ldc: the row lengths of A, B, C as stored (A^T: A is stored
    // [k, m]; B^T: B is stored [n, k]). The Matmul API takes them as its "original" shape.
    __aicore__ inline void MatMul(const GlobalTensor<T>& c, uint32_t ldc, const GlobalTensor<T>& a, uint32_t lda,
                                  bool transA, const GlobalTensor<T>& b, uint32_t ldb, bool transB, uint32_t m,
                                  uint32_t n, uint32_t k)
    {
        const int orgM = transA ? lda : m, orgKa = transA ? k : lda;
        const int orgN = transB ? n : ldb, orgKb = transB ? ldb : k;
        mm.SetOrgShape(orgM, orgN, orgKa, orgKb, static_cast<int>(ldc) == orgN ? 0 : ldc);
        mm.SetSingleShape(m, n, k);
        mm.SetTensorA(a, transA);
        mm.SetTensorB(b, transB);
        mm.IterateAll(c);
    }

    // Phase B: the blocks of K K^T below the diagonal, one matmul per row of blocks I:
    // A_kk_off[I] = K_left[I] [K_right(I, 0); ..; K_right(I, I-1)]^T                 [16, I*16]
    __aicore__ inline void PhaseB(uint32_t slot)
    {
        const uint32_t S = td_->sub, dk = td_->dk;
        for (uint32_t I = 1; I < td_->subChunks; ++I)
            MatMul(ws_.Get(KDA4_WS_A_KK_OFF, slot)[PairStart(I) * S * S], I * S,
                   ws_.Get(KDA4_WS_K_LEFT, slot)[(I - 1) * S * dk], dk, false,
                   ws_.Get(KDA4_WS_K_RIGHT, slot)[PairStart(I) * S * dk], dk, true, S, I * S, dk);
    }

    // Phase D: v3's W, U, WS, O_inter, and the blocks of Q K^T below the diagonal, written into their place in
    // A_qk (ldc = C), where they stay for Phase F. W never leaves the Cube (its own GM scratch). With the state
    // in two parts, W is written twice side by side and WS = [W, W] [S_hi; S_lo] (K = 2 d_k).
    __aicore__ inline void PhaseD(uint32_t seq, uint32_t t, uint32_t slot)
    {
        const KdaChunkV4TilingData& td = *td_;
        const uint32_t C = td.chunk, S = td.sub, dk = td.dk, dv = td.dv, kS = td.stateParts * dk;
        const GlobalTensor<T> M = ws_.Get(KDA4_WS_M, slot), W = ws_.Get(KDA4_WS_W, slot);
        const GlobalTensor<T> state = ws_.Get(KDA4_WS_S, slot);
        for (uint32_t part = 0; part < td.stateParts; ++part)                               // W = M K_scaled
            MatMul(W[part * dk], kS, M, C, false, ws_.Get(KDA4_WS_K_SCALED, slot), dk, false, C, dk, C);
        MatMul(ws_.Get(KDA4_WS_U, slot), dv, M, C, false, vGm_[TokenOffset(td, seq, t, 0, dv)], td.heads * dv, false,
               C, dv, C);                                                                  // U = M V (V from GM)
        PipeBarrier<PIPE_ALL>();   // W went out through FixPipe; WS reads it back through MTE2
        MatMul(ws_.Get(KDA4_WS_WS, slot), dv, W, kS, false, state, dv, false, C, dv, kS);   // WS = W S
        MatMul(ws_.Get(KDA4_WS_O_INTER, slot), dv, ws_.Get(KDA4_WS_Q_SCALED, slot), kS, false, state, dv, false, C, dv,
               kS);                                                                        // O_inter = Q_scaled S
        for (uint32_t I = 1; I < td.subChunks; ++I)       // A_qk_off[I] = Q_left[I] [K_right(I, 0..I-1)]^T
            MatMul(ws_.Get(KDA4_WS_A_QK, slot)[I * S * C], C, ws_.Get(KDA4_WS_Q_LEFT, slot)[(I - 1) * S * dk], dk,
                   false, ws_.Get(KDA4_WS_K_RIGHT, slot)[PairStart(I) * S * dk], dk, true, S, I * S, dk);
    }

    // Phase F: A_qk is whole now (its diagonal blocks came with ③). O_intra = A_qk V_pseudo, one matmul per row
    // of blocks over its lower block triangle (K = (I+1)*16); S_delta = K_decay^T V_pseudo.
    __aicore__ inline void PhaseF(uint32_t slot)
    {
        const uint32_t C = td_->chunk, S = td_->sub, dk = td_->dk, dv = td_->dv;
        const GlobalTensor<T> Vp = ws_.Get(KDA4_WS_V_PSEUDO, slot);
        for (uint32_t I = 0; I < td_->subChunks; ++I)
            MatMul(ws_.Get(KDA4_WS_O_INTRA, slot)[I * S * dv], dv, ws_.Get(KDA4_WS_A_QK, slot)[I * S * C], C, false,
                   Vp, dv, false, S, dv, (I + 1) * S);
        MatMul(ws_.Get(KDA4_WS_S_DELTA, slot), dv, ws_.Get(KDA4_WS_K_DECAY, slot), dk, true, Vp, dv, false, dk, dv, C);
    }

    const KdaChunkV4TilingData* td_ = nullptr;
    Workspace<T> ws_;
    GlobalTensor<T> vGm_;
};

// ---- Vector: Phases A, C, E, G ----------------------------------------------------------------------
// The two AIVs split every phase in halves (GetSubBlockIdx()), as in v3: A by key channels, C by columns of M,
// E and G by rows, G's state update by rows of S (key channels again, matching the gamma_C each AIV keeps).
// The diagonal blocks need every key channel, so Phase A splits them by sub-chunk instead: AIV s makes the
// blocks of sub-chunks [s n/2, (s+1) n/2). Phase C on AIV0 (columns 0..C/2) needs all of A_kk's diagonal
// blocks, AIV1's too: both AIVs put theirs into the Vector's own GM scratch A_kk_diag, and AIV1's write
// reaches AIV0's read through AIV1 set① -> AIC wait① -> AIC set② -> AIV0 wait② (no AIV<->AIV flag needed).
template <typename T>
class KdaV4Vec {
public:
    static constexpr int BUFFER_NUM = 2;   // double buffering: MTE2/MTE3 move one tile while V works on the other
    static constexpr bool kFloatTransfers = sizeof(T) == sizeof(float);

    __aicore__ inline void Init(GM_ADDR q, GM_ADDR k, GM_ADDR g, GM_ADDR beta, GM_ADDR h0, GM_ADDR o, GM_ADDR ht,
                                GM_ADDR user, const KdaChunkV4TilingData& td, TPipe* pipe)
    {
        td_ = &td;
        sub_ = static_cast<uint32_t>(GetSubBlockIdx());
        ws_.Init(user, td, static_cast<uint32_t>(GetBlockIdx() / GetSubBlockNum()));
        qGm_.SetGlobalBuffer((__gm__ T*)q);
        kGm_.SetGlobalBuffer((__gm__ T*)k);
        gGm_.SetGlobalBuffer((__gm__ float*)g);
        betaGm_.SetGlobalBuffer((__gm__ float*)beta);
        h0Gm_.SetGlobalBuffer((__gm__ float*)h0);
        oGm_.SetGlobalBuffer((__gm__ float*)o);
        htGm_.SetGlobalBuffer((__gm__ float*)ht);
        const uint32_t tileBytes = td.calcElems * sizeof(float), S = td.sub, C = td.chunk, ch = C / 2;
        io_.Init(pipe, tileBytes);
        // five work tiles in one buffer: Phase G takes two neighbours as one tile where the plan's piece is larger
        pipe->InitBuffer(calcBuf_, 5 * tileBytes);
        pipe->InitBuffer(gammaBuf_, 2 * (td.dk / 2) * sizeof(float));   // gamma_C of chunks t and t-1
        pipe->InitBuffer(betaBuf_, C * sizeof(float));
        pipe->InitBuffer(eyeBuf_, C * ch * sizeof(float));
        pipe->InitBuffer(qkDiagBuf_, td.subChunks / 2 * S * S * sizeof(float));   // this AIV's A_qk_diag, A -> C
        // the diagonal blocks' sums, 32 bytes apart: per sub-chunk of this AIV over every tile, and one tile's part
        pipe->InitBuffer(sumBuf_, (td.subChunks / 2) * S * (S + 1) * 8 * sizeof(float));
        pipe->InitBuffer(partBuf_, S * (S + 1) * 8 * sizeof(float));
        pipe->InitBuffer(workBuf_, ((td.dk + 63) / 64 + 7) / 8 * 8 * sizeof(float));   // a partial sum per 64
        for (uint32_t i = 0; i < 5; ++i) calc_[i] = calcBuf_.template Get<float>()[i * td.calcElems];
        gamma_ = gammaBuf_.template Get<float>();
        beta_ = betaBuf_.template Get<float>();
        qkDiag_ = qkDiagBuf_.template Get<float>();
        sums_ = sumBuf_.template Get<float>();
        part_ = partBuf_.template Get<float>();
        Duplicate(part_, 0.0f, S * (S + 1) * 8);            // ReduceSum writes one float per 32 bytes
        work_ = workBuf_.template Get<float>();
        // this AIV's columns of the identity [C, C/2], the start of every forward substitution (Phase C)
        const uint32_t c0 = sub_ * ch;
        eye_ = eyeBuf_.template Get<float>();
        Duplicate(eye_, 0.0f, C * ch);
        PipeFence<HardEvent::V_S>();
        for (uint32_t j = 0; j < ch; ++j) eye_.SetValue((c0 + j) * ch + j, 1.0f);
        PipeFence<HardEvent::S_V>();
    }

    __aicore__ inline void Process()
    {
        const KdaChunkV4TilingData& td = *td_;
        const uint32_t core = static_cast<uint32_t>(GetBlockIdx() / GetSubBlockNum());
        for (uint32_t seq = core; seq < td.sequences; seq += GetBlockNum()) {
            for (uint32_t t = 0; t < td.numChunks; ++t) {
                const uint32_t slot = t % td.slots;
                PhaseA(seq, t, slot);
                SetSyncFlag<1, PIPE_MTE3>();        // ① K_scaled, Q_scaled, K_decay, K_left, Q_left, K_right
                // The state for chunk t: G of chunk t-1, or h0 (as v3).
                if (t == 0) InitState(seq);
                else PhaseG(seq, t - 1, (t - 1) % td.slots, false);
                WaitSyncFlag<2>();                  // ② A_kk_off
                PhaseC(seq, t, slot);
                SetSyncFlag<3, PIPE_MTE3>();        // ③ M, A_qk_diag, and the state S (rides on ③)
                WaitSyncFlag<4>();                  // ④ U, WS, O_inter
                PhaseE(slot);
                SetSyncFlag<5, PIPE_MTE3>();        // ⑤ V_pseudo
                WaitSyncFlag<6>();                  // ⑥ O_intra, S_delta
            }
            // As in v3: chunk t+1's ① payload is written after ⑥ of chunk t, when the Cube has read every
            // slot tensor of chunk t and the resident Q_scaled and K_decay.
            PhaseG(seq, td.numChunks - 1, (td.numChunks - 1) % td.slots, true);
        }
    }

private:
    __aicore__ inline uint64_t TokenOffset(uint32_t seq, uint32_t t, uint32_t row, uint32_t width) const
    {
        return kda::TokenOffset(*td_, seq, t, row, width);
    }

    // Phase A, on this AIV's key channels c0..c0+d_k/2 of every row (gc = cumsum(g) decreases, so every
    // exponent below is <= 0): K_scaled = K e^gc; Q_scaled = scale Q e^gc; K_decay = K e^(gc_C - gc);
    // gamma_C = e^gc_C (kept in UB for G); K_left, Q_left, K_right; then the diagonal blocks (PhaseADiagonal).
    __aicore__ inline void PhaseA(uint32_t seq, uint32_t t, uint32_t slot)
    {
        const KdaChunkV4TilingData& td = *td_;
        const uint32_t C = td.chunk, S = td.sub, dk = td.dk, dh = dk / 2, c0 = sub_ * dh, kS = td.stateParts * dk;
        const uint32_t n = C * dh, last = (C - 1) * dh;
        LocalTensor<float> gc = calc_[0], kf = calc_[1], qf = calc_[2], fac = calc_[3], x = calc_[4];
        io_.Load(gc, gGm_[TokenOffset(seq, t, 0, dk) + c0], C, dh, td.heads * dk);
        if (!td.gateIsLog) Ln(gc, gc, n);                       // the document's g = log(alpha)
        for (uint32_t i = 1; i < C; ++i) Add(gc[i * dh], gc[i * dh], gc[(i - 1) * dh], dh);   // cumsum over tokens
        Exp(gamma_[(t % 2) * dh], gc[last], dh);                // gamma_C, ping/pong: G(t-1) still needs its own
        io_.Load(kf, kGm_[TokenOffset(seq, t, 0, dk) + c0], C, dh, td.heads * dk);
        io_.Load(qf, qGm_[TokenOffset(seq, t, 0, dk) + c0], C, dh, td.heads * dk);
        Muls(qf, qf, td.scale, n);
        Exp(fac, gc, n);                                        // Gamma = e^gc
        Mul(x, kf, fac, n);
        io_.Store(ws_.Get(KDA4_WS_K_SCALED, slot)[c0], x, C, dh, dk);
        Mul(x, qf, fac, n);
        for (uint32_t part = 0; part < td.stateParts; ++part)   // side by side, one per part of the state
            io_.Store(ws_.Get(KDA4_WS_Q_SCALED, slot)[part * dk + c0], x, C, dh, kS);
        for (uint32_t i = 0; i < C; ++i) Sub(fac[i * dh], gc[last], gc[i * dh], dh);   // gc_C - gc
        Exp(fac, fac, n);                                       // decay to the chunk's end
        Mul(x, kf, fac, n);
        io_.Store(ws_.Get(KDA4_WS_K_DECAY, slot)[c0], x, C, dh, dk);
        // Left operands, rows of sub-chunks 1..n-1: exp(gc_i - r_I), r_I = gc at the sub-chunk's first row.
        for (uint32_t i = S; i < C; ++i) Sub(fac[(i - S) * dh], gc[i * dh], gc[(i / S) * S * dh], dh);
        Exp(fac, fac, (C - S) * dh);
        Mul(x, kf[S * dh], fac, (C - S) * dh);
        io_.Store(ws_.Get(KDA4_WS_K_LEFT, slot)[c0], x, C - S, dh, dk);
        Mul(x, qf[S * dh], fac, (C - S) * dh);
        io_.Store(ws_.Get(KDA4_WS_Q_LEFT, slot)[c0], x, C - S, dh, dk);
        // Right operands, pairs (I, J) with J < I: K_J exp(r_I - gc_J). For one I the pairs (I, 0..I-1) take
        // rows 0..I*16 of K, in order.
        for (uint32_t I = 1; I < td.subChunks; ++I) {
            for (uint32_t j = 0; j < I * S; ++j) Sub(fac[j * dh], gc[I * S * dh], gc[j * dh], dh);
            Exp(fac, fac, I * S * dh);
            Mul(x, kf, fac, I * S * dh);
            io_.Store(ws_.Get(KDA4_WS_K_RIGHT, slot)[PairStart(I) * S * dk + c0], x, I * S, dh, dk);
        }
        PhaseADiagonal(seq, t);
    }

    // Phase A, diagonal blocks of this AIV's sub-chunks: for j <= i in sub-chunk I,
    //   A_kk[i, j] = sum_d K_i K_j exp(gc_i - gc_j),   A_qk[i, j] = sum_d scale Q_i K_j exp(gc_i - gc_j),
    // with gc_i - gc_j (<= 0) from the cumulative sum restarted at the sub-chunk's first row. The simulator's
    // tiles: td.diagTiles key-channel slices of width w, each the products of every sub-chunk's 16 * 17 / 2 pairs
    // ([n, 136, w]), split between the AIVs by sub-chunk as the rest of the diagonal part (AIV s takes
    // [s n/2, (s+1) n/2), so each AIV keeps the sums its Phase C needs). Per tile, sub-chunk and column j, as FLA's
    // diagonal path: one [16 - j, w] tile of decay factors, then one ReduceSum per entry into this tile's part;
    // the parts add up over the tiles. A_kk's blocks go to the Vector's own A_kk_diag (for Phase C); A_qk's stay
    // in UB until Phase C sends them.
    __aicore__ inline void PhaseADiagonal(uint32_t seq, uint32_t t)
    {
        const KdaChunkV4TilingData& td = *td_;
        const uint32_t S = td.sub, dk = td.dk, perAiv = td.subChunks / 2, w = dk / td.diagTiles;
        const uint32_t pairs = S * (S + 1) / 2, qkSums = pairs * 8, sumElems = 2 * qkSums;   // kk, then qk
        LocalTensor<float> gl = calc_[0], kf = calc_[1], qf = calc_[2], e = calc_[3], x = calc_[4];
        if (sub_ == 0) KDA_PHASE_RUN("A");
        Duplicate(sums_, 0.0f, perAiv * sumElems);
        for (uint32_t c0 = 0; c0 < dk; c0 += w) {
            // one tile: [n, 136, w] products, both AIVs together (gl, kf, qf [16, w], e and x, the sums and a part)
            if (sub_ == 0) KDA_TILE("A", (5ull * S * w + (perAiv + 1ull) * sumElems) * sizeof(float), td.subChunks, pairs, w);
            for (uint32_t b = 0; b < perAiv; ++b) {
                const uint32_t row0 = (sub_ * perAiv + b) * S;
                io_.Load(gl, gGm_[TokenOffset(seq, t, row0, dk) + c0], S, w, td.heads * dk);
                if (!td.gateIsLog) Ln(gl, gl, S * w);
                for (uint32_t i = 1; i < S; ++i) Add(gl[i * w], gl[i * w], gl[(i - 1) * w], w);
                io_.Load(kf, kGm_[TokenOffset(seq, t, row0, dk) + c0], S, w, td.heads * dk);
                io_.Load(qf, qGm_[TokenOffset(seq, t, row0, dk) + c0], S, w, td.heads * dk);
                Muls(qf, qf, td.scale, S * w);
                for (uint32_t j = 0; j < S; ++j) {
                    const uint32_t rows = S - j;                // i = j .. S-1
                    for (uint32_t i = j; i < S; ++i) Sub(e[(i - j) * w], gl[i * w], gl[j * w], w);
                    Exp(e, e, rows * w);                        // exp(gc_i - gc_j) <= 1
                    for (uint32_t i = j; i < S; ++i) Mul(e[(i - j) * w], e[(i - j) * w], kf[j * w], w);
                    Mul(x, e, kf[j * w], rows * w);             // K_i * K_j exp(..), rows i = j..S-1
                    for (uint32_t i = j; i < S; ++i) ReduceSum(part_[SumSlot(i, j)], x[(i - j) * w], work_, w);
                    Mul(x, e, qf[j * w], rows * w);             // scale Q_i * K_j exp(..)
                    for (uint32_t i = j; i < S; ++i) ReduceSum(part_[qkSums + SumSlot(i, j)], x[(i - j) * w], work_, w);
                }
                Add(sums_[b * sumElems], sums_[b * sumElems], part_, sumElems);   // the gaps between sums are 0
            }
        }
        for (uint32_t b = 0; b < perAiv; ++b) {
            // the sums into [16, 16] blocks, zero above the diagonal
            const uint32_t I = sub_ * perAiv + b;
            const LocalTensor<float> sums = sums_[b * sumElems];
            LocalTensor<float> kk = e, qk = qkDiag_[b * S * S];
            Duplicate(kk, 0.0f, S * S);
            Duplicate(qk, 0.0f, S * S);
            PipeFence<HardEvent::V_S>();
            for (uint32_t i = 0; i < S; ++i) {
                for (uint32_t j = 0; j <= i; ++j) {
                    kk.SetValue(i * S + j, sums.GetValue(SumSlot(i, j)));
                    qk.SetValue(i * S + j, sums.GetValue(qkSums + SumSlot(i, j)));
                }
            }
            PipeFence<HardEvent::S_V>();
            io_.Store(ws_.GetFloat(KDA4_WS_A_KK_DIAG)[I * S * S], kk, S, S, S);
        }
    }
    // Phase C: assemble A = A_raw * beta[:, None] from its blocks (diagonal: A_kk_diag, both AIVs'; below:
    // A_kk_off from ②), then v3's forward substitution, M = (I + StrictTril(A))^-1 * beta[None, :], on this
    // AIV's columns of M. A is never formed: the substitution reads its entries from the blocks. Then this
    // AIV's A_qk_diag blocks go into their place in A_qk: they ride on ③ with M.
    __aicore__ inline void PhaseC(uint32_t seq, uint32_t t, uint32_t slot)
    {
        const KdaChunkV4TilingData& td = *td_;
        const uint32_t C = td.chunk, S = td.sub, ch = C / 2, c0 = sub_ * ch;
        const uint32_t offElems = td.pairs * S * S, diagElems = td.subChunks * S * S;
        LocalTensor<float> off = calc_[0], diag = calc_[1], r = calc_[2], tmp = calc_[3];
        io_.Load(off, ws_.Get(KDA4_WS_A_KK_OFF, slot), 1, offElems, offElems);
        io_.Load(diag, ws_.GetFloat(KDA4_WS_A_KK_DIAG), 1, diagElems, diagElems);
        Muls(r, eye_, 1.0f, C * ch);
        PipeFence<HardEvent::V_S>();                            // the blocks are read as scalars below, and beta_
        for (uint32_t i = 0; i < C; ++i) beta_.SetValue(i, betaGm_.GetValue(TokenOffset(seq, t, i, 1)));
        PipeFence<HardEvent::S_V>();
        // Forward substitution, row by row: R[i, :] = e_i - sum_{k<i} A[i, k] R[k, :] on columns c0..c0+ch.
        // Rows k < c0 of R are zero on these columns (R is unit lower triangular), so they are skipped.
        for (uint32_t i = 0; i < C; ++i) {
            LocalTensor<float> row = r[i * ch];
            const float b = beta_.GetValue(i);
            for (uint32_t k = c0; k < i; ++k) {
                Muls(tmp, r[k * ch], RawA(off, diag, i, k) * b, ch);
                Sub(row, row, tmp, ch);
            }
        }
        for (uint32_t i = 0; i < C; ++i) Mul(r[i * ch], r[i * ch], beta_[c0], ch);        // * beta[None, :]
        io_.Store(ws_.Get(KDA4_WS_M, slot)[c0], r, C, ch, C);
        for (uint32_t b = 0; b < td.subChunks / 2; ++b) {
            const uint32_t I = sub_ * td.subChunks / 2 + b;
            io_.Store(ws_.Get(KDA4_WS_A_QK, slot)[I * S * C + I * S], qkDiag_[b * S * S], S, S, C);
        }
    }
    // A_raw[i, k], k < i, read from its blocks: the diagonal block of sub-chunk I, or row block I of A_kk_off
    // ([16, I*16], Phase B's layout).
    __aicore__ inline float RawA(const LocalTensor<float>& off, const LocalTensor<float>& diag, uint32_t i,
                                 uint32_t k) const
    {
        const uint32_t S = td_->sub, I = i / S;
        if (k / S == I) return diag.GetValue(I * S * S + (i % S) * S + k % S);
        return off.GetValue(PairStart(I) * S * S + (i % S) * I * S + k);
    }

    // Phase E: V_pseudo = U - WS, this AIV's rows.
    __aicore__ inline void PhaseE(uint32_t slot)
    {
        const uint32_t ch = td_->chunk / 2, r0 = sub_ * ch, dv = td_->dv;
        io_.Load(calc_[0], ws_.Get(KDA4_WS_U, slot)[r0 * dv], ch, dv, dv);
        io_.Load(calc_[1], ws_.Get(KDA4_WS_WS, slot)[r0 * dv], ch, dv, dv);
        Sub(calc_[0], calc_[0], calc_[1], ch * dv);
        io_.Store(ws_.Get(KDA4_WS_V_PSEUDO, slot)[r0 * dv], calc_[0], ch, dv, dv);
    }

    // Phase G: O = O_inter + O_intra (this AIV's rows, to o); S_new = Diag(gamma_C) S_prev + S_delta in fp32, in
    // the simulator's tiles: td.gTiles slices of d_v, [d_k, w] each, split between the AIVs by rows (this AIV's
    // key channels, whose gamma_C it keeps), to the workspace (WriteState), or for the last chunk to ht.
    __aicore__ inline void PhaseG(uint32_t seq, uint32_t t, uint32_t slot, bool lastChunk)
    {
        const KdaChunkV4TilingData& td = *td_;
        const uint32_t ch = td.chunk / 2, r0 = sub_ * ch, dv = td.dv, dh = td.dk / 2, k0 = sub_ * dh;
        const uint32_t w = dv / td.gTiles, n = dh * w;
        io_.Load(calc_[0], ws_.Get(KDA4_WS_O_INTER, slot)[r0 * dv], ch, dv, dv);
        io_.Load(calc_[1], ws_.Get(KDA4_WS_O_INTRA, slot)[r0 * dv], ch, dv, dv);
        Add(calc_[0], calc_[0], calc_[1], ch * dv);
        io_.Store(oGm_[TokenOffset(seq, t, r0, dv)], calc_[0], ch, dv, td.heads * dv);
        const LocalTensor<float> gamma = gamma_[(t % 2) * dh];
        PipeFence<HardEvent::V_S>();                            // gamma_C (Phase A, vector) is read as scalars
        if (sub_ == 0) KDA_PHASE_RUN("G");
        // S in calc_[0] and S_delta in calc_[2]: a piece [d_k / 2, w] may take two neighbouring work tiles each (the
        // tiling checks it); WriteState's S_hi in calc_[4]
        const LocalTensor<float> st = calc_[0], delta = calc_[2];
        for (uint32_t c0 = 0; c0 < dv; c0 += w) {
            // both AIVs; S and S_delta in fp32, and where WriteState splits S, S_hi in T (S_lo reuses S_delta's)
            const bool split = !kFloatTransfers && td.stateParts == 2 && !lastChunk;
            if (sub_ == 0) KDA_TILE("G", 2ull * n * sizeof(float) + (split ? n * sizeof(T) : 0ull), td.dk, w);
            io_.Load(st, StateFp32()[uint64_t(k0) * dv + c0], dh, w, dv);
            io_.Load(delta, ws_.Get(KDA4_WS_S_DELTA, slot)[uint64_t(k0) * dv + c0], dh, w, dv);
            for (uint32_t j = 0; j < dh; ++j) Muls(st[j * w], st[j * w], gamma.GetValue(j), w);
            Add(st, st, delta, n);
            if (lastChunk) io_.Store(htGm_[uint64_t(seq) * td.dk * dv + uint64_t(k0) * dv + c0], st, dh, w, dv);
            else WriteState(k0, dh, c0, w, st);
        }
    }

    // The state for chunk 0: h0 (fp32, not rounded: the state is fp32) or zeros, this AIV's rows of S.
    __aicore__ inline void InitState(uint32_t seq)
    {
        const KdaChunkV4TilingData& td = *td_;
        const uint32_t dv = td.dv, dh = td.dk / 2, k0 = sub_ * dh;
        for (uint32_t r = 0; r < dh; r += td.stateTileRows) {
            const uint32_t n = dh - r < td.stateTileRows ? dh - r : td.stateTileRows, row = k0 + r;
            if (td.hasInitialState) io_.Load(calc_[0], h0Gm_[uint64_t(seq) * td.dk * dv + uint64_t(row) * dv], n, dv, dv);
            else Duplicate(calc_[0], 0.0f, n * dv);
            WriteState(row, n, 0, dv, calc_[0]);
        }
    }

    // The fp32 state between chunks: S itself with fp32 transfers, else the Vector's own S_fp32.
    __aicore__ inline GlobalTensor<float> StateFp32() const
    {
        return ws_.GetFloat(kFloatTransfers ? KDA4_WS_S : KDA4_WS_S_FP32);
    }
    // Rows row..row+n, columns col..col+w of the state s (fp32 tile [n, w]): the fp32 state for the next Phase G,
    // and S for the Cube (③): with bf16 transfers S_hi = bf16(s) and, with two parts, S_lo = bf16(s - S_hi) below it.
    __aicore__ inline void WriteState(uint32_t row, uint32_t n, uint32_t col, uint32_t w, const LocalTensor<float>& s)
    {
        const uint32_t dv = td_->dv;
        const uint64_t at = uint64_t(row) * dv + col;
        io_.Store(StateFp32()[at], s, n, w, dv);
        if constexpr (!kFloatTransfers) {
            const GlobalTensor<T> cubeState = ws_.Get(KDA4_WS_S, 0);
            io_.Store(cubeState[at], s, n, w, dv);                         // S_hi, rounded to T
            if (td_->stateParts == 2) {
                const LocalTensor<T> hi = calc_[4].template ReinterpretCast<T>();
                Cast(hi, s, RoundMode::CAST_RINT, n * w);
                Cast(calc_[2], hi, RoundMode::CAST_NONE, n * w);
                Sub(calc_[2], s, calc_[2], n * w);                          // what the rounding lost
                io_.Store(cubeState[uint64_t(td_->dk) * dv + at], calc_[2], n, w, dv);   // S_lo
            }
        }
    }

    const KdaChunkV4TilingData* td_ = nullptr;
    uint32_t sub_ = 0;
    Workspace<T> ws_;
    GlobalTensor<T> qGm_, kGm_;
    GlobalTensor<float> gGm_, betaGm_, h0Gm_, oGm_, htGm_;
    VecIo<BUFFER_NUM> io_;   // loads through a VECIN queue, stores through a VECOUT queue, BUFFER_NUM buffers each
    TBuf<TPosition::VECCALC> calcBuf_, gammaBuf_, betaBuf_, eyeBuf_, qkDiagBuf_, sumBuf_, partBuf_, workBuf_;
    LocalTensor<float> calc_[5], gamma_, beta_, eye_, qkDiag_, sums_, part_, work_;
};

template <typename T>
__aicore__ inline void Run(GM_ADDR q, GM_ADDR k, GM_ADDR v, GM_ADDR g, GM_ADDR beta, GM_ADDR h0, GM_ADDR o, GM_ADDR ht,
                           GM_ADDR user, const KdaChunkV4TilingData& td)
{
    if ASCEND_IS_AIC {
        TPipe pipe;
        KdaV4Cube<T> cube;
        cube.Init(v, user, td);
        REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), cube.mm, &td.mmTiling);
        cube.Process();
    }
    if ASCEND_IS_AIV {
        TPipe pipe;
        KdaV4Vec<T> vec;
        vec.Init(q, k, g, beta, h0, o, ht, user, td, &pipe);
        vec.Process();
    }
}

}  // namespace kda_v4

extern "C" __global__ __aicore__ void kda_chunk_v4(GM_ADDR q, GM_ADDR k, GM_ADDR v, GM_ADDR g, GM_ADDR beta,
                                                   GM_ADDR h0, GM_ADDR o, GM_ADDR ht, GM_ADDR workspace,
                                                   GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    REGISTER_TILING_DEFAULT(KdaChunkV4TilingData);
    GET_TILING_DATA_WITH_STRUCT(KdaChunkV4TilingData, tilingData, tiling);
    GM_ADDR user = AscendC::GetUserWorkspace(workspace);
    if (TILING_KEY_IS(KDA_TILING_KEY_FP32)) {
        kda_v4::Run<float>(q, k, v, g, beta, h0, o, ht, user, tilingData);
    } else if (TILING_KEY_IS(KDA_TILING_KEY_BF16)) {
        kda_v4::Run<bfloat16_t>(q, k, v, g, beta, h0, o, ht, user, tilingData);
    }
}
