// Host emulation of the AscendC kernel API subset the skeletons in ascendc_stubs/ use (g++ -std=c++17).
// On an NPU, CANN's own kernel_operator.h takes this file's place; nothing here is Huawei code.
//
// Each emulated AI core is three std::threads (AIC, AIV0, AIV1) running the same kernel function; the
// `if ASCEND_IS_AIC` / `if ASCEND_IS_AIV` branches pick the unit at run time (CANN compiles the kernel once
// per unit instead). Every API checks what the hardware would refuse: UB bounds and 32-byte alignment,
// DataCopy block sizes, GM bounds, flag ids and modes. See emu/runtime.h for the machine model.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <type_traits>
#include <vector>

#include "emu/float16.h"
#include "emu/runtime.h"

// ---- qualifiers and kernel declaration macros ----
#define __global__
#define __aicore__
#define __gm__
#define GM_ADDR uint8_t*

enum pipe_t : int {
    PIPE_S = ascendc_emu::kPipeS,
    PIPE_V = ascendc_emu::kPipeV,
    PIPE_M = ascendc_emu::kPipeM,
    PIPE_MTE1 = ascendc_emu::kPipeMte1,
    PIPE_MTE2 = ascendc_emu::kPipeMte2,
    PIPE_MTE3 = ascendc_emu::kPipeMte3,
    PIPE_ALL = ascendc_emu::kPipeAll,
    PIPE_FIX = ascendc_emu::kPipeFix,
};

// Values as in asc-devkit impl/basic_api/utils/kernel_utils_macros.h (the emulation keeps the first six).
enum KernelMetaType : uint8_t {
    KERNEL_TYPE_AIV_ONLY,
    KERNEL_TYPE_AIC_ONLY,
    KERNEL_TYPE_MIX_AIV_1_0,
    KERNEL_TYPE_MIX_AIC_1_0,
    KERNEL_TYPE_MIX_AIC_1_1,
    KERNEL_TYPE_MIX_AIC_1_2,
};
#define KERNEL_TASK_TYPE_DEFAULT(type) ::ascendc_emu::SetKernelType(type)
#define ASCEND_IS_AIC (::ascendc_emu::IsAic())
#define ASCEND_IS_AIV (::ascendc_emu::IsAiv())
#define TILING_KEY_IS(key) (::ascendc_emu::TilingKey() == static_cast<uint64_t>(key))
#define REGISTER_TILING_DEFAULT(type)
#define GET_TILING_DATA_WITH_STRUCT(type, name, ptr) \
    type name;                                       \
    ::ascendc_emu::GmAccess((ptr), sizeof(type), false, PIPE_S, "GET_TILING_DATA"); \
    std::memcpy(&name, (ptr), sizeof(type))

namespace AscendC {

// As asc-devkit impl/basic_api/common_types.h (HardEvent below keeps the emulation's own order: only names are used).
enum class TPosition : uint8_t {
    GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC, LCM = VECCALC, SPM, SHM = SPM, TSCM, C2PIPE2GM,
    C2PIPE2LOCAL, MAX
};
using QuePosition = TPosition;
enum class RoundMode : uint8_t { CAST_NONE, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };
enum class HardEvent : uint8_t {
    MTE2_V, V_MTE2, V_MTE3, MTE3_V, MTE3_MTE2, MTE2_MTE3, FIX_MTE2, MTE2_FIX, V_S, S_V, MTE2_S, S_MTE2, MTE3_S, S_MTE3
};
enum TEventID : int32_t { EVENT_ID0 = 0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5 };

__aicore__ inline int64_t GetBlockIdx() { return ascendc_emu::BlockIdx(); }
__aicore__ inline int64_t GetBlockNum() { return ascendc_emu::BlockNum(); }
__aicore__ inline int64_t GetSubBlockIdx() { return ascendc_emu::SubBlockIdx(); }
__aicore__ inline int64_t GetSubBlockNum() { return 2; }
__aicore__ inline GM_ADDR GetSysWorkSpacePtr() { return ascendc_emu::SysWorkspace(); }
__aicore__ inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) { return ascendc_emu::UserWorkspace(workspace); }
__aicore__ inline void SetSysWorkspace(GM_ADDR) {}

