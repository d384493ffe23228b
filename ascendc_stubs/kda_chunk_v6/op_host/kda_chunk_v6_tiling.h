// Tiling of kda_chunk_v6 (kda/programs/v6.py): one plain struct (GET_TILING_DATA_WITH_STRUCT) and the host
// function that fills it, shared by the CANN TilingFunc (op_host/kda_chunk_v6.cpp) and the host emulation.
//
// GM layouts as kda_chunk_v3/v4/v5 (FLA's): q, k, g [B, T, H, d_k]; v [B, T, H, d_v]; beta [B, T, H];
// h0, ht [B, H, d_k, d_v]; o [B, T, H, d_v]. q, k, v in the transfer type (fp32, bf16 or fp16); g, beta, h0, o,
// ht in fp32. One pass: sequence s on AI core s % blockDim, its chunks in order.
#pragma once
#include "kda_subchunk_tiling.h"


// Per-core workspace, one copy of each tensor (the flags order every overwrite after the last read, see the
// kernel), but two of SV, which G of chunk t writes while F2 of chunk t reads the other.
// n = C / 16 sub-chunks, P = n (n - 1) / 2 pairs of them; m = 16 / 4 micro-chunks per sub-chunk, P4 = m (m - 1) / 2.
//   ① K_left, Q_left [(n-1) 16, d_k]; K_right [P 16, d_k]; K_left4, Q_left4 [n (m-1) 4, d_k]; K_right4 [n P4 4, d_k]
//   ② A_kk_off, A_qk_off [P 16 16] (per I >= 1 a [16, 16 I] block row); A_kk_off4, A_qk_off4 [n P4 4 4]
//   ③ A_neg, D_beta [C, C]; the inverse by block columns: column j = Ai_diag[j] [16, 16] (the Vector's, ③) over
//     A_inv's blocks below it (the Cube's own); K_scaled [C, d_k]; K_decay [C, d_k];
//     QA = [Q_scaled | A_qk] [C, parts d_k + C] per row: Q_scaled (parts copies) then A_qk
//   the Cube's own: acc [16, 16], M [C, C] (lower block triangle only), W [C, parts d_k]
//   ④ U, WS [C, d_v]   ⑤ V_pseudo: in SV   ⑥ S_delta [d_k, d_v]
//   SV = [S ; V_pseudo]: S [parts d_k, d_v] (S_hi over S_lo with 2-byte transfers) over V_pseudo [C, d_v], twice
//     (svBytes apart)
//   S_fp32 [d_k, d_v] fp32 (the Vector's own state, 2-byte transfers only)
enum KdaV6WsTensor : uint32_t {
    KDA6_K_LEFT, KDA6_Q_LEFT, KDA6_K_RIGHT, KDA6_K_LEFT4, KDA6_Q_LEFT4, KDA6_K_RIGHT4,
    KDA6_A_KK_OFF, KDA6_A_QK_OFF, KDA6_A_KK_OFF4, KDA6_A_QK_OFF4, KDA6_A_NEG, KDA6_D_BETA, KDA6_AINV, KDA6_ACC,
    KDA6_M, KDA6_K_SCALED, KDA6_K_DECAY, KDA6_QA, KDA6_W, KDA6_U, KDA6_WS, KDA6_SV, KDA6_S_DELTA, KDA6_S_FP32,
    KDA6_WS_COUNT
};
static_assert(uint32_t(KDA6_ACC) == uint32_t(KDA_INTRA_ACC), "the workspace begins with the intra tensors (kda_subchunk_tiling.h)");

struct KdaChunkV6TilingData {
    uint32_t batch, seqLen, heads, dk, dv, chunk;
    uint32_t numChunks;            // seqLen / chunk
    uint32_t sequences;            // batch * heads
    uint32_t blockDim;             // AI cores used
    uint32_t transferBytes;        // 4 (fp32) or 2 (bf16, fp16)
    uint32_t hasInitialState, gateIsLog;
    uint32_t slots;                // 1: no workspace slots (the runner's --slots does not apply)
    uint32_t sub, subChunks, pairs;        // 16, n, P
    uint32_t micro, micros, pairs4;        // 4, m = 16 / 4, P4
    uint32_t stateParts;           // 1 (fp32), 2 (16-bit: the fp32 state as S_hi + S_lo for the Cube)
    uint32_t qaCols;               // parts d_k + C
    uint32_t calcElems;            // fp32 elements of each Vector work tile
    uint32_t stateTileRows;        // rows of S per tile of S := h0
    uint32_t aTiles;               // Phase A, the micro-diagonal blocks: tiles of the key channels per chunk, each
                                   // [n, m, 10, aWidth] products split between the AIVs by sub-chunk (the last tile
                                   // takes the rest of d_k; the simulator's plan, bridge.tiles_option)
    uint32_t aWidth;               // key channels of each Phase A tile but the last
    uint32_t gTiles;               // Phase G: tiles of S along d_v per chunk, [d_k, d_v / gTiles] each, split
                                   // between the AIVs by rows (the simulator's plan)
    uint32_t f2Tiles;              // Phase F2: O's columns per chunk in f2Tiles Matmul calls of
                                   // mmTilingOut.singleCoreN = d_v / f2Tiles each (the simulator's plan)
    uint32_t ubBytes;              // UB the Vector side allocates
    float scale;
    uint64_t svBytes;              // one copy of SV (there are two)
    uint64_t wsCoreBytes;          // per-core workspace
    uint64_t wsOffset[KDA6_WS_COUNT];
    TCubeTiling mmTiling;          // Matmul object 1: C in the transfer type
    TCubeTiling mmTilingOut;       // Matmul object 2: C in fp32 (O straight to the output)
};

