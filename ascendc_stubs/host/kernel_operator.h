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

enum KernelMetaType : int {
    KERNEL_TYPE_AIV_ONLY = 0,
    KERNEL_TYPE_AIC_ONLY = 1,
    KERNEL_TYPE_MIX_AIC_1_2 = 2,
    KERNEL_TYPE_MIX_AIC_1_1 = 3,
    KERNEL_TYPE_MIX_AIV_1_0 = 4,
    KERNEL_TYPE_MIX_AIC_1_0 = 5,
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

enum class TPosition : uint8_t { GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC, LCM = VECCALC, TSCM };
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
    __aicore__ inline void SetValue(uint32_t i, T v)
    {
        Check(i, "LocalTensor::SetValue");
        ascendc_emu::UbAccess(ptr_ + i, sizeof(T), true, PIPE_S, "LocalTensor::SetValue");
        ptr_[i] = v;
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
template <TPosition pos, int32_t depth>
class TQue {
    static constexpr bool kIn = pos == TPosition::VECIN;
    static_assert(pos == TPosition::VECIN || pos == TPosition::VECOUT, "the emulation has VECIN and VECOUT queues");
    static constexpr int kProducer = kIn ? PIPE_MTE2 : PIPE_V, kConsumer = kIn ? PIPE_V : PIPE_MTE3;

public:
    template <typename T>
    __aicore__ inline LocalTensor<T> AllocTensor()
    {
        for (auto& b : bufs_) {
            if (b.state == kFree) {
                b.state = kAlloc;
                ascendc_emu::UbOrder(kConsumer, kProducer, b.seq);   // the last consumer is done with it
                return LocalTensor<T>(reinterpret_cast<T*>(b.addr), b.bytes / sizeof(T));
            }
        }
        ascendc_emu::Fatal("queue", "TQue::AllocTensor: all " + std::to_string(bufs_.size()) +
                                        " buffers are in use (a FreeTensor is missing; the hardware would block)");
    }
    template <typename T>
    __aicore__ inline void EnQue(const LocalTensor<T>& t)
    {
        Buf& b = Find(t.GetPhyAddr(), "EnQue");
        if (b.state != kAlloc) ascendc_emu::Fatal("queue", "TQue::EnQue of a tensor that is not allocated");
        b.state = kQueued;
        b.seq = ascendc_emu::UbSeq();
        fifo_.push_back(&b);
        if (fifo_.size() > static_cast<size_t>(depth))
            ascendc_emu::Fatal("queue", "TQue::EnQue: more than depth " + std::to_string(depth) + " tensors queued");
    }
    template <typename T>
    __aicore__ inline LocalTensor<T> DeQue()
    {
        if (fifo_.empty()) ascendc_emu::Fatal("queue", "TQue::DeQue on an empty queue (the hardware would block)");
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
        if (b.state != kAlloc) ascendc_emu::Fatal("queue", "TQue::FreeTensor of a tensor not allocated / still queued");
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
        ascendc_emu::Fatal("queue", std::string("TQue::") + what + " of a tensor from another queue");
    }
    std::vector<Buf> bufs_;
    std::deque<Buf*> fifo_;
};

template <TPosition pos>
class TBuf {
public:
    template <typename T>
    __aicore__ inline LocalTensor<T> Get() { return LocalTensor<T>(reinterpret_cast<T*>(addr_), bytes_ / sizeof(T)); }
    template <typename T>
    __aicore__ inline LocalTensor<T> Get(uint32_t n)
    {
        if (n * sizeof(T) > bytes_) ascendc_emu::Fatal("ub", "TBuf::Get: more elements than the buffer holds");
        return LocalTensor<T>(reinterpret_cast<T*>(addr_), n);
    }
    void InitBuffer(uint32_t bytes) { addr_ = ascendc_emu::UbAlloc(bytes, "TPipe::InitBuffer(TBuf)"); bytes_ = bytes; }

private:
    uint8_t* addr_ = nullptr;
    uint32_t bytes_ = 0;
};

class TPipe {
public:
    TPipe() : mark_(ascendc_emu::IsAiv() ? ascendc_emu::UbMark() : 0) {}
    ~TPipe() { if (ascendc_emu::IsAiv()) ascendc_emu::UbRelease(mark_); }
    template <TPosition pos, int32_t depth>
    __aicore__ inline bool InitBuffer(TQue<pos, depth>& que, uint8_t num, uint32_t len)
    {
        que.InitBuffers(num, len);
        return true;
    }
    template <TPosition pos>
    __aicore__ inline bool InitBuffer(TBuf<pos>& buf, uint32_t len)
    {
        buf.InitBuffer(len);
        return true;
    }
    TPipe(const TPipe&) = delete;
    TPipe& operator=(const TPipe&) = delete;

private:
    size_t mark_;
};

// ---- data movement ----
struct DataCopyParams {
    uint16_t blockCount = 1;   // number of blocks
    uint16_t blockLen = 0;     // block length, in 32-byte units
    uint16_t srcStride = 0;    // gap between blocks in the source, in 32-byte units
    uint16_t dstStride = 0;    // gap between blocks in the destination, in 32-byte units
};

namespace detail {
template <typename T>
inline void CheckDmaLength(uint32_t count, const char* what)
{
    if ((count * sizeof(T)) % 32 != 0)
        ascendc_emu::Fatal("align", std::string(what) + ": " + std::to_string(count * sizeof(T)) +
                                        " bytes is not a multiple of 32 (use DataCopyPad)");
}
}  // namespace detail

template <typename T>  // GM -> UB (MTE2)
__aicore__ inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count)
{
    detail::CheckDmaLength<T>(count, "DataCopy GM->UB");
    T* d = dst.Span(count, "DataCopy GM->UB", PIPE_MTE2, true);
    ascendc_emu::GmAccess(src.GetPhyAddr(), count * sizeof(T), false, PIPE_MTE2, "DataCopy GM->UB");
    std::memcpy(d, src.GetPhyAddr(), count * sizeof(T));
}
template <typename T>  // UB -> GM (MTE3)
__aicore__ inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count)
{
    detail::CheckDmaLength<T>(count, "DataCopy UB->GM");
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
}  // namespace detail

