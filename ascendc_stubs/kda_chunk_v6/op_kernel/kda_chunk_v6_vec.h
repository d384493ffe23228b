// kda_chunk_v6's Vector side (both AIVs of a core): Phases A, C, E and G. See kda_chunk_v6.cpp for the design,
// the flags and the split between the AIVs.
#pragma once
#include "kda_chunk_v6_common.h"
#include "kda_diagonal_blocks.h"
#include "kda_state_walk.h"

namespace kda_v6 {
using namespace AscendC;
using namespace kda;

// The workspace tensors of this kernel's Phase C (kda_diagonal_blocks.h) and state walk (kda_state_walk.h), and its
// Phase G's name.
struct V6Names {
    static constexpr uint32_t U = KDA6_U, WS = KDA6_WS, S_DELTA = KDA6_S_DELTA, S_FP32 = KDA6_S_FP32;
    static constexpr uint32_t K_LEFT = KDA6_K_LEFT, Q_LEFT = KDA6_Q_LEFT, K_RIGHT = KDA6_K_RIGHT,
                              K_LEFT4 = KDA6_K_LEFT4, Q_LEFT4 = KDA6_Q_LEFT4, K_RIGHT4 = KDA6_K_RIGHT4;
    static constexpr uint32_t A_KK_OFF = KDA6_A_KK_OFF, A_KK_OFF4 = KDA6_A_KK_OFF4, A_QK_OFF = KDA6_A_QK_OFF,
                              A_QK_OFF4 = KDA6_A_QK_OFF4, A_NEG = KDA6_A_NEG, D_BETA = KDA6_D_BETA;
    static constexpr const char* PHASE_G = "G";
};

template <typename T>
class KdaV6Vec : public StateWalk<KdaV6Vec<T>, T, V6Names>, public DiagonalBlocks<KdaV6Vec<T>, T, V6Names> {
    friend class StateWalk<KdaV6Vec<T>, T, V6Names>;
    friend class DiagonalBlocks<KdaV6Vec<T>, T, V6Names>;

public:
    static constexpr int BUFFER_NUM = 2;
    static constexpr bool kFloatTransfers = sizeof(T) == sizeof(float);

    __aicore__ inline void Init(GM_ADDR q, GM_ADDR k, GM_ADDR g, GM_ADDR beta, GM_ADDR h0, GM_ADDR ht, GM_ADDR user,
                                const KdaChunkV6TilingData& td, TPipe* pipe)
    {
        td_ = &td;
        sub_ = static_cast<uint32_t>(GetSubBlockIdx());
        ws_.Init(user, td, static_cast<uint32_t>(GetBlockIdx() / GetSubBlockNum()));
        qGm_.SetGlobalBuffer((__gm__ T*)q);
        kGm_.SetGlobalBuffer((__gm__ T*)k);
        gGm_.SetGlobalBuffer((__gm__ float*)g);
        betaGm_.SetGlobalBuffer((__gm__ float*)beta);
        h0Gm_.SetGlobalBuffer((__gm__ float*)h0);
        htGm_.SetGlobalBuffer((__gm__ float*)ht);
        const uint32_t tileBytes = td.calcElems * sizeof(float);
        const uint32_t half = td.chunk * (td.dk / 2);
        io_.Init(pipe, tileBytes);
        // five work tiles in one buffer: Phase G takes two neighbours as one tile where the plan's piece is larger
        pipe->InitBuffer(calcBuf_, 5 * tileBytes);
        pipe->InitBuffer(keptBuf_, 2 * half * sizeof(float));            // gc and scale Q, kept from A for C
        pipe->InitBuffer(gammaBuf_, 2 * td.dk / 2 * sizeof(float));      // two chunks' gamma_C
        pipe->InitBuffer(betaBuf_, td.chunk * sizeof(float));
        const uint32_t microsHere = td.subChunks / 2 * td.micros, perBlock = td.micro * (td.micro + 1) / 2 * 8;
        pipe->InitBuffer(sumBuf_, 2 * microsHere * perBlock * sizeof(float));
        pipe->InitBuffer(partBuf_, 2 * td.micros * perBlock * sizeof(float));   // one sub-chunk's, one tile
        pipe->InitBuffer(workBuf_, ((td.dk + 63) / 64 + 7) / 8 * 8 * sizeof(float));
        for (uint32_t i = 0; i < 5; ++i) calc_[i] = calcBuf_.template Get<float>()[i * td.calcElems];
        gc_ = keptBuf_.template Get<float>();
        qs_ = gc_[half];
        gamma_ = gammaBuf_.template Get<float>();
        beta_ = betaBuf_.template Get<float>();
        sums_ = sumBuf_.template Get<float>();
        qkSums_ = sums_[microsHere * perBlock];
        part_ = partBuf_.template Get<float>();
        Duplicate(part_, 0.0f, 2 * td.micros * perBlock);   // ReduceSum writes one float per 32 bytes
        work_ = workBuf_.template Get<float>();
    }