// ---- synchronisation ----
template <uint8_t modeId, pipe_t pipe>
__aicore__ inline void CrossCoreSetFlag(uint16_t flagId) { ascendc_emu::FlagSet(modeId, pipe, flagId); }
template <uint8_t modeId = 0, pipe_t pipe = PIPE_S>
__aicore__ inline void CrossCoreWaitFlag(uint16_t flagId) { ascendc_emu::FlagWait(modeId, pipe, flagId); }
template <pipe_t pipe>
__aicore__ inline void PipeBarrier() { ascendc_emu::PipeBarrier(pipe); }
// Real (kernel_operator_block_sync_intf.h, A2): template <bool isAIVOnly = true> void SyncAll(); the hardware
// barrier of dav_c220 uses flag ids 11-14 (CrossCoreSetFlag refuses them). The software form with a GM and a
// UB workspace is not emulated.
template <bool isAIVOnly = true>
__aicore__ inline void SyncAll() { ascendc_emu::SyncAllBarrier(isAIVOnly); }

namespace detail {
constexpr int kEventPipes[][2] = {
    {PIPE_MTE2, PIPE_V}, {PIPE_V, PIPE_MTE2}, {PIPE_V, PIPE_MTE3}, {PIPE_MTE3, PIPE_V}, {PIPE_MTE3, PIPE_MTE2},
    {PIPE_MTE2, PIPE_MTE3}, {PIPE_FIX, PIPE_MTE2}, {PIPE_MTE2, PIPE_FIX}, {PIPE_V, PIPE_S}, {PIPE_S, PIPE_V},
    {PIPE_MTE2, PIPE_S}, {PIPE_S, PIPE_MTE2}, {PIPE_MTE3, PIPE_S}, {PIPE_S, PIPE_MTE3}};
}  // namespace detail
template <HardEvent event>
__aicore__ inline void SetFlag(int32_t eventId)
{
    const auto& p = detail::kEventPipes[static_cast<int>(event)];
    ascendc_emu::EventSet(p[0], p[1], eventId);
}
template <HardEvent event>
__aicore__ inline void WaitFlag(int32_t eventId)
{
    const auto& p = detail::kEventPipes[static_cast<int>(event)];
    ascendc_emu::EventWait(p[0], p[1], eventId);
}

// ---- tensors ----
template <typename T>
class GlobalTensor {
public:
    __aicore__ inline void SetGlobalBuffer(__gm__ T* buffer, uint64_t size = 0) { ptr_ = buffer; size_ = size; }
    __aicore__ inline GlobalTensor operator[](uint64_t offset) const
    {
        GlobalTensor t;
        t.ptr_ = ptr_ + offset;
        t.size_ = size_ > offset ? size_ - offset : 0;
        return t;
    }
    __aicore__ inline T GetValue(uint64_t i) const
    {
        ascendc_emu::GmAccess(ptr_ + i, sizeof(T), false, PIPE_S, "GlobalTensor::GetValue");
        return ptr_[i];
    }
    __aicore__ inline void SetValue(uint64_t i, T v)
    {
        ascendc_emu::GmAccess(ptr_ + i, sizeof(T), true, PIPE_S, "GlobalTensor::SetValue");
        ptr_[i] = v;
    }
    __aicore__ inline __gm__ T* GetPhyAddr() const { return ptr_; }
    __aicore__ inline uint64_t GetSize() const { return size_; }

private:
    T* ptr_ = nullptr;
    uint64_t size_ = 0;
};

