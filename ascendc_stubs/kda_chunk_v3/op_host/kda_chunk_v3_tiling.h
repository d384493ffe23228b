// Tiling of kda_chunk_v3: one plain struct (CANN's "standard C++" tiling, read in the kernel with
// GET_TILING_DATA_WITH_STRUCT) and the host-side function that fills it. The same function serves the CANN
// TilingFunc (op_host/kda_chunk_v3.cpp) and the host emulation's runner, so the layout tested on the CPU is
// the one the NPU gets.
//
// GM layouts, FLA's: q, k, g [B, T, H, d_k]; v [B, T, H, d_v]; beta [B, T, H]; h0, ht [B, H, d_k, d_v];
// o [B, T, H, d_v]. q, k, v in the transfer type; g (log decay, or the decay alpha), beta, h0, o, ht in fp32.
// Tiling keys, KdaShape and the shape rules both kernels share: ascendc_stubs/common/kda_tiling_common.h.
#pragma once
#include "kda_tiling_common.h"

// Workspace tensors per AI core: the hand-offs of the simulator's v3 graph, named as it names them.
// Resident (one copy): Q_scaled, K_decay (the design's resident region) and the state S.
// Per slot (ping/pong; slot = chunk % slots): the rest; W is the Cube's own scratch (never a hand-off).
enum KdaWsTensor : uint32_t {
    KDA_WS_Q_SCALED, KDA_WS_K_DECAY, KDA_WS_S,
    KDA_WS_K_SCALED, KDA_WS_K_DIV, KDA_WS_V, KDA_WS_A_RAW, KDA_WS_M, KDA_WS_U, KDA_WS_WS, KDA_WS_O_INTER,
    KDA_WS_A_QK_RAW, KDA_WS_A_QK, KDA_WS_V_PSEUDO, KDA_WS_O_INTRA, KDA_WS_S_DELTA, KDA_WS_W,
    KDA_WS_COUNT
};
constexpr uint32_t KDA_WS_FIRST_SLOT_TENSOR = KDA_WS_K_SCALED;

struct KdaChunkV3TilingData {
    uint32_t batch, seqLen, heads, dk, dv, chunk;
    uint32_t numChunks;            // seqLen / chunk
    uint32_t sequences;            // batch * heads: one sequence = one (b, h), processed by core seq % blockDim
    uint32_t blockDim;             // AI cores used
    uint32_t transferBytes;        // 4 (fp32) or 2 (bf16)
    uint32_t hasInitialState;      // h0 given (else S starts at zero)
    uint32_t gateIsLog;            // g holds log decays (FLA); 0: it holds alpha, and Phase A takes Ln
    uint32_t slots;                // workspace slots per core (2 = ping/pong, as the simulator plans)
    uint32_t calcElems;            // fp32 elements of each Vector work tile (UB)
    uint32_t stateTileRows;        // rows of S per tile of S := h0
    uint32_t gTiles;               // Phase G: tiles of S along d_v per chunk, [d_k, d_v / gTiles] each, split between
                                   // the AIVs by rows (the simulator's plan, bridge.tiles_option)
    uint32_t phaseATiles;          // Phase A: tiles of the key channels per chunk, both AIVs together (the
                                   // simulator's plan, bridge.tiles_option; 2 = one [C, d_k / 2] tile per AIV)
    uint32_t ubBytes;              // UB the Vector side allocates
    float scale;                   // multiplies q (FLA: d_k ** -0.5)
    uint64_t wsCoreBytes;          // user workspace per AI core
    uint64_t wsSlotBytes;          // one slot
    uint64_t wsOffset[KDA_WS_COUNT];   // byte offset in the core's workspace; slot tensors: of slot 0
    TCubeTiling mmTiling;          // one Matmul object for all eight matmuls (largest shape; see README)
};