template <typename T>
__aicore__ inline void Add(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& n)
{
    detail::Binary(dst, a, b, n, "Add", [](float x, float y) { return x + y; });
}
template <typename T>
__aicore__ inline void Sub(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& n)
{
    detail::Binary(dst, a, b, n, "Sub", [](float x, float y) { return x - y; });
}
template <typename T>
__aicore__ inline void Mul(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& n)
{
    detail::Binary(dst, a, b, n, "Mul", [](float x, float y) { return x * y; });
}
template <typename T>
__aicore__ inline void Muls(const LocalTensor<T>& dst, const LocalTensor<T>& a, const T& s, const int32_t& n)
{
    const float sf = static_cast<float>(s);
    detail::Unary(dst, a, n, "Muls", [sf](float x) { return x * sf; });
}
template <typename T>
__aicore__ inline void Adds(const LocalTensor<T>& dst, const LocalTensor<T>& a, const T& s, const int32_t& n)
{
    const float sf = static_cast<float>(s);
    detail::Unary(dst, a, n, "Adds", [sf](float x) { return x + sf; });
}
template <typename T>
__aicore__ inline void Exp(const LocalTensor<T>& dst, const LocalTensor<T>& a, const int32_t& n)
{
    static_assert(detail::kVecFloat<T>, "Exp takes half or float");
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
    static_assert(detail::kVecFloat<T>, "Ln takes half or float");
    detail::Unary(dst, a, n, "Ln", [](float x) { return std::log(x); });
}
// Level-2 ReduceSum: dst[0] = sum of src[0, count). The work buffer holds one partial sum per repeat
// (256 bytes of src), rounded up to a 32-byte block; the emulation sums repeat by repeat, in fp32.
template <typename T>
__aicore__ inline void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& work,
                                 const int32_t count)
{
    static_assert(detail::kVecFloat<T>, "ReduceSum takes half or float");
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
    T* d = dst.Span(n, "Duplicate", PIPE_V, true);
    for (int32_t i = 0; i < n; ++i) d[i] = s;
}
template <typename D, typename S>
__aicore__ inline void Cast(const LocalTensor<D>& dst, const LocalTensor<S>& src, const RoundMode& mode, const uint32_t n)
{
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