template <typename T>
class LocalTensor {
public:
    LocalTensor() = default;
    LocalTensor(T* p, uint32_t n) : ptr_(p), size_(n) {}
    __aicore__ inline LocalTensor operator[](uint32_t offset) const
    {
        if (offset > size_) ascendc_emu::Fatal("ub", "LocalTensor offset " + std::to_string(offset) +
                                                         " past its " + std::to_string(size_) + " elements");
        return LocalTensor(ptr_ + offset, size_ - offset);
    }
    __aicore__ inline T GetValue(uint32_t i) const
    {
        Check(i, "LocalTensor::GetValue");
        ascendc_emu::UbAccess(ptr_ + i, sizeof(T), false, PIPE_S, "LocalTensor::GetValue");
        return ptr_[i];
    }
    // Real: template <typename S> void SetValue(const uint32_t index, const S value) const (kernel_tensor.h)
    template <typename S>
    __aicore__ inline void SetValue(uint32_t i, const S v) const
    {
        Check(i, "LocalTensor::SetValue");
        ascendc_emu::UbAccess(ptr_ + i, sizeof(T), true, PIPE_S, "LocalTensor::SetValue");
        ptr_[i] = static_cast<T>(v);
    }
    __aicore__ inline uint32_t GetSize() const { return size_; }
    __aicore__ inline T* GetPhyAddr() const { return ptr_; }
    template <typename U>
    __aicore__ inline LocalTensor<U> ReinterpretCast() const
    {
        return LocalTensor<U>(reinterpret_cast<U*>(ptr_), static_cast<uint32_t>(size_ * sizeof(T) / sizeof(U)));
    }

    // emulation only: `n` elements from the start, in bounds and in UB, 32-byte aligned; accessed by `pipe`
    T* Span(uint32_t n, const char* what, int pipe, bool write) const
    {
        if (n > size_)
            ascendc_emu::Fatal("ub", std::string(what) + ": " + std::to_string(n) + " elements, local tensor has " +
                                         std::to_string(size_));
        ascendc_emu::CheckUb(ptr_, n * sizeof(T), what, true);
        ascendc_emu::UbAccess(ptr_, n * sizeof(T), write, pipe, what);
        return ptr_;
    }

private:
    void Check(uint32_t i, const char* what) const
    {
        if (i >= size_) ascendc_emu::Fatal("ub", std::string(what) + ": index " + std::to_string(i) + " >= " +
                                                     std::to_string(size_));
        ascendc_emu::CheckUb(ptr_ + i, sizeof(T), what, false);
    }
    T* ptr_ = nullptr;
    uint32_t size_ = 0;
};

