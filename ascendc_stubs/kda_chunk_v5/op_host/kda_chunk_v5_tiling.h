// Tiling of kda_chunk_v5 (kda/programs/v5.py): one plain struct (GET_TILING_DATA_WITH_STRUCT) and the host
// function that fills it, shared by the CANN TilingFunc (op_host/kda_chunk_v5.cpp) and the host emulation.
//
// GM layouts as kda_chunk_v3/v4 (FLA's): q, k, g [B, T, H, d_k]; v [B, T, H, d_v]; beta [B, T, H];
// h0, ht [B, H, d_k, d_v]; o [B, T, H, d_v]. q, k, v in the transfer type; g, beta, h0, o, ht in fp32.
//
// One launch, two passes, SyncAll<false>() between them (the design's boundary = BARRIER):
//   intra  over all items (sequence, chunk), item i on core i % blockDim: M and A_qk of every chunk
//   state  over the sequences, sequence s on core s % blockDim, its chunks in order
#pragma once
#include "kda_subchunk_tiling.h"


// Per-core workspace, no slots: one copy of each tensor (the flags order every overwrite after the last read, see
// the kernel), but two of K_decay and SV, which the state pass has in flight for two chunks at once.
// n = C / 16 sub-chunks, P = n (n - 1) / 2 pairs of them; m = 16 / 4 micro-chunks per sub-chunk, P4 = m (m - 1) / 2.
//   intra pass: K_left, Q_left [(n-1) 16, d_k]; K_right [P 16, d_k]; K_left4, Q_left4 [n (m-1) 4, d_k];
//     K_right4 [n P4 4, d_k]; A_kk_off, A_qk_off [P 16 16] (per I >= 1 a [16, 16 I] block row);
//     A_kk_off4, A_qk_off4 [n P4 4 4] (per I, a >= 1 a [4, 4 a] block row); A_neg, D_beta [C, C];
//     the inverse by block columns: column j = Ai_diag[j] [16, 16] (the Vector's, sync 3) over A_inv's blocks
//     below it [(n-1-j) 16, 16] (the Cube's own); acc [16, 16] (the Cube's own)
//   state pass: K_scaled [C, d_k]; K_decay [C, d_k] twice (A of chunk t+1 runs while F1 of chunk t reads it); W [C, parts d_k] (the Cube's own); U, WS [C, d_v];
//     SV = [S ; V_pseudo]: S [parts d_k, d_v] (S_hi over S_lo with bf16 transfers) over V_pseudo [C, d_v], twice
//     (svBytes apart): a core's chunks alternate between the copies, because G of chunk t writes the next state
//     while F2 of chunk t still reads this one (v5.py: F2 runs beside G);
//     S_delta [d_k, d_v]; S_fp32 [d_k, d_v] fp32 (the Vector's own state, bf16 transfers only)
// Per item (after every core's area): M [C, C] (lower block triangle only) and QA [C, parts d_k + C]: per row
// Q_scaled (parts copies, the state pass's ①) then A_qk (the intra pass's output).
enum KdaV5WsTensor : uint32_t {
    KDA5_K_LEFT, KDA5_Q_LEFT, KDA5_K_RIGHT, KDA5_K_LEFT4, KDA5_Q_LEFT4, KDA5_K_RIGHT4,
    KDA5_A_KK_OFF, KDA5_A_QK_OFF, KDA5_A_KK_OFF4, KDA5_A_QK_OFF4, KDA5_A_NEG, KDA5_D_BETA, KDA5_AINV, KDA5_ACC,
    KDA5_K_SCALED, KDA5_K_DECAY, KDA5_W, KDA5_U, KDA5_WS, KDA5_SV, KDA5_S_DELTA, KDA5_S_FP32,
    KDA5_WS_COUNT
};
static_assert(uint32_t(KDA5_ACC) == uint32_t(KDA_INTRA_ACC), "the workspace begins with the intra tensors (kda_subchunk_tiling.h)");