#if !defined(__CCE_AICORE__)
inline uint64_t KdaV6WsElems(const KdaChunkV6TilingData& t, uint32_t i)
{
    if (i < KDA_INTRA_WS_COUNT) return KdaIntraWsElems(t, i);
    const uint64_t C = t.chunk, dk = t.dk, dv = t.dv, parts = t.stateParts;
    switch (i) {
        case KDA6_M: return C * C;
        case KDA6_K_SCALED: case KDA6_K_DECAY: return C * dk;
        case KDA6_QA: return C * t.qaCols;
        case KDA6_W: return C * parts * dk;
        case KDA6_SV: return 2 * t.svBytes / t.transferBytes;   // two copies
        case KDA6_S_DELTA: return dk * dv;
        case KDA6_S_FP32: return t.transferBytes == 4 ? 0 : dk * dv;
        default: return C * dv;    // U, WS
    }
}
inline uint32_t KdaV6WsElemBytes(const KdaChunkV6TilingData& t, uint32_t i)
{
    return i == KDA6_S_FP32 ? 4 : t.transferBytes;
}

// Phase A's key-channel tiles: n tiles of w channels, w = ceil(d_k / n) rounded up to whole 32-byte rows of both
// the transfer type and fp32 (16 channels with 2-byte transfers, 8 with fp32), the last tile the rest. The
// simulator's plan may ask for a count that does not divide d_k (3 of 128: 48 + 48 + 32 here). 0 where n such
// tiles do not cover d_k exactly n times (n = 16 of 128 with 2-byte transfers: 8 tiles of 16 would do).
inline uint32_t KdaV6AWidth(const KdaShape& s, uint32_t n)
{
    if (n == 0 || n > s.dk) return 0;
    const uint32_t g = s.transferBytes == 4 ? 8 : 16;
    const uint32_t w = ((s.dk + n - 1) / n + g - 1) / g * g;
    return w * (n - 1) < s.dk && w * n >= s.dk ? w : 0;
}

// Fills `t`; nullptr, or a one-line reason the shape is not supported.
inline const char* KdaChunkV6Tiling(const KdaShape& s, uint32_t aicNum, uint32_t ubCapacity, KdaChunkV6TilingData& t,
                                    uint32_t aTiles = 1, uint32_t gTiles = 0, uint32_t f2Tiles = 1)
{
    if (const char* why = KdaCheckShape(s, aicNum, true)) return why;
    t = KdaChunkV6TilingData{};
    KdaCopyShape(s, t);
    t.blockDim = t.sequences < aicNum ? t.sequences : aicNum;
    t.slots = 1;
    KdaSubChunks(s, t);
    t.aWidth = KdaV6AWidth(s, aTiles);
    if (t.aWidth == 0) return "A tiles must cover d_k in that many 32-byte aligned slices";
    t.aTiles = aTiles;
    // F2 along d_v: each call's N a whole number of 16-wide Cube fractals
    if (f2Tiles == 0 || s.dv % f2Tiles != 0 || (s.dv / f2Tiles) % 16 != 0)
        return "F2 tiles must divide d_v into multiples of 16 columns";
    t.f2Tiles = f2Tiles;

    const uint32_t C = s.chunk, dh = s.dk / 2;
    const uint32_t calc = KdaSubChunkCalcElems(s, t);   // Vector work tiles (fp32)
    t.calcElems = calc;
    t.stateTileRows = calc / s.dv < dh ? calc / s.dv : dh;
    // G's pieces [d_k / 2, d_v / gTiles] take two neighbouring work tiles each (S, S_delta; S_hi in a fifth)
    t.gTiles = KdaStateTiles(s, gTiles, 2ull * calc);
    if (t.gTiles == 0)
        return "G tiles must divide d_v into 32-byte aligned rows whose [d_k / 2, d_v / N] pieces fit two work tiles";
    // 2 VECIN + 2 VECOUT buffers + 5 work tiles + gc and scale Q of this AIV's key channels (kept from A for C) +
    // gamma_C (two chunks: C of chunk t+1 runs before G of chunk t) + beta + the micro-diagonal sums (kk and qk, one
    // per (i, j <= i) of a 4 x 4 block, 32 bytes apart, for this AIV's micro-chunks, over every key-channel tile,
    // and one sub-chunk's part of one tile) + the ReduceSum work buffer
    const uint64_t sums = KdaMicroSums(t);
    const uint64_t ub = 9ull * calc * 4 + 2ull * C * dh * 4 + 2 * KdaAlign(dh * 4ull, 32) + KdaAlign(C * 4ull, 32) +
                        sums * 4 + KdaAlign(((s.dk + 63) / 64 + 7) / 8 * 8 * 4, 32);
    if (ub > ubCapacity) return "Vector work tiles do not fit the Unified Buffer: reduce d_k, d_v or the chunk";
    t.ubBytes = static_cast<uint32_t>(ub);

    t.svBytes = KdaAlign(uint64_t(t.stateParts * s.dk + C) * s.dv * s.transferBytes, 512);
    t.wsCoreBytes = KdaLayOut(t, 0, KDA6_WS_COUNT, 0,
                              [&t](uint32_t i) { return KdaV6WsElems(t, i) * KdaV6WsElemBytes(t, i); });

    KdaSubChunkMatmuls(s, t, f2Tiles);
    return nullptr;
}

// Bytes of the user workspace the kernel needs (blockDim per-core areas).
inline uint64_t KdaV6UserWorkspaceBytes(const KdaChunkV6TilingData& t) { return t.wsCoreBytes * t.blockDim; }
#endif
