// Tiling pieces shared by the KDA chunk kernels: tiling keys, the operator's shape as the host sees it, the
// shape rules every kernel has, and the one Matmul tiling all of a kernel's matmuls use. Each kernel's own
// tiling header (op_host/kda_chunk_vN_tiling.h) builds on these; the CANN TilingFunc and the host emulation's
// runner call the same functions.
#pragma once
#if !defined(__CCE_AICORE__)
#include <cstdint>
#endif
#include "kernel_tiling/kernel_tiling.h"

constexpr uint32_t KDA_TILING_KEY_FP32 = 0;   // fp32 hand-offs
constexpr uint32_t KDA_TILING_KEY_BF16 = 1;   // bf16 hand-offs (the design document's 2-byte transfers)
constexpr uint32_t KDA_TILING_KEY_FP16 = 2;   // fp16 hand-offs (kda_chunk_v6 only)

#if !defined(__CCE_AICORE__)
struct KdaShape {
    uint32_t batch, seqLen, heads, dk, dv, chunk;
    uint32_t transferBytes;        // 4 or 2
    bool fp16;                     // 2-byte transfers in fp16 rather than bf16
    bool hasInitialState, gateIsLog;
    float scale;
    uint32_t slots;                // 1 or 2
};

// nullptr, or a one-line reason the shape is not supported by any of the kernels (fp16 transfers: by those
// that pass fp16Ok).
inline const char* KdaCheckShape(const KdaShape& s, uint32_t aicNum, bool fp16Ok = false)
{
    if (s.batch == 0 || s.seqLen == 0 || s.heads == 0 || s.dk == 0 || s.dv == 0 || s.chunk == 0 || aicNum == 0)
        return "empty shape";
    if (s.transferBytes != 4 && s.transferBytes != 2) return "transfer type must be fp32 or bf16";
    if (s.fp16 && (s.transferBytes != 2 || !fp16Ok))
        return "fp16 transfers are implemented in kda_chunk_v6 only (this kernel takes fp32 or bf16)";
    if (s.dk % 32 || s.dv % 32 || s.chunk % 32)
        return "d_k, d_v and the chunk size must be multiples of 32 (each AIV takes 32-byte aligned halves)";
    if (s.seqLen % s.chunk) return "T must be a multiple of the chunk size (tail chunks are not implemented)";
    if (s.slots != 1 && s.slots != 2) return "slots must be 1 or 2";
    return nullptr;
}

inline uint64_t KdaAlign(uint64_t bytes, uint64_t to) { return (bytes + to - 1) / to * to; }

// The shape's fields every kernel's tiling struct carries: the sizes, the chunks and sequences, the transfer
// type's bytes, the flags, the scale.
template <class Tiling>
inline void KdaCopyShape(const KdaShape& s, Tiling& t)
{
    t.batch = s.batch; t.seqLen = s.seqLen; t.heads = s.heads; t.dk = s.dk; t.dv = s.dv; t.chunk = s.chunk;
    t.numChunks = s.seqLen / s.chunk;
    t.sequences = s.batch * s.heads;
    t.transferBytes = s.transferBytes;
    t.hasInitialState = s.hasInitialState ? 1 : 0;
    t.gateIsLog = s.gateIsLog ? 1 : 0;
    t.scale = s.scale;
}

// Workspace tensors first..end-1 one after the other from `off`, each 512-byte aligned (bytes(i) each): their
// offsets into t.wsOffset; returns the offset after the last.
template <class Tiling, class Bytes>
inline uint64_t KdaLayOut(Tiling& t, uint32_t first, uint32_t end, uint64_t off, Bytes bytes)
{
    for (uint32_t i = first; i < end; ++i) {
        t.wsOffset[i] = off;
        off += KdaAlign(bytes(i), 512);
    }
    return off;
}

// Phase G's tiles of the state S [d_k, d_v], cut along d_v as the simulator cuts it: n slices [d_k, d_v / n], each
// split between the AIVs by rows (AIV s its key channels, whose gamma_C it keeps). n = 0: the fewest whose piece
// [d_k / 2, d_v / n] fits `pieceElems` fp32 values. Returns the count, or 0 where n does not divide d_v into
// 32-byte aligned rows (transfer type and fp32) or its piece does not fit.
inline uint32_t KdaStateTiles(const KdaShape& s, uint32_t n, uint64_t pieceElems)
{
    auto fits = [&](uint32_t c) {
        return c != 0 && s.dv % c == 0 && (s.dv / c) * s.transferBytes % 32 == 0 && (s.dv / c) * 4 % 32 == 0 &&
               uint64_t(s.dk / 2) * (s.dv / c) <= pieceElems;
    };
    if (n != 0) return fits(n) ? n : 0;
    for (uint32_t c = 1; c <= s.dv; ++c)
        if (fits(c)) return c;
    return 0;
}

// The Matmul tiling is made for the largest shape a kernel multiplies (M, N, K <= big); every call sets its
// own shape with SetOrgShape / SetSingleShape (see the README: whether CANN accepts this is to be checked).
// On the NPU, MatmulApiTiling::GetTiling overwrites this struct. For the host emulation the base block and the
// L1 depths are filled with the emulation's stand-in (ASSUMED, not GetTiling's numbers): 128 x 128 output
// blocks, 16 KiB L0A/L0B blocks, double-buffered L0, a whole row of K blocks of A and of B in L1. The emulation
// checks them against the AIC's L1 (512 KiB, shared by every Matmul object and the TPipe's L1 buffers) and
// L0A/L0B (64 KiB) / L0C (128 KiB) at REGIST_MATMUL_OBJ.
inline void KdaFillMatmulTiling(TCubeTiling& mm, uint32_t big, uint32_t elemBytes)
{
    mm.usedCoreNum = 1;
    mm.M = mm.N = mm.Ka = mm.Kb = static_cast<int32_t>(big);
    mm.singleCoreM = mm.singleCoreN = mm.singleCoreK = static_cast<int32_t>(big);
    const int32_t b = static_cast<int32_t>(big);
    mm.baseM = mm.baseN = b < 128 ? b : 128;
    const int32_t k = static_cast<int32_t>(16384 / (128 * elemBytes));   // 16 KiB of A per L0A block
    mm.baseK = b < k ? b : k;
    const int32_t kBlocks = (b + mm.baseK - 1) / mm.baseK;
    mm.stepM = mm.stepN = 1;
    mm.stepKa = mm.stepKb = kBlocks;
    mm.depthA1 = mm.depthB1 = kBlocks;
    mm.dbL0A = mm.dbL0B = mm.dbL0C = 2;
}

// The tiling of a matmul whose calls each compute `singleN` columns of C (the simulator's cut of N): singleCoreN,
// and base blocks no wider (host stand-in as above; on the NPU MatmulApiTiling::SetShape(.., singleN, ..) asks
// GetTiling for the same).
inline void KdaCutMatmulTilingN(TCubeTiling& mm, uint32_t singleN)
{
    mm.singleCoreN = static_cast<int32_t>(singleN);
    if (mm.baseN > mm.singleCoreN) mm.baseN = mm.singleCoreN;
}

// The L1 a TCubeTiling keeps (the emulation's estimate, as REGIST_MATMUL_OBJ checks it): depthA1 blocks of
// baseM x baseK of A and depthB1 blocks of baseN x baseK of B, elemBytes each.
inline uint64_t KdaMatmulL1Bytes(const TCubeTiling& mm, uint32_t elemBytes)
{
    return (uint64_t(mm.depthA1) * mm.baseM * mm.baseK + uint64_t(mm.depthB1) * mm.baseN * mm.baseK) * elemBytes;
}
#endif
