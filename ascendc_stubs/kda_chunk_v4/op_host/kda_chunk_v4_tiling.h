// Tiling of kda_chunk_v4: one plain struct (read in the kernel with GET_TILING_DATA_WITH_STRUCT) and the
// host-side function that fills it. The same function serves the CANN TilingFunc (op_host/kda_chunk_v4.cpp)
// and the host emulation's runner, so the layout tested on the CPU is the one the NPU gets.
//
// GM layouts, FLA's (as kda_chunk_v3): q, k, g [B, T, H, d_k]; v [B, T, H, d_v]; beta [B, T, H];
// h0, ht [B, H, d_k, d_v]; o [B, T, H, d_v]. q, k, v in the transfer type; g, beta, h0, o, ht in fp32.
// Tiling keys, KdaShape and the shape rules both kernels share: ascendc_stubs/common/kda_tiling_common.h.
#pragma once
#include "kda_tiling_common.h"

constexpr uint32_t KDA4_SUB = 16;   // sub-chunk width: kda/programs/v4.py's SUB (FLA's BC, the Cube's fractal)

// Workspace tensors per AI core: the hand-offs of the simulator's v4 graph, named as it names them, and what a
// unit keeps for itself in GM. n = C / 16 sub-chunks, P = n (n - 1) / 2 blocks below the diagonal.
// Resident (one copy):
//   Q_scaled [C, parts*d_k]   the design's resident region; with the state in two parts, Q_scaled twice
//   K_decay  [C, d_k]         (resident region)
//   S        [parts*d_k, d_v] the state as the Cube reads it: S, or with bf16 transfers S_hi over S_lo
//   S_fp32   [d_k, d_v] fp32  the Vector's own fp32 state between chunks (bf16 transfers only)
//   A_kk_diag [n*16, 16] fp32 the Vector's own diagonal blocks of K K^T (kept on the Vector, see the kernel)
// Per slot (slot = chunk % slots):
//   K_scaled [C, d_k]; K_left, Q_left [C-16, d_k] (sub-chunks 1..n-1); K_right [P*16, d_k] (pairs I > J);
//   A_kk_off [P*16*16] (row blocks: for I = 1..n-1 a [16, I*16] matrix); M [C, C];
//   A_qk [C, C]: the diagonal blocks are A_qk_diag (Vector -> Cube, sync 3), the blocks left of them A_qk_off
//   (the Cube's own, Phase D -> F), the blocks right of them are never touched;
//   U, WS, O_inter, V_pseudo, O_intra [C, d_v]; S_delta [d_k, d_v]; W [C, parts*d_k] (the Cube's own).
enum KdaV4WsTensor : uint32_t {
    KDA4_WS_Q_SCALED, KDA4_WS_K_DECAY, KDA4_WS_S, KDA4_WS_S_FP32, KDA4_WS_A_KK_DIAG,
    KDA4_WS_K_SCALED, KDA4_WS_K_LEFT, KDA4_WS_Q_LEFT, KDA4_WS_K_RIGHT, KDA4_WS_A_KK_OFF, KDA4_WS_M, KDA4_WS_A_QK,
    KDA4_WS_U, KDA4_WS_WS, KDA4_WS_O_INTER, KDA4_WS_V_PSEUDO, KDA4_WS_O_INTRA, KDA4_WS_S_DELTA, KDA4_WS_W,
    KDA4_WS_COUNT
};
constexpr uint32_t KDA4_WS_FIRST_SLOT_TENSOR = KDA4_WS_K_SCALED;