    // Per sequence of this core, its chunks in order, one chunk ahead: A and C of chunk t+1 (which need no state)
    // run before G of chunk t, so that the Cube's B and D1 of chunk t+1 run beside G, and only D2 waits for the state.
    __aicore__ inline void Process()
    {
        const KdaChunkV6TilingData& td = *td_;
        const uint32_t core = static_cast<uint32_t>(GetBlockIdx() / GetSubBlockNum());
        uint32_t step = 0;                 // this core's chunks so far: copy step % 2 (SV, gamma_C)
        for (uint32_t seq = core; seq < td.sequences; seq += GetBlockNum()) {
            Intra(seq, 0, step % 2);       // A set① wait② C set③ of the first chunk
            this->InitState(seq, step % 2);      // S := h0
            Set<0, PIPE_MTE3>();           // S, on its own hand-off
            for (uint32_t t = 0; t < td.numChunks; ++t, ++step) {
                const uint32_t buf = step % 2;
                const bool last = t + 1 == td.numChunks;
                Wait<4>();                 // ④ U, WS
                this->PhaseE(buf);
                Set<5, PIPE_MTE3>();       // ⑤ V_pseudo
                if (!last) Intra(seq, t + 1, buf ^ 1u);   // chunk t+1's A and C, before this chunk's state
                Wait<6>();                 // ⑥ S_delta
                this->PhaseG(seq, buf, last);    // the state of chunk t+1 into the other SV copy, or ht
                if (!last) Set<0, PIPE_MTE3>();   // S
            }
        }
    }

private:
    __aicore__ inline uint64_t Tok(uint32_t seq, uint32_t t, uint32_t row, uint32_t width) const
    {
        return TokenOffset(*td_, seq, t, row, width);
    }
    // A set① wait② C set③ of chunk t; C's gamma_C into copy `buf`.
    __aicore__ inline void Intra(uint32_t seq, uint32_t t, uint32_t buf)
    {
        this->Factors(seq, t, gc_, qs_);   // Phase A, factors; gc and scale Q stay in UB for C (v6.py keeps them)
        MicroDiagonal(seq, t);
        Set<1, PIPE_MTE3>();      // ① K_left, Q_left, K_right, K_left4, Q_left4, K_right4
        Wait<2>();                // ② the off-diagonal blocks
        this->PhaseC(seq, t, ws_.Get(KDA6_QA));
        Scaled(seq, t, buf);
        Set<3, PIPE_MTE3>();      // ③ Ai_diag, A_neg, D_beta, A_qk, K_scaled, Q_scaled, K_decay
    }
    // gc = cumsum(g) over the chunk's rows, this AIV's key channels (log gates, or alpha: Ln first).
    __aicore__ inline void Cumsum(const LocalTensor<float>& gc, uint32_t seq, uint32_t t, uint32_t c0, uint32_t width,
                                  uint32_t row0, uint32_t rows)
    {
        const KdaChunkV6TilingData& td = *td_;
        io_.Load(gc, gGm_[Tok(seq, t, row0, td.dk) + c0], rows, width, td.heads * td.dk);
        if (!td.gateIsLog) Ln(gc, gc, rows * width);
        for (uint32_t i = 1; i < rows; ++i) Add(gc[i * width], gc[i * width], gc[(i - 1) * width], width);
    }