// ---- TPipe, TQue, TBuf: UB allocation and the queue discipline ----
// Queue syncs, as AscendC inserts them: VECIN EnQue/DeQue orders MTE2 -> V and FreeTensor/AllocTensor V -> MTE2;
// VECOUT EnQue/DeQue orders V -> MTE3 and FreeTensor/AllocTensor MTE3 -> V.
// Real declaration (asc-devkit include/basic_api/kernel_tpipe.h): template <TPosition pos, int32_t depth, auto mask = 0>
// class TQue. Rules enforced, from asc-devkit docs/zh/api/SIMD-API/基础API/资源管理/Pipe和Que框架/TQue/:
//   - depth = how many EnQue may follow each other without a DeQue (TQue简介.md); the non-inplace EnQue/DeQue
//     need depth != 0 (DeQue.md);
//   - AllocTensor takes one of the `num` buffers InitBuffer gave the queue; with all of them allocated it would
//     wait for a FreeTensor that never comes (refused here);
//   - at most 8 tensors allocated and not freed per TPosition on A2 (AllocTensor.md).
template <TPosition pos, int32_t depth, auto mask = 0>
class TQue {
    static constexpr bool kIn = pos == TPosition::VECIN;
    static_assert(pos == TPosition::VECIN || pos == TPosition::VECOUT, "the emulation has VECIN and VECOUT queues");
    static_assert(depth != 0, "TQue: depth = 0 is the inplace TQueBind form; EnQue/DeQue need depth >= 1 (TQue DeQue docs)");
    static constexpr int kProducer = kIn ? PIPE_MTE2 : PIPE_V, kConsumer = kIn ? PIPE_V : PIPE_MTE3;
    static constexpr const char* kPosName = kIn ? "VECIN" : "VECOUT";

public:
    template <typename T>
    __aicore__ inline LocalTensor<T> AllocTensor()
    {
        for (auto& b : bufs_) {
            if (b.state == kFree) {
                ascendc_emu::PositionAlloc(static_cast<int>(pos), kPosName);
                b.state = kAlloc;
                ascendc_emu::UbOrder(kConsumer, kProducer, b.seq);   // the last consumer is done with it
                return LocalTensor<T>(reinterpret_cast<T*>(b.addr), b.bytes / sizeof(T));
            }
        }
        ascendc_emu::Refuse("TQue::AllocTensor", "num = " + std::to_string(bufs_.size()) + " (InitBuffer)",
                            "every buffer of the queue is allocated: a FreeTensor is missing, the hardware would wait "
                            "forever");
    }
    template <typename T>
    __aicore__ inline void EnQue(const LocalTensor<T>& t)
    {
        Buf& b = Find(t.GetPhyAddr(), "EnQue");
        if (b.state != kAlloc)
            ascendc_emu::Refuse("TQue::EnQue", "tensor", "not allocated from this queue by AllocTensor, or already queued");
        b.state = kQueued;
        b.seq = ascendc_emu::UbSeq();
        fifo_.push_back(&b);
        if (fifo_.size() > static_cast<size_t>(depth))
            ascendc_emu::Refuse("TQue::EnQue", "depth = " + std::to_string(depth),
                                std::to_string(fifo_.size()) + " EnQue without a DeQue between: depth is the number of "
                                "consecutive EnQue a queue takes (TQue docs)");
    }
    template <typename T>
    __aicore__ inline LocalTensor<T> DeQue()
    {
        if (fifo_.empty())
            ascendc_emu::Refuse("TQue::DeQue", "queue", "empty: no EnQue to take, the hardware would wait forever");
        Buf* b = fifo_.front();
        fifo_.pop_front();
        b->state = kAlloc;
        ascendc_emu::UbOrder(kProducer, kConsumer, b->seq);
        return LocalTensor<T>(reinterpret_cast<T*>(b->addr), b->bytes / sizeof(T));
    }
    template <typename T>
    __aicore__ inline void FreeTensor(const LocalTensor<T>& t)
    {
        Buf& b = Find(t.GetPhyAddr(), "FreeTensor");
        if (b.state != kAlloc)
            ascendc_emu::Refuse("TQue::FreeTensor", "tensor", "not allocated, or still queued (DeQue it first)");
        ascendc_emu::PositionFree(static_cast<int>(pos));
        b.state = kFree;
        b.seq = ascendc_emu::UbSeq();
    }
    void InitBuffers(uint8_t num, uint32_t bytes)   // emulation: called by TPipe::InitBuffer
    {
        bufs_.clear();
        for (uint8_t i = 0; i < num; ++i)
            bufs_.push_back({ascendc_emu::UbAlloc(bytes, "TPipe::InitBuffer(TQue)"), bytes, kFree, 0});
    }

private:
    enum State { kFree, kAlloc, kQueued };
    struct Buf {
        uint8_t* addr;
        uint32_t bytes;
        State state;
        uint64_t seq;   // UB access count at EnQue / FreeTensor
    };
    template <typename P>
    Buf& Find(P* p, const char* what)
    {
        for (auto& b : bufs_)
            if (reinterpret_cast<uint8_t*>(p) == b.addr) return b;
        ascendc_emu::Refuse(std::string("TQue::") + what, "tensor", "it belongs to another queue");
    }
    std::vector<Buf> bufs_;
    std::deque<Buf*> fifo_;
};

// Real: template <TPosition pos = TPosition::LCM> class TBuf (kernel_tpipe.h). UB positions (VECIN/VECOUT/VECCALC)
// come from the AIV's Unified Buffer; L1 positions (A1/B1/C1) from the AIC's L1, where the emulation only
// counts the bytes (no AscendC call here reads L1 tensors).
template <TPosition pos = TPosition::LCM>
class TBuf {
    static constexpr bool kL1 = pos == TPosition::A1 || pos == TPosition::B1 || pos == TPosition::C1;
    static_assert(kL1 || pos == TPosition::VECIN || pos == TPosition::VECOUT || pos == TPosition::VECCALC,
                  "the emulation has TBufs on UB (VECIN/VECOUT/VECCALC) and L1 (A1/B1/C1) positions");

public:
    template <typename T>
    __aicore__ inline LocalTensor<T> Get() { return LocalTensor<T>(reinterpret_cast<T*>(addr_), bytes_ / sizeof(T)); }
    template <typename T>
    __aicore__ inline LocalTensor<T> Get(uint32_t n)
    {
        // TBuf/Get.md: "len*sizeof(T)不能超过TBuf初始化时的长度"
        if (n * sizeof(T) > bytes_)
            ascendc_emu::Refuse("TBuf::Get", "len = " + std::to_string(n),
                                "len * sizeof(T) exceeds the " + std::to_string(bytes_) + " bytes InitBuffer gave the TBuf");
        return LocalTensor<T>(reinterpret_cast<T*>(addr_), n);
    }
    void InitBuffer(uint32_t bytes)
    {
        addr_ = kL1 ? ascendc_emu::L1Alloc(bytes, "TPipe::InitBuffer(TBuf)") : ascendc_emu::UbAlloc(bytes, "TPipe::InitBuffer(TBuf)");
        bytes_ = bytes;
    }

private:
    uint8_t* addr_ = nullptr;
    uint32_t bytes_ = 0;
};