struct KdaChunkV5TilingData {
    uint32_t batch, seqLen, heads, dk, dv, chunk;
    uint32_t numChunks;            // seqLen / chunk
    uint32_t sequences;            // batch * heads
    uint32_t items;                // sequences * numChunks: the intra pass's work
    uint32_t blockDim;             // AI cores used
    uint32_t transferBytes;        // 4 (fp32) or 2 (bf16)
    uint32_t hasInitialState, gateIsLog;
    uint32_t slots;                // 1: no workspace slots (the runner's --slots does not apply)
    uint32_t sub, subChunks, pairs;        // 16, n, P
    uint32_t micro, micros, pairs4;        // 4, m = 16 / 4, P4
    uint32_t stateParts;           // 1 (fp32), 2 (bf16: the fp32 state as S_hi + S_lo for the Cube)
    uint32_t qaCols;               // parts d_k + C
    uint32_t calcElems;            // fp32 elements of each Vector work tile
    uint32_t stateTileRows;        // rows of S per tile of S := h0
    uint32_t f2Tiles;              // state pass Phase F2: O's columns per chunk in f2Tiles Matmul calls of
                                   // mmTilingOut.singleCoreN = d_v / f2Tiles each (the simulator's plan)
    uint32_t gTiles;               // state pass Phase G: tiles of S along d_v per chunk, [d_k, d_v / gTiles] each,
                                   // split between the AIVs by rows (the simulator's plan, bridge.tiles_option)
    uint32_t stateATiles;          // state pass Phase A: tiles of the key channels per chunk, both AIVs together
                                   // (the simulator's plan, bridge.tiles_option; 2 = one [C, d_k / 2] tile per AIV;
                                   // 1 = one [C, d_k] tile, each AIV its half)
    uint32_t intraATiles;          // intra pass Phase A, the micro-diagonal blocks: tiles of the key channels per
                                   // item, each [n, m, 10, d_k / intraATiles] products split between the AIVs by
                                   // sub-chunk (the simulator's plan; 1 = every key channel at once)
    uint32_t ubBytes;              // UB the Vector side allocates
    float scale;
    uint64_t svBytes;              // one copy of SV (there are two)
    uint64_t wsCoreBytes;          // per-core workspace
    uint64_t wsOffset[KDA5_WS_COUNT];
    uint64_t itemBase;             // the per-item area, after blockDim per-core areas
    uint64_t itemBytes, qaOffset;  // one item: M, then QA at qaOffset
    TCubeTiling mmTiling;          // Matmul object 1: C in the transfer type
    TCubeTiling mmTilingOut;       // Matmul object 2: C in fp32 (O straight to the output)
};

#if !defined(__CCE_AICORE__)
inline uint64_t KdaV5WsElems(const KdaChunkV5TilingData& t, uint32_t i)
{
    if (i < KDA_INTRA_WS_COUNT) return KdaIntraWsElems(t, i);
    const uint64_t C = t.chunk, dk = t.dk, dv = t.dv, parts = t.stateParts;
    switch (i) {
        case KDA5_K_SCALED: return C * dk;
        case KDA5_K_DECAY: return 2 * C * dk;   // two copies: A(t+1) writes one while F1(t) reads the other
        case KDA5_W: return C * parts * dk;
        case KDA5_SV: return 2 * t.svBytes / t.transferBytes;   // two copies
        case KDA5_S_DELTA: return dk * dv;
        case KDA5_S_FP32: return t.transferBytes == 4 ? 0 : dk * dv;
        default: return C * dv;    // U, WS
    }
}
inline uint32_t KdaV5WsElemBytes(const KdaChunkV5TilingData& t, uint32_t i)
{
    return i == KDA5_S_FP32 ? 4 : t.transferBytes;
}