#if !defined(__CCE_AICORE__)
inline uint32_t KdaWsRows(const KdaChunkV3TilingData& t, uint32_t i)
{
    switch (i) {
        case KDA_WS_S: case KDA_WS_S_DELTA: return t.dk;
        default: return t.chunk;
    }
}
inline uint32_t KdaWsCols(const KdaChunkV3TilingData& t, uint32_t i)
{
    switch (i) {
        case KDA_WS_Q_SCALED: case KDA_WS_K_DECAY: case KDA_WS_K_SCALED: case KDA_WS_K_DIV: case KDA_WS_W: return t.dk;
        case KDA_WS_A_RAW: case KDA_WS_M: case KDA_WS_A_QK_RAW: case KDA_WS_A_QK: return t.chunk;
        default: return t.dv;       // S, V, U, WS, O_inter, V_pseudo, O_intra, S_delta
    }
}
inline const char* KdaWsName(uint32_t i)
{
    static const char* names[KDA_WS_COUNT] = {"Q_scaled", "K_decay", "S", "K_scaled", "K_div", "V", "A_raw", "M",
                                              "U", "WS", "O_inter", "A_qk_raw", "A_qk", "V_pseudo", "O_intra",
                                              "S_delta", "W"};
    return i < KDA_WS_COUNT ? names[i] : "?";
}

// Fills `t`; returns nullptr, or a one-line reason the shape is not supported.
inline const char* KdaChunkV3Tiling(const KdaShape& s, uint32_t aicNum, uint32_t ubCapacity, KdaChunkV3TilingData& t,
                                    uint32_t phaseATiles = 2, uint32_t gTiles = 0)
{
    if (const char* why = KdaCheckShape(s, aicNum)) return why;
    // Phase A along the key channels (the last axis, as the simulator tiles): one tile (each AIV its half) or an
    // even count (each AIV its half of them), every tile's rows 32-byte aligned in the transfer type.
    if (phaseATiles == 0 || (phaseATiles > 1 && (phaseATiles % 2 != 0 || s.dk % phaseATiles != 0 ||
                                                 (s.dk / phaseATiles) * s.transferBytes % 32 != 0)))
        return "A tiles must be 1 or even, divide d_k, and give 32-byte aligned rows";
    t = KdaChunkV3TilingData{};
    KdaCopyShape(s, t);
    t.blockDim = t.sequences < aicNum ? t.sequences : aicNum;
    t.slots = s.slots;
    t.phaseATiles = phaseATiles;

    // Vector tiles: every phase's working set per AIV fits calcElems fp32 values (see op_kernel).
    const uint32_t C = s.chunk, dh = s.dk / 2, dvh = s.dv / 2, ch = s.chunk / 2;
    uint32_t calc = C * dh;
    if (C * C > calc) calc = C * C;
    if (ch * s.dv > calc) calc = ch * s.dv;
    if (C * dvh > calc) calc = C * dvh;
    t.calcElems = calc;
    t.stateTileRows = calc / s.dv < dh ? calc / s.dv : dh;
    // G's pieces [d_k / 2, d_v / gTiles] take two neighbouring work tiles each, S and S_delta (0: the fewest that fit)
    t.gTiles = KdaStateTiles(s, gTiles, 2ull * calc);
    if (t.gTiles == 0)
        return "G tiles must divide d_v into 32-byte aligned rows whose [d_k / 2, d_v / N] pieces fit two work tiles";
    // 2 VECIN + 2 VECOUT queue buffers + 4 work tiles (fp32) + gamma_C ping/pong + beta of a chunk + identity
    const uint64_t ub = 8ull * calc * 4 + KdaAlign(2ull * dh * 4, 32) + KdaAlign(C * 4ull, 32) +
                        KdaAlign(uint64_t(C) * ch * 4, 32);
    if (ub > ubCapacity) return "Vector work tiles do not fit the Unified Buffer: reduce d_k, d_v or the chunk";
    t.ubBytes = static_cast<uint32_t>(ub);

    // Workspace: resident tensors, then `slots` copies of the slot tensors; 512-byte aligned.
    auto bytesOf = [&](uint32_t i) { return uint64_t(KdaWsRows(t, i)) * KdaWsCols(t, i) * s.transferBytes; };
    const uint64_t slotBase = KdaLayOut(t, 0, KDA_WS_FIRST_SLOT_TENSOR, 0, bytesOf);
    t.wsSlotBytes = KdaLayOut(t, KDA_WS_FIRST_SLOT_TENSOR, KDA_WS_COUNT, slotBase, bytesOf) - slotBase;
    t.wsCoreBytes = slotBase + t.wsSlotBytes * s.slots;

    // The Matmul tiling is made for the largest of the eight shapes (M, N, K <= max(C, d_k, d_v)).
    KdaFillMatmulTiling(t.mmTiling, C > s.dk ? (C > s.dv ? C : s.dv) : (s.dk > s.dv ? s.dk : s.dv), s.transferBytes);
    return nullptr;
}
#endif