// Real: TPipe::InitBuffer(T& que, uint8_t num, uint32_t len) and InitBuffer(TBuf<bufPos>& buf, uint32_t len)
// (TPipe/InitBuffer.md). "一个kernel中所有使用的Buffer数量之和不能超过64": at most 64 buffers per TPipe.
class TPipe {
public:
    TPipe() : mark_(ascendc_emu::IsAiv() ? ascendc_emu::UbMark() : ascendc_emu::L1Mark()) {}
    ~TPipe() { if (ascendc_emu::IsAiv()) ascendc_emu::UbRelease(mark_); else ascendc_emu::L1Release(mark_); }
    template <TPosition pos, int32_t depth, auto mask>
    __aicore__ inline bool InitBuffer(TQue<pos, depth, mask>& que, uint8_t num, uint32_t len)
    {
        Count(num);
        que.InitBuffers(num, len);
        return true;
    }
    template <TPosition pos>
    __aicore__ inline bool InitBuffer(TBuf<pos>& buf, uint32_t len)
    {
        Count(1);
        buf.InitBuffer(len);
        return true;
    }
    TPipe(const TPipe&) = delete;
    TPipe& operator=(const TPipe&) = delete;

private:
    void Count(uint32_t num)
    {
        buffers_ += num;
        if (buffers_ > 64)
            ascendc_emu::Refuse("TPipe::InitBuffer", "num = " + std::to_string(num),
                                std::to_string(buffers_) + " buffers in one kernel; at most 64 (TPipe InitBuffer docs)");
    }
    size_t mark_;
    uint32_t buffers_ = 0;
};

// ---- data movement ----
// As include/basic_api/kernel_struct_data_copy.h: srcStride/dstStride are the older names of srcGap/dstGap.
struct DataCopyParams {
    DataCopyParams() {}
    DataCopyParams(uint16_t count, uint16_t len, uint16_t srcStrideIn, uint16_t dstStrideIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn) {}
    uint16_t blockCount = 1;   // number of blocks, [0, 4095]
    uint16_t blockLen = 0;     // block length, in 32-byte units
    union {
        uint16_t srcGap = 0;   // gap between blocks in the source, in 32-byte units
        uint16_t srcStride;
    };
    union {
        uint16_t dstGap = 0;   // gap between blocks in the destination, in 32-byte units
        uint16_t dstStride;
    };
};

namespace detail {
// GM与UB连续数据搬运(DataCopy).md: "count * sizeof(T)需要32字节对齐，若未对齐，搬运量会向下取整到32字节对齐" -- the
// hardware silently copies less; the emulation refuses it (use DataCopyPad for unaligned lengths).
template <typename T>
inline void CheckDmaLength(uint32_t count, const char* what)
{
    if ((count * sizeof(T)) % 32 != 0)
        ascendc_emu::Refuse(what, "count = " + std::to_string(count) + " (" + std::to_string(count * sizeof(T)) + " bytes)",
                            "count * sizeof(T) must be a multiple of 32 bytes, else the copy is rounded down; unaligned "
                            "lengths need DataCopyPad (DataCopy docs)");
}
// "位于Global Memory的地址必须按照对应数据类型所占字节数对齐" (DataCopy docs, 约束说明)
template <typename T>
inline void CheckGmAlignment(const T* p, const char* what)
{
    if (reinterpret_cast<uintptr_t>(p) % sizeof(T) != 0)
        ascendc_emu::Refuse(what, "GlobalTensor address", "GM operands must be aligned to sizeof(T) (DataCopy docs)");
}
// DataCopyParams ranges (GM与UB高维切分数据搬运(DataCopy).md, 表4): blockCount in [0, 4095]; 0 in blockCount or
// blockLen makes the call a NOP (true on A2).
inline bool CheckDmaParams(const DataCopyParams& p, const char* what)
{
    if (p.blockCount > 4095)
        ascendc_emu::Refuse(what, "DataCopyParams.blockCount = " + std::to_string(p.blockCount),
                            "blockCount must lie in [0, 4095] (DataCopy docs, DataCopyParams ranges)");
    return p.blockCount != 0 && p.blockLen != 0;
}
}  // namespace detail

