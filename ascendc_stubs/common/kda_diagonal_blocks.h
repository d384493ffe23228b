// The sub-chunk blocks of a chunk's A_kk and A_qk (kda_chunk_v4, v5, v6): where each block lies, and, for the
// kernels with 4-wide micro-chunks inside the 16-wide sub-chunks (v5, v6), their Vector side's Phase A factors
// and Phase C.
// A kernel's Vector class derives from DiagonalBlocks<the class, T, its names> and makes it a friend; the names
// are its workspace tensors K_LEFT, Q_LEFT, K_RIGHT, K_LEFT4, Q_LEFT4, K_RIGHT4, A_KK_OFF, A_KK_OFF4, A_QK_OFF,
// A_QK_OFF4, A_NEG and D_BETA. The class holds td_, sub_, ws_ (with AinvCol), io_, calc_[5], kGm_, qGm_, beta_,
// betaGm_, sums_, qkSums_, Tok() and Cumsum().
#pragma once
#include "kernel_operator.h"
#include "kda_kernel_io.h"
#include "kda_sync.h"

namespace kda {
using namespace AscendC;

// First pair (I, 0) of row block I among the pairs I > J in row order: (1,0), (2,0), (2,1), (3,0), ...
__aicore__ inline uint32_t PairStart(uint32_t I) { return I * (I - 1) / 2; }
// Where Phase A's ReduceSum leaves entry (i, j <= i) of a diagonal block: 8 floats (32 bytes, an aligned
// operand) apart.
__aicore__ inline uint32_t SumSlot(uint32_t i, uint32_t j) { return (i * (i + 1) / 2 + j) * 8; }

template <typename Vec, typename T, typename Names>
class DiagonalBlocks {
protected:
    // Phase A, factors, this AIV's key channels c0..c0+d_k/2 of every row (gc decreases: every exponent <= 0), gc
    // and scale Q into `gc` and `qs`. 16-wide: K_left, Q_left = K, scale Q of sub-chunks 1..n-1 times
    // exp(gc - r_I); K_right per pair (I, J): K_J exp(r_I - gc_J) (for one I, rows 0..16 I). 4-wide, inside each
    // sub-chunk I: K_left4, Q_left4 of micro-chunks 1..3 times exp(gc - r_{I,a}); K_right4 per pair (a, b):
    // K_{I,b} exp(r_{I,a} - gc_{I,b}).
    __aicore__ inline void Factors(uint32_t seq, uint32_t t, const LocalTensor<float>& gc, const LocalTensor<float>& qs)
    {
        Vec& v = Self();
        const auto& td = *v.td_;
        const uint32_t C = td.chunk, S = td.sub, s = td.micro, dk = td.dk, dh = dk / 2, c0 = v.sub_ * dh;
        const uint32_t m1 = td.micros - 1, P4 = td.pairs4;
        LocalTensor<float> kf = v.calc_[1], fac = v.calc_[3], x = v.calc_[4];
        v.Cumsum(gc, seq, t, c0, dh, 0, C);
        v.io_.Load(kf, v.kGm_[v.Tok(seq, t, 0, dk) + c0], C, dh, td.heads * dk);
        v.io_.Load(qs, v.qGm_[v.Tok(seq, t, 0, dk) + c0], C, dh, td.heads * dk);
        Muls(qs, qs, td.scale, C * dh);
        for (uint32_t i = S; i < C; ++i) Sub(fac[(i - S) * dh], gc[i * dh], gc[(i / S) * S * dh], dh);
        Exp(fac, fac, (C - S) * dh);
        Mul(x, kf[S * dh], fac, (C - S) * dh);
        v.io_.Store(v.ws_.Get(Names::K_LEFT)[c0], x, C - S, dh, dk);
        Mul(x, qs[S * dh], fac, (C - S) * dh);
        v.io_.Store(v.ws_.Get(Names::Q_LEFT)[c0], x, C - S, dh, dk);
        for (uint32_t I = 1; I < td.subChunks; ++I) {
            for (uint32_t j = 0; j < I * S; ++j) Sub(fac[j * dh], gc[I * S * dh], gc[j * dh], dh);
            Exp(fac, fac, I * S * dh);
            Mul(x, kf, fac, I * S * dh);
            v.io_.Store(v.ws_.Get(Names::K_RIGHT)[PairStart(I) * S * dk + c0], x, I * S, dh, dk);
        }
        // 4-wide left operands: rows I*16 + 4..16 of each sub-chunk, in order (I, a = 1..3, row)
        for (uint32_t I = 0; I < td.subChunks; ++I)
            for (uint32_t r = s; r < S; ++r)
                Sub(fac[(I * m1 * s + r - s) * dh], gc[(I * S + r) * dh], gc[(I * S + r / s * s) * dh], dh);
        Exp(fac, fac, td.subChunks * m1 * s * dh);
        for (uint32_t I = 0; I < td.subChunks; ++I)
            Mul(x[I * m1 * s * dh], kf[(I * S + s) * dh], fac[I * m1 * s * dh], m1 * s * dh);
        v.io_.Store(v.ws_.Get(Names::K_LEFT4)[c0], x, td.subChunks * m1 * s, dh, dk);
        for (uint32_t I = 0; I < td.subChunks; ++I)
            Mul(x[I * m1 * s * dh], qs[(I * S + s) * dh], fac[I * m1 * s * dh], m1 * s * dh);
        v.io_.Store(v.ws_.Get(Names::Q_LEFT4)[c0], x, td.subChunks * m1 * s, dh, dk);
        // 4-wide right operands, per sub-chunk I: for a = 1..3 the pairs (a, 0..a-1) take rows 0..4a of I
        for (uint32_t I = 0; I < td.subChunks; ++I) {
            for (uint32_t a = 1; a < td.micros; ++a)
                for (uint32_t j = 0; j < a * s; ++j)
                    Sub(fac[(PairStart(a) * s + j) * dh], gc[(I * S + a * s) * dh], gc[(I * S + j) * dh], dh);
            Exp(fac, fac, P4 * s * dh);
            for (uint32_t a = 1; a < td.micros; ++a)
                Mul(x[PairStart(a) * s * dh], kf[I * S * dh], fac[PairStart(a) * s * dh], a * s * dh);
            v.io_.Store(v.ws_.Get(Names::K_RIGHT4)[I * P4 * s * dk + c0], x, P4 * s, dh, dk);
        }
    }