    // Phase A, the 4 x 4 micro-diagonal blocks of this AIV's sub-chunks, pair by pair (FLA's diagonal path):
    // kk[i, j] = sum_d K_i K_j exp(gc_i - gc_j), qk[i, j] = sum_d scale Q_i K_j exp(..), j <= i. The simulator's
    // tiles: td.aTiles key-channel slices (td.aWidth each, the last the rest), each the products of every
    // sub-chunk's m micro-chunks x 10 pairs ([n, m, 10, w]), split between the AIVs by sub-chunk (AIV s takes
    // [s n/2, (s+1) n/2): the sums it keeps are those its Phase C needs). Per slice and sub-chunk, one ReduceSum
    // per entry into the slice's part; the parts add up in UB (32 bytes apart) for Phase C.
    __aicore__ inline void MicroDiagonal(uint32_t seq, uint32_t t)
    {
        const KdaChunkV6TilingData& td = *td_;
        const uint32_t S = td.sub, s = td.micro, dk = td.dk, half = td.subChunks / 2, perBlock = s * (s + 1) / 2 * 8;
        const uint32_t perSub = td.micros * perBlock;   // one sub-chunk's kk (or qk) sums
        LocalTensor<float> gl = calc_[0], kf = calc_[1], qf = calc_[2], e = calc_[3], x = calc_[4];
        if (sub_ == 0) KDA_PHASE_RUN("A");
        Duplicate(sums_, 0.0f, 2 * half * perSub);
        for (uint32_t c0 = 0; c0 < dk; c0 += td.aWidth) {
            const uint32_t w = dk - c0 < td.aWidth ? dk - c0 : td.aWidth;
            // one tile, both AIVs together (recorded at the plan's widest): g, K, Q [16, w] and e, x [4, w] per
            // sub-chunk, the sums and a part
            if (sub_ == 0)
                KDA_TILE("A", ((3ull * S + 2ull * s) * td.aWidth + 2ull * (half + 1) * perSub) * sizeof(float),
                         td.subChunks, td.micros, s * (s + 1) / 2, td.aWidth);
            for (uint32_t b = 0; b < half; ++b) {
                const uint32_t I = sub_ * half + b;
                Cumsum(gl, seq, t, c0, w, I * S, S);  // restarted at the sub-chunk: only differences are used
                io_.Load(kf, kGm_[Tok(seq, t, I * S, dk) + c0], S, w, td.heads * dk);
                io_.Load(qf, qGm_[Tok(seq, t, I * S, dk) + c0], S, w, td.heads * dk);
                Muls(qf, qf, td.scale, S * w);
                for (uint32_t a = 0; a < td.micros; ++a) {
                    const uint32_t r0 = a * s, mb = a * perBlock;
                    for (uint32_t j = 0; j < s; ++j) {
                        const uint32_t rows = s - j;      // i = j .. s-1
                        for (uint32_t i = j; i < s; ++i) Sub(e[(i - j) * w], gl[(r0 + i) * w], gl[(r0 + j) * w], w);
                        Exp(e, e, rows * w);
                        for (uint32_t i = j; i < s; ++i) Mul(e[(i - j) * w], e[(i - j) * w], kf[(r0 + j) * w], w);
                        Mul(x, e, kf[(r0 + j) * w], rows * w);
                        for (uint32_t i = j; i < s; ++i) ReduceSum(part_[mb + SumSlot(i, j)], x[(i - j) * w], work_, w);
                        Mul(x, e, qf[(r0 + j) * w], rows * w);
                        for (uint32_t i = j; i < s; ++i)
                            ReduceSum(part_[perSub + mb + SumSlot(i, j)], x[(i - j) * w], work_, w);
                    }
                }
                Add(sums_[b * perSub], sums_[b * perSub], part_, perSub);               // the gaps are 0
                Add(qkSums_[b * perSub], qkSums_[b * perSub], part_[perSub], perSub);
            }
        }
    }
    // Phase C, the state pass's operands on this AIV's key channels, from Phase A's gc and scale Q (kept in UB):
    // K_scaled = K e^gc, Q_scaled = scale Q e^gc (into QA, once per part of the state), K_decay = K e^(gc_C - gc)
    // and gamma_C = e^gc_C (kept for G) into copy `buf`. One [C, d_k / 2] piece per AIV (the plan: one tile).
    __aicore__ inline void Scaled(uint32_t seq, uint32_t t, uint32_t buf)
    {
        const KdaChunkV6TilingData& td = *td_;
        const uint32_t C = td.chunk, dk = td.dk, dh = dk / 2, c0 = sub_ * dh, n = C * dh, last = (C - 1) * dh;
        LocalTensor<float> kf = calc_[1], fac = calc_[3], x = calc_[4];
        Exp(gamma_[buf * dh], gc_[last], dh);
        io_.Load(kf, kGm_[Tok(seq, t, 0, dk) + c0], C, dh, td.heads * dk);
        Exp(fac, gc_, n);
        Mul(x, kf, fac, n);
        io_.Store(ws_.Get(KDA6_K_SCALED)[c0], x, C, dh, dk);
        Mul(x, qs_, fac, n);
        for (uint32_t part = 0; part < td.stateParts; ++part)
            io_.Store(ws_.Get(KDA6_QA)[part * dk + c0], x, C, dh, td.qaCols);
        for (uint32_t i = 0; i < C; ++i) Sub(fac[i * dh], gc_[last], gc_[i * dh], dh);
        Exp(fac, fac, n);
        Mul(x, kf, fac, n);
        io_.Store(ws_.Get(KDA6_K_DECAY)[c0], x, C, dh, dk);
    }

    const KdaChunkV6TilingData* td_ = nullptr;
    uint32_t sub_ = 0;
    Ws<T> ws_;
    GlobalTensor<T> qGm_, kGm_;
    GlobalTensor<float> gGm_, betaGm_, h0Gm_, htGm_;
    VecIo<BUFFER_NUM> io_;
    TBuf<TPosition::VECCALC> calcBuf_, keptBuf_, gammaBuf_, betaBuf_, sumBuf_, partBuf_, workBuf_;
    LocalTensor<float> calc_[5], gc_, qs_, gamma_, beta_, sums_, qkSums_, part_, work_;
};

}  // namespace kda_v6