template <typename T>  // GM -> UB (MTE2)
__aicore__ inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count)
{
    detail::CheckDmaLength<T>(count, "DataCopy GM->UB");
    detail::CheckGmAlignment(src.GetPhyAddr(), "DataCopy GM->UB");
    T* d = dst.Span(count, "DataCopy GM->UB", PIPE_MTE2, true);
    ascendc_emu::GmAccess(src.GetPhyAddr(), count * sizeof(T), false, PIPE_MTE2, "DataCopy GM->UB");
    std::memcpy(d, src.GetPhyAddr(), count * sizeof(T));
}
template <typename T>  // UB -> GM (MTE3)
__aicore__ inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count)
{
    detail::CheckDmaLength<T>(count, "DataCopy UB->GM");
    detail::CheckGmAlignment(dst.GetPhyAddr(), "DataCopy UB->GM");
    const T* s = src.Span(count, "DataCopy UB->GM", PIPE_MTE3, false);
    ascendc_emu::GmAccess(dst.GetPhyAddr(), count * sizeof(T), true, PIPE_MTE3, "DataCopy UB->GM");
    std::memcpy(dst.GetPhyAddr(), s, count * sizeof(T));
}
template <typename T>  // UB -> UB
__aicore__ inline void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count)
{
    detail::CheckDmaLength<T>(count, "DataCopy UB->UB");
    const T* s = src.Span(count, "DataCopy UB->UB", PIPE_V, false);   // a vector-pipe copy (assumed)
    std::memmove(dst.Span(count, "DataCopy UB->UB", PIPE_V, true), s, count * sizeof(T));
}
template <typename T>  // GM -> UB, strided blocks
__aicore__ inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p)
{
    if (!detail::CheckDmaParams(p, "DataCopy GM->UB")) return;
    detail::CheckGmAlignment(src.GetPhyAddr(), "DataCopy GM->UB");
    const size_t blk = p.blockLen * 32u, total = p.blockCount * blk + (p.blockCount - 1u) * p.dstStride * 32u;
    uint8_t* d = reinterpret_cast<uint8_t*>(dst.Span(static_cast<uint32_t>(total / sizeof(T)), "DataCopy GM->UB", PIPE_MTE2, true));
    const uint8_t* s = reinterpret_cast<const uint8_t*>(src.GetPhyAddr());
    for (uint16_t i = 0; i < p.blockCount; ++i) {
        const uint8_t* si = s + i * (blk + p.srcStride * 32u);
        ascendc_emu::GmAccess(si, blk, false, PIPE_MTE2, "DataCopy GM->UB");
        std::memcpy(d + i * (blk + p.dstStride * 32u), si, blk);
    }
}
template <typename T>  // UB -> GM, strided blocks
__aicore__ inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p)
{
    if (!detail::CheckDmaParams(p, "DataCopy UB->GM")) return;
    detail::CheckGmAlignment(dst.GetPhyAddr(), "DataCopy UB->GM");
    const size_t blk = p.blockLen * 32u, total = p.blockCount * blk + (p.blockCount - 1u) * p.srcStride * 32u;
    const uint8_t* s =
        reinterpret_cast<const uint8_t*>(src.Span(static_cast<uint32_t>(total / sizeof(T)), "DataCopy UB->GM", PIPE_MTE3, false));
    uint8_t* d = reinterpret_cast<uint8_t*>(dst.GetPhyAddr());
    for (uint16_t i = 0; i < p.blockCount; ++i) {
        uint8_t* di = d + i * (blk + p.dstStride * 32u);
        ascendc_emu::GmAccess(di, blk, true, PIPE_MTE3, "DataCopy UB->GM");
        std::memcpy(di, s + i * (blk + p.srcStride * 32u), blk);
    }
}