    // Phase C, rows of this AIV's sub-chunks: A_kk = StrictTril(assembled K K^T) * beta[:, None] and A_qk =
    // tril(assembled Q K^T), from the micro-diagonal sums (UB), the 4-wide blocks (A_*_off4) and the 16-wide
    // blocks (A_*_off) of ②. Then A_neg = -A_kk and D_beta = Diag(beta), the inverse Ai_diag of the diagonal
    // block (forward substitution, (I + A)^-1), and A_qk into the rows of `qa` after the state's columns.
    __aicore__ inline void PhaseC(uint32_t seq, uint32_t t, const GlobalTensor<T>& qa)
    {
        Vec& v = Self();
        const auto& td = *v.td_;
        const uint32_t C = td.chunk, S = td.sub, half = td.subChunks / 2;
        const uint32_t offElems = td.pairs * S * S, off4Elems = td.subChunks * td.pairs4 * td.micro * td.micro;
        LocalTensor<float> off = v.calc_[0], off4 = v.calc_[1], a = v.calc_[2], r = v.calc_[3], tmp = v.calc_[4];
        v.io_.Load(off, v.ws_.Get(Names::A_KK_OFF), 1, offElems, offElems);
        v.io_.Load(off4, v.ws_.Get(Names::A_KK_OFF4), 1, off4Elems, off4Elems);
        PipeFence<HardEvent::V_S>();                  // the blocks, and beta_ (last read by vector ops), as scalars
        for (uint32_t i = 0; i < C; ++i) v.beta_.SetValue(i, v.betaGm_.GetValue(v.Tok(seq, t, i, 1)));
        for (uint32_t b = 0; b < half; ++b) {
            const uint32_t I = v.sub_ * half + b;
            Assemble(a, off, off4, v.sums_, b, I, true);
            PipeFence<HardEvent::S_V>();
            Muls(tmp, a, -1.0f, S * C);
            v.io_.Store(v.ws_.Get(Names::A_NEG)[I * S * C], tmp, S, C, C);
            InverseOfDiagonalBlock(r, a, tmp, I);
            v.io_.Store(v.ws_.AinvCol(I), r, S, S, S);
            Duplicate(tmp, 0.0f, S * C);
            PipeFence<HardEvent::V_S>();
            for (uint32_t i = 0; i < S; ++i) tmp.SetValue(i * C + I * S + i, v.beta_.GetValue(I * S + i));
            PipeFence<HardEvent::S_V>();
            v.io_.Store(v.ws_.Get(Names::D_BETA)[I * S * C], tmp, S, C, C);
        }
        v.io_.Load(off, v.ws_.Get(Names::A_QK_OFF), 1, offElems, offElems);
        v.io_.Load(off4, v.ws_.Get(Names::A_QK_OFF4), 1, off4Elems, off4Elems);
        PipeFence<HardEvent::V_S>();
        for (uint32_t b = 0; b < half; ++b) {
            const uint32_t I = v.sub_ * half + b;
            Assemble(a, off, off4, v.qkSums_, b, I, false);
            PipeFence<HardEvent::S_V>();
            v.io_.Store(qa[I * S * td.qaCols + td.stateParts * td.dk], a, S, C, td.qaCols);
        }
    }
    // Rows I*16 .. I*16+16 of A_kk (kk: strictly lower, times beta) or A_qk (lower, diagonal included), [16, C].
    __aicore__ inline void Assemble(const LocalTensor<float>& a, const LocalTensor<float>& off,
                                    const LocalTensor<float>& off4, const LocalTensor<float>& sums, uint32_t b,
                                    uint32_t I, bool kk)
    {
        Vec& v = Self();
        const auto& td = *v.td_;
        const uint32_t C = td.chunk, S = td.sub, s = td.micro, perBlock = s * (s + 1) / 2 * 8;
        PipeFence<HardEvent::V_S>();                   // `a` was last read by vector instructions (a store)
        for (uint32_t i = 0; i < S; ++i) {
            const uint32_t gi = I * S + i, am = i / s;
            const float scale = kk ? v.beta_.GetValue(gi) : 1.0f;
            for (uint32_t c = 0; c < C; ++c) {
                float x = 0.0f;
                if (c < gi || (!kk && c == gi)) {
                    if (c / S < I) {                                       // a 16-wide block left of the diagonal
                        x = off.GetValue(PairStart(I) * S * S + i * I * S + c);
                    } else if ((c % S) / s < am) {                         // a 4-wide block inside sub-chunk I
                        x = off4.GetValue((I * td.pairs4 + PairStart(am)) * s * s + (i % s) * am * s + c % S);
                    } else {                                               // the micro-diagonal block
                        x = sums.GetValue((b * td.micros + am) * perBlock + SumSlot(i % s, c % s));
                    }
                }
                a.SetValue(i * C + c, x * scale);
            }
        }
    }
    // (I + A)^-1 of the strictly lower diagonal block of A (rows I*16.., in `a` [16, C]) by forward substitution,
    // row by row: R[i, :] = e_i - sum_{k<i} A[i, k] R[k, :] (16-wide vector rows).
    __aicore__ inline void InverseOfDiagonalBlock(const LocalTensor<float>& r, const LocalTensor<float>& a,
                                                  const LocalTensor<float>& tmp, uint32_t I)
    {
        const auto& td = *Self().td_;
        const uint32_t S = td.sub, C = td.chunk;
        Duplicate(r, 0.0f, S * S);
        PipeFence<HardEvent::V_S>();
        for (uint32_t i = 0; i < S; ++i) r.SetValue(i * S + i, 1.0f);
        PipeFence<HardEvent::S_V>();
        for (uint32_t i = 1; i < S; ++i) {
            for (uint32_t k = 0; k < i; ++k) {
                Muls(tmp, r[k * S], a.GetValue(i * C + I * S + k), S);
                Sub(r[i * S], r[i * S], tmp, S);
            }
        }
    }

private:
    __aicore__ inline Vec& Self() { return *static_cast<Vec*>(this); }
};

}  // namespace kda