struct KdaChunkV4TilingData {
    uint32_t batch, seqLen, heads, dk, dv, chunk;
    uint32_t numChunks;            // seqLen / chunk
    uint32_t sequences;            // batch * heads: one sequence = one (b, h), processed by core seq % blockDim
    uint32_t blockDim;             // AI cores used
    uint32_t transferBytes;        // 4 (fp32) or 2 (bf16)
    uint32_t hasInitialState;      // h0 given (else S starts at zero)
    uint32_t gateIsLog;            // g holds log decays (FLA); 0: it holds alpha, and Phase A takes Ln
    uint32_t slots;                // workspace slots per core (2 = ping/pong, as the simulator plans)
    uint32_t sub, subChunks, pairs;    // 16, n = C / 16, P = n (n - 1) / 2
    uint32_t stateParts;           // 1: the Cube reads S in the transfer type; 2 (bf16 default): S_hi + S_lo
    uint32_t calcElems;            // fp32 elements of each Vector work tile (UB)
    uint32_t stateTileRows;        // rows of S per tile of S := h0
    uint32_t gTiles;               // Phase G: tiles of S along d_v per chunk, [d_k, d_v / gTiles] each, split between
                                   // the AIVs by rows (the simulator's plan, bridge.tiles_option)
    uint32_t diagTiles;            // Phase A's diagonal blocks: tiles of the key channels per chunk, each [n, 136, d_k /
                                   // diagTiles] products split between the AIVs by sub-chunk (the simulator's plan,
                                   // bridge.tiles_option; 1 = every key channel at once)
    uint32_t ubBytes;              // UB the Vector side allocates
    float scale;                   // multiplies q (FLA: d_k ** -0.5)
    uint64_t wsCoreBytes;          // user workspace per AI core
    uint64_t wsSlotBytes;          // one slot
    uint64_t wsOffset[KDA4_WS_COUNT];  // byte offset in the core's workspace; slot tensors: of slot 0
    TCubeTiling mmTiling;          // one Matmul object for every matmul (largest shape; see README)
};

#if !defined(__CCE_AICORE__)
// Elements and element size of workspace tensor i.
inline uint64_t KdaV4WsElems(const KdaChunkV4TilingData& t, uint32_t i)
{
    const uint64_t C = t.chunk, dk = t.dk, dv = t.dv, S = t.sub, parts = t.stateParts;
    switch (i) {
        case KDA4_WS_Q_SCALED: case KDA4_WS_W: return C * parts * dk;
        case KDA4_WS_S: return parts * dk * dv;
        case KDA4_WS_S_FP32: return t.transferBytes == 4 ? 0 : dk * dv;   // fp32 transfers: S is the fp32 state
        case KDA4_WS_A_KK_DIAG: return t.subChunks * S * S;
        case KDA4_WS_K_DECAY: case KDA4_WS_K_SCALED: return C * dk;
        case KDA4_WS_K_LEFT: case KDA4_WS_Q_LEFT: return (C - S) * dk;
        case KDA4_WS_K_RIGHT: return t.pairs * S * dk;
        case KDA4_WS_A_KK_OFF: return t.pairs * S * S;
        case KDA4_WS_M: case KDA4_WS_A_QK: return C * C;
        case KDA4_WS_S_DELTA: return dk * dv;
        default: return C * dv;     // U, WS, O_inter, V_pseudo, O_intra
    }
}
inline uint32_t KdaV4WsElemBytes(const KdaChunkV4TilingData& t, uint32_t i)
{
    return i == KDA4_WS_S_FP32 || i == KDA4_WS_A_KK_DIAG ? 4 : t.transferBytes;
}
inline const char* KdaV4WsName(uint32_t i)
{
    static const char* names[KDA4_WS_COUNT] = {
        "Q_scaled", "K_decay", "S", "S_fp32", "A_kk_diag", "K_scaled", "K_left", "Q_left", "K_right", "A_kk_off",
        "M", "A_qk", "U", "WS", "O_inter", "V_pseudo", "O_intra", "S_delta", "W"};
    return i < KDA4_WS_COUNT ? names[i] : "?";
}
// Tensors a unit keeps for itself in GM: race-checked, never a hand-off (not in any flag's payload).
inline bool KdaV4WsIsPrivate(uint32_t i)
{
    return i == KDA4_WS_S_FP32 || i == KDA4_WS_A_KK_DIAG || i == KDA4_WS_W;
}