// ---- vector instructions (level-2 API: `count` elements from aligned starts) ----
namespace detail {
template <typename T, typename F>
inline void Binary(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, int32_t n,
                   const char* what, F f)
{
    const T* x = a.Span(n, what, PIPE_V, false);
    const T* y = b.Span(n, what, PIPE_V, false);
    T* d = dst.Span(n, what, PIPE_V, true);
    for (int32_t i = 0; i < n; ++i) d[i] = static_cast<T>(f(static_cast<float>(x[i]), static_cast<float>(y[i])));
}
template <typename T, typename F>
inline void Unary(const LocalTensor<T>& dst, const LocalTensor<T>& a, int32_t n, const char* what, F f)
{
    const T* x = a.Span(n, what, PIPE_V, false);
    T* d = dst.Span(n, what, PIPE_V, true);
    for (int32_t i = 0; i < n; ++i) d[i] = static_cast<T>(f(static_cast<float>(x[i])));
}
template <typename T>
constexpr bool kVecFloat = std::is_same<T, float>::value || std::is_same<T, half>::value;
// Atlas A2 types of Add / Sub / Mul / Muls / Adds: "T支持的数据类型为：int16_t、half、int32_t、float" (Memory矢量计算/
// 基础算术/Add.md, Muls.md ...); no bfloat16_t arithmetic on A2 (compute in fp32 and Cast).
template <typename T>
constexpr bool kVecArith = kVecFloat<T> || std::is_same<T, int16_t>::value || std::is_same<T, int32_t>::value;
// Duplicate on A2: int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float (数据填充/Duplicate.md).
template <typename T>
constexpr bool kVecFill = kVecArith<T> || std::is_same<T, uint16_t>::value || std::is_same<T, uint32_t>::value ||
                          std::is_same<T, bfloat16_t>::value;
}  // namespace detail

