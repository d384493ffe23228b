// Tiling pieces of the sub-chunk kernels (v5, v6): 16-wide sub-chunks with 4-wide micro-chunks inside them
// (kda/programs/v4.py's SUB, v5.py's MICRO), the workspace tensors both begin with (①, ② and the inverse), the
// Vector work tiles, the micro-diagonal sums and the two Matmul tilings. Each kernel's tiling header builds on it.
#pragma once
#include "kda_tiling_common.h"

#if !defined(__CCE_AICORE__)
constexpr uint32_t KDA_SUB = 16;     // sub-chunk width (v4.py's SUB)
constexpr uint32_t KDA_MICRO = 4;    // micro-chunk width inside a sub-chunk (v5.py's MICRO)

// The workspace tensors both kernels' enums begin with, in this order (see their tiling headers).
enum KdaIntraWsTensor : uint32_t {
    KDA_INTRA_K_LEFT, KDA_INTRA_Q_LEFT, KDA_INTRA_K_RIGHT, KDA_INTRA_K_LEFT4, KDA_INTRA_Q_LEFT4, KDA_INTRA_K_RIGHT4,
    KDA_INTRA_A_KK_OFF, KDA_INTRA_A_QK_OFF, KDA_INTRA_A_KK_OFF4, KDA_INTRA_A_QK_OFF4, KDA_INTRA_A_NEG,
    KDA_INTRA_D_BETA, KDA_INTRA_AINV, KDA_INTRA_ACC,
    KDA_INTRA_WS_COUNT
};

// The sub-chunk and micro-chunk counts and pairs, the state's parts (1 with fp32 transfers, else S_hi + S_lo for
// the Cube) and QA's columns (parts d_k + C).
template <class Tiling>
inline void KdaSubChunks(const KdaShape& s, Tiling& t)
{
    t.sub = KDA_SUB;
    t.subChunks = s.chunk / KDA_SUB;               // even: C is a multiple of 32 (KdaCheckShape)
    t.pairs = t.subChunks * (t.subChunks - 1) / 2;
    t.micro = KDA_MICRO;
    t.micros = KDA_SUB / KDA_MICRO;
    t.pairs4 = t.micros * (t.micros - 1) / 2;
    t.stateParts = s.transferBytes == 4 ? 1 : 2;
    t.qaCols = t.stateParts * s.dk + s.chunk;
}

// Elements of workspace tensor i < KDA_INTRA_WS_COUNT.
template <class Tiling>
inline uint64_t KdaIntraWsElems(const Tiling& t, uint32_t i)
{
    const uint64_t C = t.chunk, dk = t.dk, S = t.sub, s = t.micro, n = t.subChunks;
    switch (i) {
        case KDA_INTRA_K_LEFT: case KDA_INTRA_Q_LEFT: return (n - 1) * S * dk;
        case KDA_INTRA_K_RIGHT: return t.pairs * S * dk;
        case KDA_INTRA_K_LEFT4: case KDA_INTRA_Q_LEFT4: return n * (t.micros - 1) * s * dk;
        case KDA_INTRA_K_RIGHT4: return n * t.pairs4 * s * dk;
        case KDA_INTRA_A_KK_OFF: case KDA_INTRA_A_QK_OFF: return t.pairs * S * S;
        case KDA_INTRA_A_KK_OFF4: case KDA_INTRA_A_QK_OFF4: return n * t.pairs4 * s * s;
        case KDA_INTRA_A_NEG: case KDA_INTRA_D_BETA: return C * C;
        case KDA_INTRA_AINV: return n * (n + 1) / 2 * S * S;
        default: return S * S;   // acc
    }
}

// fp32 elements of each Vector work tile: Phase A on this AIV's key channels [C, d_k / 2]; the rows of A of one
// sub-chunk [16, C]; the micro-diagonal tiles [16, d_k]; E and G [C / 2, d_v]; the off-diagonal blocks.
template <class Tiling>
inline uint32_t KdaSubChunkCalcElems(const KdaShape& s, const Tiling& t)
{
    const uint32_t C = s.chunk, S = t.sub;
    uint32_t calc = C * (s.dk / 2);
    const uint32_t needs[] = {S * C, S * s.dk, C / 2 * s.dv, C * (s.dv / 2), t.pairs * S * S,
                              t.subChunks * t.pairs4 * KDA_MICRO * KDA_MICRO};
    for (uint32_t n : needs) calc = n > calc ? n : calc;
    return calc;
}

// fp32 values of the micro-diagonal sums on one AIV: kk and qk, one per (i, j <= i) of a 4 x 4 block, 32 bytes
// apart, for this AIV's micro-chunks, over every key-channel tile, and one sub-chunk's part of one tile.
template <class Tiling>
inline uint64_t KdaMicroSums(const Tiling& t)
{
    const uint64_t microsPerAiv = uint64_t(t.subChunks / 2) * t.micros;
    return 2 * (microsPerAiv + t.micros) * (KDA_MICRO * (KDA_MICRO + 1) / 2) * 8;
}

// The two Matmul tilings, for the largest matmul: O's K = parts d_k + C (the others are at most max(C, parts d_k,
// d_v) in every dimension); F2 one call per d_v / f2Tiles columns of O.
template <class Tiling>
inline void KdaSubChunkMatmuls(const KdaShape& s, Tiling& t, uint32_t f2Tiles)
{
    const uint32_t big = s.dv > t.qaCols ? s.dv : t.qaCols;
    KdaFillMatmulTiling(t.mmTiling, big, s.transferBytes);
    KdaFillMatmulTiling(t.mmTilingOut, big, s.transferBytes);
    KdaCutMatmulTilingN(t.mmTilingOut, s.dv / f2Tiles);
}
#endif