// Fills `t`; returns nullptr, or a one-line reason the shape is not supported. stateParts: 0 = the default
// (2 with bf16 transfers, 1 with fp32), or 1 / 2. diagTiles: the key-channel tiles of Phase A's diagonal blocks.
inline const char* KdaChunkV4Tiling(const KdaShape& s, uint32_t aicNum, uint32_t ubCapacity, uint32_t stateParts,
                                    KdaChunkV4TilingData& t, uint32_t diagTiles = 1, uint32_t gTiles = 0)
{
    if (const char* why = KdaCheckShape(s, aicNum)) return why;
    if (stateParts > 2) return "state parts must be 1 or 2";
    if (stateParts == 2 && s.transferBytes == 4) return "with fp32 transfers the state is one fp32 part";
    // Every AIV runs every tile (on its sub-chunks), so any count that divides d_k into 32-byte aligned rows.
    if (diagTiles == 0 || s.dk % diagTiles != 0 || (s.dk / diagTiles) * s.transferBytes % 32 != 0)
        return "A tiles must divide d_k and give 32-byte aligned rows";
    t = KdaChunkV4TilingData{};
    KdaCopyShape(s, t);
    t.blockDim = t.sequences < aicNum ? t.sequences : aicNum;
    t.slots = s.slots;
    // C is a multiple of 32 (KdaCheckShape), so the n sub-chunks split evenly over the two AIVs.
    t.sub = KDA4_SUB;
    t.subChunks = s.chunk / KDA4_SUB;
    t.pairs = t.subChunks * (t.subChunks - 1) / 2;
    t.stateParts = stateParts != 0 ? stateParts : (s.transferBytes == 4 ? 1 : 2);
    t.diagTiles = diagTiles;

    // Vector tiles: every phase's working set per AIV fits calcElems fp32 values (see op_kernel).
    const uint32_t C = s.chunk, S = t.sub, dh = s.dk / 2, dvh = s.dv / 2, ch = s.chunk / 2;
    uint32_t calc = C * dh;                                       // Phase A on this AIV's key channels
    const uint32_t needs[] = {C * C, ch * s.dv, C * dvh, S * s.dk, t.pairs * S * S, t.subChunks * S * S};
    for (uint32_t n : needs) calc = n > calc ? n : calc;          // C, E, G; the diagonal blocks; A's blocks
    t.calcElems = calc;
    t.stateTileRows = calc / s.dv < dh ? calc / s.dv : dh;
    // G's pieces [d_k / 2, d_v / gTiles] take two neighbouring work tiles each, S and S_delta (S_hi in a fifth;
    // 0: the fewest that fit)
    t.gTiles = KdaStateTiles(s, gTiles, 2ull * calc);
    if (t.gTiles == 0)
        return "G tiles must divide d_v into 32-byte aligned rows whose [d_k / 2, d_v / N] pieces fit two work tiles";
    // 2 VECIN + 2 VECOUT queue buffers + 5 work tiles (fp32) + gamma_C ping/pong + beta of a chunk + identity
    // + this AIV's A_qk_diag blocks (kept from Phase A to C) + one sum per (i, j <= i) of a block, for A_kk and
    // A_qk, 32 bytes apart: over every tile for each of this AIV's sub-chunks, and one tile's part + the
    // ReduceSum work buffer
    const uint64_t sums = uint64_t(S) * (S + 1) * 8 * (t.subChunks / 2 + 1);
    const uint64_t ub = 9ull * calc * 4 + KdaAlign(2ull * dh * 4, 32) + KdaAlign(C * 4ull, 32) +
                        KdaAlign(uint64_t(C) * ch * 4, 32) + KdaAlign(uint64_t(t.subChunks / 2) * S * S * 4, 32) +
                        sums * 4 + KdaAlign(((s.dk + 63) / 64 + 7) / 8 * 8 * 4, 32);
    if (ub > ubCapacity) return "Vector work tiles do not fit the Unified Buffer: reduce d_k, d_v or the chunk";
    t.ubBytes = static_cast<uint32_t>(ub);

    // Workspace: resident tensors, then `slots` copies of the slot tensors; 512-byte aligned.
    auto bytesOf = [&](uint32_t i) { return KdaV4WsElems(t, i) * KdaV4WsElemBytes(t, i); };
    const uint64_t slotBase = KdaLayOut(t, 0, KDA4_WS_FIRST_SLOT_TENSOR, 0, bytesOf);
    t.wsSlotBytes = KdaLayOut(t, KDA4_WS_FIRST_SLOT_TENSOR, KDA4_WS_COUNT, slotBase, bytesOf) - slotBase;
    t.wsCoreBytes = slotBase + t.wsSlotBytes * s.slots;

    // One Matmul tiling for the largest shape: M, N, K <= max(C, parts * d_k, d_v).
    uint32_t big = C > s.dv ? C : s.dv;
    if (t.stateParts * s.dk > big) big = t.stateParts * s.dk;
    KdaFillMatmulTiling(t.mmTiling, big, s.transferBytes);
    return nullptr;
}
#endif