template <typename T>
__aicore__ inline void Add(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& n)
{
    static_assert(detail::kVecArith<T>, "Add: T must be int16_t, half, int32_t or float on Atlas A2 (Add docs)");
    detail::Binary(dst, a, b, n, "Add", [](float x, float y) { return x + y; });
}
template <typename T>
__aicore__ inline void Sub(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& n)
{
    static_assert(detail::kVecArith<T>, "Sub: T must be int16_t, half, int32_t or float on Atlas A2 (Sub docs)");
    detail::Binary(dst, a, b, n, "Sub", [](float x, float y) { return x - y; });
}
template <typename T>
__aicore__ inline void Mul(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& n)
{
    static_assert(detail::kVecArith<T>, "Mul: T must be int16_t, half, int32_t or float on Atlas A2 (Mul docs)");
    detail::Binary(dst, a, b, n, "Mul", [](float x, float y) { return x * y; });
}
template <typename T>
__aicore__ inline void Muls(const LocalTensor<T>& dst, const LocalTensor<T>& a, const T& s, const int32_t& n)
{
    static_assert(detail::kVecArith<T>, "Muls: T must be int16_t, half, int32_t or float on Atlas A2 (Muls docs)");
    const float sf = static_cast<float>(s);
    detail::Unary(dst, a, n, "Muls", [sf](float x) { return x * sf; });
}
template <typename T>
__aicore__ inline void Adds(const LocalTensor<T>& dst, const LocalTensor<T>& a, const T& s, const int32_t& n)
{
    static_assert(detail::kVecArith<T>, "Adds: T must be int16_t, half, int32_t or float on Atlas A2 (Adds docs)");
    const float sf = static_cast<float>(s);
    detail::Unary(dst, a, n, "Adds", [sf](float x) { return x + sf; });
}
template <typename T>
__aicore__ inline void Exp(const LocalTensor<T>& dst, const LocalTensor<T>& a, const int32_t& n)
{
    static_assert(detail::kVecFloat<T>, "Exp: T must be half or float on Atlas A2 (Exp docs)");
    float largest = -INFINITY;   // the largest argument: exp factors <= 1 need it <= 0 (report: exp_max_arg)
    detail::Unary(dst, a, n, "Exp", [&largest](float x) {
        if (x > largest) largest = x;
        return std::exp(x);
    });
    ascendc_emu::NoteExpArgument(largest);
}
template <typename T>
__aicore__ inline void Ln(const LocalTensor<T>& dst, const LocalTensor<T>& a, const int32_t& n)
{
    static_assert(detail::kVecFloat<T>, "Ln: T must be half or float on Atlas A2 (Ln docs)");
    detail::Unary(dst, a, n, "Ln", [](float x) { return std::log(x); });
}
// Level-2 ReduceSum: dst[0] = sum of src[0, count). The work buffer holds one partial sum per repeat
// (256 bytes of src), rounded up to a 32-byte block; the emulation sums repeat by repeat, in fp32.
template <typename T>
__aicore__ inline void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& work,
                                 const int32_t count)
{
    static_assert(detail::kVecFloat<T>, "ReduceSum: T must be half or float on Atlas A2 (ReduceSum docs)");
    constexpr int32_t perRepeat = 256 / sizeof(T), perBlock = 32 / sizeof(T);
    const int32_t repeats = (count + perRepeat - 1) / perRepeat;
    const T* x = src.Span(count, "ReduceSum", PIPE_V, false);
    T* w = work.Span((repeats + perBlock - 1) / perBlock * perBlock, "ReduceSum (work)", PIPE_V, true);
    float total = 0.0f;
    for (int32_t r = 0; r < repeats; ++r) {
        float part = 0.0f;
        for (int32_t i = r * perRepeat; i < count && i < (r + 1) * perRepeat; ++i) part += static_cast<float>(x[i]);
        w[r] = static_cast<T>(part);
        total += part;
    }
    dst.Span(1, "ReduceSum", PIPE_V, true)[0] = static_cast<T>(total);
}
template <typename T>
__aicore__ inline void Duplicate(const LocalTensor<T>& dst, const T& s, const int32_t& n)
{
    static_assert(detail::kVecFill<T>, "Duplicate: T is not an Atlas A2 Duplicate type (Duplicate docs)");
    T* d = dst.Span(n, "Duplicate", PIPE_V, true);
    for (int32_t i = 0; i < n; ++i) d[i] = s;
}
// Real: template <typename T, typename U> void Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src,
// const RoundMode& roundMode, const uint32_t count). The A2 table (类型转换/Cast.md) pairs float -> bfloat16_t / half
// with CAST_RINT/FLOOR/CEIL/ROUND/TRUNC(/ODD for half) and bfloat16_t / half -> float with CAST_NONE; the
// emulation implements those pairs with CAST_RINT and CAST_NONE.
template <typename D, typename S>
__aicore__ inline void Cast(const LocalTensor<D>& dst, const LocalTensor<S>& src, const RoundMode& mode, const uint32_t n)
{
    static_assert((std::is_same<S, float>::value && (std::is_same<D, bfloat16_t>::value || std::is_same<D, half>::value)) ||
                      (std::is_same<D, float>::value && (std::is_same<S, bfloat16_t>::value || std::is_same<S, half>::value)),
                  "Cast: the emulation has float <-> bfloat16_t / half (pairs of the A2 Cast table)");
    constexpr bool narrow = sizeof(D) < sizeof(S);
    if (narrow && mode != RoundMode::CAST_RINT)
        ascendc_emu::Fatal("unsupported", "Cast to a narrower type: only RoundMode::CAST_RINT is emulated");
    if (!narrow && mode != RoundMode::CAST_NONE)
        ascendc_emu::Fatal("unsupported", "Cast to a wider type is exact: use RoundMode::CAST_NONE");
    const S* s = src.Span(n, "Cast", PIPE_V, false);
    D* d = dst.Span(n, "Cast", PIPE_V, true);
    if (static_cast<const void*>(d) == static_cast<const void*>(s) && sizeof(D) != sizeof(S))
        ascendc_emu::Fatal("unsupported", "Cast between types of different sizes in place");
    for (uint32_t i = 0; i < n; ++i) d[i] = static_cast<D>(static_cast<float>(s[i]));
}

}  // namespace AscendC