// Fills `t`; nullptr, or a one-line reason the shape is not supported.
inline const char* KdaChunkV5Tiling(const KdaShape& s, uint32_t aicNum, uint32_t ubCapacity, KdaChunkV5TilingData& t,
                                    uint32_t stateATiles = 2, uint32_t intraATiles = 1, uint32_t gTiles = 0,
                                    uint32_t f2Tiles = 1)
{
    if (const char* why = KdaCheckShape(s, aicNum)) return why;
    t = KdaChunkV5TilingData{};
    KdaCopyShape(s, t);
    t.items = t.sequences * t.numChunks;
    t.blockDim = t.items < aicNum ? t.items : aicNum;
    t.slots = 1;
    KdaSubChunks(s, t);
    // State Phase A along the key channels (the last axis, as the simulator tiles): one tile (each AIV its half) or
    // an even count (each AIV its half of them), every tile's rows 32-byte aligned in the transfer type.
    if (stateATiles == 0 || (stateATiles > 1 && (stateATiles % 2 != 0 || s.dk % stateATiles != 0 ||
                                                 (s.dk / stateATiles) * s.transferBytes % 32 != 0)))
        return "state.A tiles must be 1 or even, divide d_k, and give 32-byte aligned rows";
    t.stateATiles = stateATiles;
    // Intra Phase A's micro-diagonal blocks along the key channels: every AIV runs every tile (on its sub-chunks).
    if (intraATiles == 0 || s.dk % intraATiles != 0 || (s.dk / intraATiles) * s.transferBytes % 32 != 0)
        return "intra.A tiles must divide d_k and give 32-byte aligned rows";
    t.intraATiles = intraATiles;
    // F2 along d_v: each call's N a whole number of 16-wide Cube fractals
    if (f2Tiles == 0 || s.dv % f2Tiles != 0 || (s.dv / f2Tiles) % 16 != 0)
        return "state.F2 tiles must divide d_v into multiples of 16 columns";
    t.f2Tiles = f2Tiles;

    const uint32_t C = s.chunk, dh = s.dk / 2;
    const uint32_t calc = KdaSubChunkCalcElems(s, t);   // Vector work tiles (fp32)
    t.calcElems = calc;
    t.stateTileRows = calc / s.dv < dh ? calc / s.dv : dh;
    // G's pieces [d_k / 2, d_v / gTiles] take two neighbouring work tiles each (S, S_delta; S_hi in a fifth)
    t.gTiles = KdaStateTiles(s, gTiles, 2ull * calc);
    if (t.gTiles == 0)
        return "state.G tiles must divide d_v into 32-byte aligned rows whose [d_k / 2, d_v / N] pieces fit two work tiles";
    // 2 VECIN + 2 VECOUT buffers + 5 work tiles + gamma_C (two chunks: A of chunk t+1 runs before G of chunk t) + beta + the micro-diagonal sums (kk and qk, one per
    // (i, j <= i) of a 4 x 4 block, 32 bytes apart, for this AIV's micro-chunks, over every key-channel tile, and
    // one sub-chunk's part of one tile) + the ReduceSum work buffer
    const uint64_t sums = KdaMicroSums(t);
    const uint64_t ub = 9ull * calc * 4 + 2 * KdaAlign(dh * 4ull, 32) + KdaAlign(C * 4ull, 32) + sums * 4 +
                        KdaAlign(((s.dk + 63) / 64 + 7) / 8 * 8 * 4, 32);
    if (ub > ubCapacity) return "Vector work tiles do not fit the Unified Buffer: reduce d_k, d_v or the chunk";
    t.ubBytes = static_cast<uint32_t>(ub);

    t.svBytes = KdaAlign(uint64_t(t.stateParts * s.dk + C) * s.dv * s.transferBytes, 512);
    t.wsCoreBytes = KdaLayOut(t, 0, KDA5_WS_COUNT, 0,
                              [&t](uint32_t i) { return KdaV5WsElems(t, i) * KdaV5WsElemBytes(t, i); });
    t.itemBase = t.wsCoreBytes * t.blockDim;
    t.qaOffset = KdaAlign(uint64_t(C) * C * s.transferBytes, 512);
    t.itemBytes = t.qaOffset + KdaAlign(uint64_t(C) * t.qaCols * s.transferBytes, 512);

    KdaSubChunkMatmuls(s, t, f2Tiles);
    return nullptr;
}

// Bytes of the user workspace the kernel needs (per-core areas and the per-item area).
inline uint64_t KdaV5UserWorkspaceBytes(const KdaChunkV5TilingData& t) { return t.itemBase + t.itemBytes * t.items; }
#endif
