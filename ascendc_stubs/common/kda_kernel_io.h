// Data movement shared by the KDA chunk kernels: this AI core's GM workspace, tokens in FLA's layout, and the
// Vector side's tile loads and stores through double-buffered queues. Kernel side: CANN or ascendc_stubs/host.
#pragma once
#include "kernel_operator.h"

namespace kda {
using namespace AscendC;

// This AI core's part of the user workspace. Tensors below FIRST_SLOT_TENSOR are resident (one copy); the
// rest have one copy per slot (slot = chunk % slots). Tiling: a kernel's tiling struct, with wsOffset[]
// (bytes, of slot 0 for slot tensors), wsSlotBytes and wsCoreBytes.
template <typename T, typename Tiling, uint32_t FIRST_SLOT_TENSOR>
struct Workspace {
    __aicore__ inline void Init(GM_ADDR user, const Tiling& td, uint32_t core)
    {
        base = user + core * td.wsCoreBytes;
        tiling = &td;
    }
    // A hand-off tensor, in the transfer type T.
    __aicore__ inline GlobalTensor<T> Get(uint32_t tensor, uint32_t slot) const { return At<T>(tensor, slot); }
    // A tensor a unit keeps in fp32 for itself (not a hand-off).
    __aicore__ inline GlobalTensor<float> GetFloat(uint32_t tensor, uint32_t slot = 0) const
    {
        return At<float>(tensor, slot);
    }
    template <typename U>
    __aicore__ inline GlobalTensor<U> At(uint32_t tensor, uint32_t slot) const
    {
        uint64_t off = tiling->wsOffset[tensor];
        if (tensor >= FIRST_SLOT_TENSOR) off += slot * tiling->wsSlotBytes;
        GlobalTensor<U> g;
        g.SetGlobalBuffer((__gm__ U*)(base + off));
        return g;
    }
    GM_ADDR base = nullptr;
    const Tiling* tiling = nullptr;
};

// GM offset of token `row` of chunk t in a [B, T, H, width] tensor, for sequence seq = b * H + h.
template <typename Tiling>
__aicore__ inline uint64_t TokenOffset(const Tiling& td, uint32_t seq, uint32_t t, uint32_t row, uint32_t width)
{
    const uint64_t b = seq / td.heads, h = seq % td.heads;
    return ((b * td.seqLen + uint64_t(t) * td.chunk + row) * td.heads + h) * width;
}

// The Vector side's GM <-> UB traffic: every load through a VECIN queue and every store through a VECOUT
// queue of BUFFER_NUM buffers (double buffering: MTE2/MTE3 move one tile while V works on the other).
// Work tiles are fp32; GM holds the transfer type or fp32. A tile larger than a queue buffer (tileBytes of
// fp32) moves through it in pieces of whole rows.
template <int BUFFER_NUM>
class VecIo {
public:
    __aicore__ inline void Init(TPipe* pipe, uint32_t tileBytes)
    {
        pipe->InitBuffer(inQue_, BUFFER_NUM, tileBytes);
        pipe->InitBuffer(outQue_, BUFFER_NUM, tileBytes);
        bufElems_ = tileBytes / sizeof(float);
    }

    // fp32 tile <- rows x cols of a [.., rowStride] GM matrix (S or fp32).
    template <typename S>
    __aicore__ inline void Load(const LocalTensor<float>& dst, const GlobalTensor<S>& src, uint32_t rows, uint32_t cols,
                                uint32_t rowStride)
    {
        const uint32_t step = PieceRows(cols);
        for (uint32_t r = 0; r < rows; r += step)
            LoadPiece(dst[r * cols], src[uint64_t(r) * rowStride], rows - r < step ? rows - r : step, cols, rowStride);
    }
    // rows x cols of a [.., rowStride] GM matrix <- fp32 tile, rounded to S (RINT).
    template <typename S>
    __aicore__ inline void Store(const GlobalTensor<S>& dst, const LocalTensor<float>& src, uint32_t rows, uint32_t cols,
                                 uint32_t rowStride)
    {
        const uint32_t step = PieceRows(cols);
        for (uint32_t r = 0; r < rows; r += step)
            StorePiece(dst[uint64_t(r) * rowStride], src[r * cols], rows - r < step ? rows - r : step, cols, rowStride);
    }

private:
    __aicore__ inline uint32_t PieceRows(uint32_t cols) const { return bufElems_ / cols > 0 ? bufElems_ / cols : 1; }
    template <typename S>
    __aicore__ inline void LoadPiece(const LocalTensor<float>& dst, const GlobalTensor<S>& src, uint32_t rows,
                                     uint32_t cols, uint32_t rowStride)
    {
        LocalTensor<S> in = inQue_.template AllocTensor<S>();
        DataCopyParams p;
        p.blockCount = static_cast<uint16_t>(rows);
        p.blockLen = static_cast<uint16_t>(cols * sizeof(S) / 32);
        p.srcStride = static_cast<uint16_t>((rowStride - cols) * sizeof(S) / 32);
        p.dstStride = 0;
        DataCopy(in, src, p);
        inQue_.EnQue(in);
        in = inQue_.template DeQue<S>();
        if constexpr (sizeof(S) == sizeof(float)) Muls(dst, in.template ReinterpretCast<float>(), 1.0f, rows * cols);
        else Cast(dst, in, RoundMode::CAST_NONE, rows * cols);   // both on the vector pipe, after DeQue
        inQue_.FreeTensor(in);
    }
    template <typename S>
    __aicore__ inline void StorePiece(const GlobalTensor<S>& dst, const LocalTensor<float>& src, uint32_t rows,
                                      uint32_t cols, uint32_t rowStride)
    {
        LocalTensor<S> out = outQue_.template AllocTensor<S>();
        if constexpr (sizeof(S) == sizeof(float)) Muls(out.template ReinterpretCast<float>(), src, 1.0f, rows * cols);
        else Cast(out, src, RoundMode::CAST_RINT, rows * cols);
        outQue_.EnQue(out);
        out = outQue_.template DeQue<S>();
        DataCopyParams p;
        p.blockCount = static_cast<uint16_t>(rows);
        p.blockLen = static_cast<uint16_t>(cols * sizeof(S) / 32);
        p.srcStride = 0;
        p.dstStride = static_cast<uint16_t>((rowStride - cols) * sizeof(S) / 32);
        DataCopy(dst, out, p);
        outQue_.FreeTensor(out);
    }

    TQue<TPosition::VECIN, BUFFER_NUM> inQue_;
    TQue<TPosition::VECOUT, BUFFER_NUM> outQue_;
    uint32_t bufElems_ = 0;   // fp32 elements one queue buffer holds
};

}  // namespace kda
