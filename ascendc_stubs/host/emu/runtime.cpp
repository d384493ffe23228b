// The emulated machine: threads, mode-2 flags, GM race detection, UB arenas, the event log. See runtime.h.
#include "emu/runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

namespace ascendc_emu {
namespace {

constexpr int kFlagIds = 16;          // flag counters per core (the hardware keeps the low 4 bits of an id)
// A counter counts 0-15 (asc-devkit docs CrossCoreSetFlag(ISASI).md: "每一个计数器计数范围为0-15"; CANN 9.0
// docs: "同一flagId的计数器最多设置15次"; CANN 8.0 docs said 16): a 16th pending set is refused.
constexpr int kFlagMax = 15;
// CrossCoreSetFlag / CrossCoreWaitFlag flag ids on Atlas A2/A3. CANN 8.0.RC3 .. 9.0 docs (atlasascendc_api_07_0273
// / 0274): "取值范围是0-10". CANN 8.0.RC2 docs (api_07_0268) and asc-devkit 9.1's own docs: 0-15, of which
// SyncAll's hardware path uses 11-14 (dav_c220 kernel_operator_sync_impl.h: SYNC_AIC_FLAG 11, SYNC_AIV_FLAG 12,
// SYNC_AIC_AIV_FLAG 13, SYNC_AIV_ONLY_ALL 14). The emulation follows the CANN 8.x/9.0 range, 0-10, which every
// version accepts; ids 11-14 get SyncAll's name in the message.
constexpr int kFlagIdMax = 10;
constexpr int kMatmulObjectsMax = 4;  // "Matmul最多支持定义4个对象" (CrossCoreSetFlag(ISASI).md)
// Atlas A2: at most 8 AllocTensor outstanding per TPosition (asc-devkit docs TQue/AllocTensor.md, 约束说明).
constexpr int kAllocPerPositionMax = 8;
constexpr size_t kGranule = 2;        // race-detector granule: the smallest element (bf16 / fp16)
constexpr int kMixAic11 = 4, kMixAic12 = 5;   // KernelMetaType (impl/basic_api/utils/kernel_utils_macros.h)

using Clock = std::vector<uint32_t>;  // vector clock, one entry per emulated thread

struct EmuAbort {};

struct Range {
    const uint8_t* lo;
    const uint8_t* hi;
    std::string label;
};

struct Thread {
    int tid = 0, block = 0, sub = 0;
    bool aic = true;
    Clock vc;
    std::vector<Range> pending[kPipeCount];   // GM writes a later instruction may overtake (per pipe)
    std::vector<std::string> written;         // hand-off tensors written since this thread's last flag set
    int lastFlagOp = 0, lastFlagId = -1;      // 1 = set, 2 = wait
    std::vector<uint8_t> ubStore;
    uint8_t* ub = nullptr;
    size_t ubUsed = 0, ubPeak = 0;
    size_t l1Used = 0, l1Peak = 0;               // AIC: TPipe buffers on L1 positions (A1/B1/C1)
    std::vector<uint8_t> l1Store;
    std::map<int, int> allocated;                // TPosition -> AllocTensor calls not yet freed
    float expMaxArg = -INFINITY;                 // largest Exp argument on this thread
    uint64_t cubeMacs = 0;                       // Matmul multiply-adds on this thread
    // intra-core UB hazard model (AIV only), per 4-byte granule
    struct UbCell {
        uint64_t wSeq = 0;
        uint64_t rSeq[kPipeCount] = {};
        int8_t wPipe = -1;
    };
    std::vector<UbCell> ubShadow;
    std::set<std::string> ubReported;             // one report per instruction and pipe pair
    std::map<int, uint64_t> events;               // SetFlag<HardEvent>(id) waiting for its WaitFlag
    uint64_t ubSeq = 0;
    uint64_t ordered[kPipeCount][kPipeCount] = {};   // [from][to]: from's accesses up to this seq are done
    std::string name;
};

struct Region {
    std::string label, tensor;
    const uint8_t* base = nullptr;
    size_t bytes = 0;
    RegionKind kind = RegionKind::Input;
    int owner = -1;
    std::string buffer;                       // one access may run on into the next region of the same buffer
    int parts = 0;                            // threads that may touch it (3 for a core's own buffers)
    std::vector<uint64_t> wEpoch;             // per granule: (tid + 1) << 32 | clock of the last write
    std::vector<uint32_t> rClock;             // per granule x part: clock of each thread's last read
};

struct Event {
    uint64_t seq;
    int block, sub;
    bool aic;
    bool set;                                 // a CrossCoreSetFlag (or, with flag = -1, a SyncAll)
    int flag, mode, pipe;
    std::vector<std::string> wrote;
};

struct ErrorRec {
    std::string kind, message;
};

struct Machine {
    LaunchConfig cfg;
    std::vector<std::unique_ptr<Region>> regions;   // sorted by base at launch
    std::vector<std::unique_ptr<Thread>> threads;
    // flags[block]: toAiv[sub][id] and toAic[id][sub], each a queue of the setters' clocks
    struct CoreFlags {
        std::deque<Clock> toAiv[2][kFlagIds];
        std::deque<Clock> toAic[kFlagIds][2];
        int matmulObjects = 0;                      // REGIST_MATMUL_OBJ calls on this core's AIC
        uint32_t flagIdsUsed = 0;                   // ids any unit of this core set or waited on
        int firstFlagId = -1;
    };
    std::vector<CoreFlags> flags;
    struct Barrier {
        int arrived = 0;
        uint64_t generation = 0;
        Clock joined, released;
    } barrier[2];                                   // [0]: SyncAll<false> (all units), [1]: SyncAll<true> (AIVs)
    std::vector<Event> events;
    std::vector<ErrorRec> errors;
    std::set<std::string> reported;                 // de-duplication keys for races
    std::map<std::string, int> suppressed;
    std::mutex mu;
    std::condition_variable cv;
    std::atomic<bool> aborted{false};
    bool hang = false;
    int kernelType = -1;
    uint64_t seq = 0;
};

Machine& M()
{
    static Machine m;
    return m;
}

thread_local Thread* tSelf = nullptr;

Thread& Self()
{
    if (tSelf == nullptr) {
        std::fprintf(stderr, "ascendc_emu: kernel API called outside an emulated core\n");
        std::abort();
    }
    return *tSelf;
}

void CheckAbort()
{
    if (M().aborted.load()) throw EmuAbort{};
}

// Record an error; caller holds the lock.
void ErrorLocked(const std::string& kind, const std::string& message)
{
    Machine& m = M();
    if (m.errors.size() < 200) m.errors.push_back({kind, message});
}

[[noreturn]] void FatalLocked(const std::string& kind, const std::string& message)
{
    Machine& m = M();
    ErrorLocked(kind, message);
    if (kind == "hang") m.hang = true;
    m.aborted = true;
    m.cv.notify_all();
    throw EmuAbort{};
}

std::string ThreadName(int tid)
{
    const int block = tid / 3, r = tid % 3;
    return "core" + std::to_string(block) + (r == 0 ? ".AIC" : r == 1 ? ".AIV0" : ".AIV1");
}

Region* FindRegion(const uint8_t* p)
{
    auto& rs = M().regions;
    auto it = std::upper_bound(rs.begin(), rs.end(), p,
                               [](const uint8_t* a, const std::unique_ptr<Region>& r) { return a < r->base; });
    if (it == rs.begin()) return nullptr;
    --it;
    Region* r = it->get();
    return p < r->base + r->bytes ? r : nullptr;
}

void Join(Clock& into, const Clock& other)
{
    for (size_t i = 0; i < into.size(); ++i) into[i] = std::max(into[i], other[i]);
}

void ReportRace(Region& r, Thread& t, bool write, int otherTid, bool otherWrite, uint32_t otherClock,
                const char* what)
{
    Machine& m = M();
    std::string key = r.label + "|" + std::to_string(t.tid) + (write ? "w" : "r") + "|" +
                      std::to_string(otherTid) + (otherWrite ? "w" : "r");
    if (!m.reported.insert(key).second) {
        ++m.suppressed[r.label];
        return;
    }
    std::ostringstream os;
    os << "race on " << r.label << " (" << r.tensor << "): " << t.name << " " << (write ? "writes" : "reads")
       << " it (" << what << ") but " << ThreadName(otherTid) << "'s " << (otherWrite ? "write" : "read")
       << " (after its flag set #" << (otherClock - 1) << ") is not ordered before by any "
       << "CrossCoreSetFlag -> CrossCoreWaitFlag chain";
    ErrorLocked("race", os.str());
}

void ShadowAccess(Region& r, Thread& t, size_t off, size_t bytes, bool write, const char* what)
{
    if (r.kind == RegionKind::Input || r.kind == RegionKind::Tiling) return;
    int part = t.tid;
    if (r.owner >= 0) {
        part = t.tid - 3 * r.owner;
        if (part < 0 || part > 2) {
            ErrorLocked("ownership", t.name + " touches " + r.label + ", which belongs to core " +
                                         std::to_string(r.owner));
            return;
        }
    }
    const size_t g0 = off / kGranule, g1 = (off + bytes + kGranule - 1) / kGranule;
    const Clock& vc = t.vc;
    for (size_t g = g0; g < g1; ++g) {
        const uint64_t we = r.wEpoch[g];
        if (we != 0) {
            const int wt = static_cast<int>(we >> 32) - 1;
            const uint32_t wc = static_cast<uint32_t>(we);
            if (wt != t.tid && wc > vc[wt]) ReportRace(r, t, write, wt, true, wc, what);
        }
        uint32_t* reads = &r.rClock[g * r.parts];
        if (write) {
            for (int p = 0; p < r.parts; ++p) {
                const int ptid = r.owner >= 0 ? 3 * r.owner + p : p;
                if (ptid != t.tid && reads[p] > vc[ptid]) ReportRace(r, t, true, ptid, false, reads[p], what);
                reads[p] = 0;
            }
            r.wEpoch[g] = (static_cast<uint64_t>(t.tid + 1) << 32) | vc[t.tid];
        } else {
            reads[part] = vc[t.tid];
        }
    }
}

bool Overlaps(const Range& a, const uint8_t* lo, const uint8_t* hi) { return a.lo < hi && lo < a.hi; }

}  // namespace

const char* PipeName(int pipe)
{
    static const char* names[] = {"PIPE_S", "PIPE_V", "PIPE_M", "PIPE_MTE1", "PIPE_MTE2", "PIPE_MTE3",
                                  "PIPE_ALL", "PIPE_FIX"};
    return pipe >= 0 && pipe < kPipeCount ? names[pipe] : "PIPE_?";
}

int BlockIdx() { Thread& t = Self(); return t.aic ? t.block : t.block * 2 + t.sub; }
int BlockNum() { return M().cfg.blockDim; }
int SubBlockIdx() { return Self().sub; }
bool IsAic() { return Self().aic; }
bool IsAiv() { return !Self().aic; }
uint64_t TilingKey() { return M().cfg.tilingKey; }
std::string CoreName() { return Self().name; }

void SetKernelType(int type)
{
    std::lock_guard<std::mutex> lk(M().mu);
    M().kernelType = type;
}

uint8_t* SysWorkspace() { return M().cfg.workspace; }
uint8_t* UserWorkspace(uint8_t* workspace)
{
    return workspace == nullptr ? nullptr : workspace + M().cfg.sysWorkspaceBytes;
}

void Fatal(const std::string& kind, const std::string& message)
{
    std::unique_lock<std::mutex> lk(M().mu);
    FatalLocked(kind, (tSelf ? tSelf->name + ": " : std::string()) + message);
}

void Refuse(const std::string& api, const std::string& argument, const std::string& rule)
{
    Fatal("api", api + ": " + argument + ": " + rule);
}

void Error(const std::string& kind, const std::string& message)
{
    std::lock_guard<std::mutex> lk(M().mu);
    ErrorLocked(kind, (tSelf ? tSelf->name + ": " : std::string()) + message);
}

namespace {
// One access to [lo, hi) of region r; caller holds the lock.
void GmAccessRegion(Region* r, Thread& t, const uint8_t* lo, const uint8_t* hi, bool write, int pipe, const char* what)
{
    const size_t bytes = static_cast<size_t>(hi - lo);
    if (write && (r->kind == RegionKind::Input || r->kind == RegionKind::Tiling))
        ErrorLocked("input", t.name + ": " + what + " writes to the input " + r->label);
    if (r->kind == RegionKind::Tiling && !write) return;
    if (!write) {
        // same-core read-after-write through GM on another pipe needs a barrier or an event in between
        for (int p = 0; p < kPipeCount; ++p) {
            if (p == pipe) continue;
            for (const Range& w : t.pending[p]) {
                if (Overlaps(w, lo, hi)) {
                    ErrorLocked("hazard", t.name + ": " + what + " reads " + r->label + " on " + PipeName(pipe) +
                                              " while its own " + PipeName(p) +
                                              " write may still be in flight (add PipeBarrier or "
                                              "SetFlag/WaitFlag<HardEvent>)");
                    t.pending[p].clear();
                    break;
                }
            }
        }
    } else if (r->kind != RegionKind::Input) {
        auto& pend = t.pending[pipe];
        if (!pend.empty() && pend.back().hi == lo && pend.back().label == r->label) pend.back().hi = hi;
        else pend.push_back({lo, hi, r->label});
        if (r->kind == RegionKind::Workspace &&
            std::find(t.written.begin(), t.written.end(), r->tensor) == t.written.end())
            t.written.push_back(r->tensor);
    }
    ShadowAccess(*r, t, static_cast<size_t>(lo - r->base), bytes, write, what);
}
}  // namespace

void GmAccess(const void* addr, size_t bytes, bool write, int pipe, const char* what)
{
    CheckAbort();
    if (bytes == 0) return;
    Thread& t = Self();
    Machine& m = M();
    std::unique_lock<std::mutex> lk(m.mu);
    const uint8_t* lo = static_cast<const uint8_t*>(addr);
    const uint8_t* hi = lo + bytes;
    // The regions the access covers: one, or several adjacent ones of one buffer (a matrix holding two tensors).
    std::vector<std::pair<Region*, const uint8_t*>> parts;   // region, where the access leaves it
    for (Region* r = FindRegion(lo);;) {
        if (r == nullptr) {
            std::ostringstream os;
            os << t.name << ": " << what << " " << (write ? "writes" : "reads") << " " << bytes << " bytes at GM "
               << addr << " outside every GM buffer";
            FatalLocked("bounds", os.str());
        }
        const uint8_t* end = std::min(hi, r->base + r->bytes);
        parts.emplace_back(r, end);
        if (end == hi) break;
        Region* next = FindRegion(end);
        if (next == nullptr || next->base != end || r->buffer.empty() || next->buffer != r->buffer) {
            std::ostringstream os;
            os << t.name << ": " << what << " " << (write ? "writes" : "reads") << " " << bytes << " bytes at GM "
               << addr << " past the end of " << r->label;
            FatalLocked("bounds", os.str());
        }
        r = next;
    }
    const uint8_t* partLo = lo;
    for (auto& [r, partHi] : parts) {
        GmAccessRegion(r, t, partLo, partHi, write, pipe, what);
        partLo = partHi;
    }
}

namespace {
[[noreturn]] void RefuseLocked(const std::string& api, const std::string& argument, const std::string& rule)
{
    FatalLocked("api", (tSelf ? tSelf->name + ": " : std::string()) + api + ": " + argument + ": " + rule);
}

// The rules of CrossCoreSetFlag / CrossCoreWaitFlag on Atlas A2 (asc-devkit docs/zh/api/SIMD-API/基础API/同步控制/
// 核间同步/CrossCoreSetFlag(ISASI).md and CrossCoreWaitFlag(ISASI).md; CANN docs atlasascendc_api_07_0273/0274).
// Caller holds the lock.
void CheckFlagCall(const char* api, int mode, int pipe, int flagId, bool set)
{
    Machine& m = M();
    Thread& t = Self();
    // modeId: A2/A3 support modes 0, 1, 2 (mode 4 is Ascend 950 only). The emulation implements mode 2. A wait's
    // modeId is ignored on A2 (dav_c220 WaitEventImpl: "(void)modeId; wait_flag_dev(flagId)"; its default is 0).
    if (set && mode != 0 && mode != 1 && mode != 2)
        RefuseLocked(api, "modeId = " + std::to_string(mode), "Atlas A2 supports modes 0, 1, 2 (mode 4: Ascend 950 only)");
    if (set && mode != 2)
        FatalLocked("unsupported", t.name + ": " + api + " mode " + std::to_string(mode) + " is not emulated (mode 2 only)");
    // Mode 2 needs a mix kernel with AIC and AIV: 表3 "模式2: KERNEL_TYPE_MIX_AIC_1_1、KERNEL_TYPE_MIX_AIC_1_2".
    if (m.kernelType != kMixAic11 && m.kernelType != kMixAic12)
        RefuseLocked(api, "modeId = 2", "needs KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_1 or _1_2) (CrossCoreSetFlag "
                                        "docs, table 3)");
    // pipe, modes 0-2: "支持的流水类型为PIPE_V、PIPE_M、PIPE_MTE1、PIPE_MTE2、PIPE_MTE3、PIPE_FIX; 不支持PIPE_ALL、PIPE_S".
    // The wait's pipe is not restricted (its default is PIPE_S).
    if (set && (pipe == kPipeS || pipe == kPipeAll))
        RefuseLocked(api, std::string("pipe = ") + PipeName(pipe),
                     "modes 0-2 take PIPE_V/M/MTE1/MTE2/MTE3/FIX, never PIPE_S or PIPE_ALL (CrossCoreSetFlag docs)");
    const std::string arg = "flagId = " + std::to_string(flagId);
    if (flagId >= 11 && flagId <= 14)
        RefuseLocked(api, arg, "ids 11-14 are SyncAll's (dav_c220 SYNC_AIC_FLAG .. SYNC_AIV_ONLY_ALL; CrossCoreSetFlag "
                               "docs: SyncAll occupies [11-14])");
    if (flagId < 0 || flagId > kFlagIdMax)
        RefuseLocked(api, arg, "Atlas A2/A3 take flag ids 0-10 (CANN 8.x/9.0 docs; older docs said 0-15, the "
                               "newer range is followed)");
    auto& cf = m.flags[t.block];
    // The Matmul API's own flags: "定义了N个Matmul对象，Matmul高阶API内部占用的flagId范围为[0, 2 * N - 1]".
    if (flagId < 2 * cf.matmulObjects)
        RefuseLocked(api, arg, "the " + std::to_string(cf.matmulObjects) + " Matmul object(s) of this core use flag ids "
                               "[0, " + std::to_string(2 * cf.matmulObjects - 1) + "] (CrossCoreSetFlag docs)");
    cf.flagIdsUsed |= 1u << flagId;
    if (cf.firstFlagId < 0 || flagId < cf.firstFlagId) cf.firstFlagId = flagId;
}
}  // namespace

void FlagSet(int mode, int pipe, int flagId)
{
    CheckAbort();
    Thread& t = Self();
    Machine& m = M();
    std::unique_lock<std::mutex> lk(m.mu);
    CheckFlagCall("CrossCoreSetFlag", mode, pipe, flagId, true);
    const std::string id = "flag " + std::to_string(flagId);
    if (t.lastFlagOp == 1 && t.lastFlagId == flagId)
        ErrorLocked("rule", t.name + ": " + id + " set twice in a row");
    for (int p = 0; p < kPipeCount; ++p) {
        if (p != pipe && !t.pending[p].empty())
            ErrorLocked("rule", t.name + ": CrossCoreSetFlag(" + id + ") on " + PipeName(pipe) + " does not wait for "
                                "the " + PipeName(p) + " write to " + t.pending[p].front().label +
                                ": the flag can overtake its payload");
        t.pending[p].clear();
    }
    auto& cf = m.flags[t.block];
    if (t.aic) {
        for (int s = 0; s < 2; ++s)
            if (cf.toAiv[s][flagId].size() >= kFlagMax)
                FatalLocked("overflow", t.name + ": " + id + " counter of core" + std::to_string(t.block) + ".AIV" +
                                            std::to_string(s) + " would exceed " + std::to_string(kFlagMax));
        for (int s = 0; s < 2; ++s) cf.toAiv[s][flagId].push_back(t.vc);
    } else {
        if (cf.toAic[flagId][t.sub].size() >= kFlagMax)
            FatalLocked("overflow", t.name + ": " + id + " counter of core" + std::to_string(t.block) +
                                        ".AIC (from this AIV) would exceed " + std::to_string(kFlagMax));
        cf.toAic[flagId][t.sub].push_back(t.vc);
    }
    m.events.push_back({m.seq++, t.block, t.sub, t.aic, true, flagId, mode, pipe, t.written});
    t.written.clear();
    t.lastFlagOp = 1;
    t.lastFlagId = flagId;
    ++t.vc[t.tid];
    m.cv.notify_all();
}

void FlagWait(int mode, int pipe, int flagId)
{
    CheckAbort();
    Thread& t = Self();
    Machine& m = M();
    std::unique_lock<std::mutex> lk(m.mu);
    CheckFlagCall("CrossCoreWaitFlag", mode, pipe, flagId, false);
    auto& cf = m.flags[t.block];
    auto ready = [&] {
        if (m.aborted) return true;
        if (!t.aic) return !cf.toAiv[t.sub][flagId].empty();
        return !cf.toAic[flagId][0].empty() && !cf.toAic[flagId][1].empty();   // mode 2: both AIVs have set
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(m.cfg.timeoutMs);
    if (!m.cv.wait_until(lk, deadline, ready)) {
        std::ostringstream os;
        os << "hang: " << t.name << " waits on flag " << flagId << " for more than " << m.cfg.timeoutMs
           << " ms and no CrossCoreSetFlag for it arrives";
        if (t.aic)
            os << " (sets pending from AIV0: " << cf.toAic[flagId][0].size() << ", AIV1: "
               << cf.toAic[flagId][1].size() << ")";
        FatalLocked("hang", os.str());
    }
    if (m.aborted) throw EmuAbort{};
    if (t.aic) {
        for (int s = 0; s < 2; ++s) {
            Join(t.vc, cf.toAic[flagId][s].front());
            cf.toAic[flagId][s].pop_front();
        }
    } else {
        Join(t.vc, cf.toAiv[t.sub][flagId].front());
        cf.toAiv[t.sub][flagId].pop_front();
    }
    m.events.push_back({m.seq++, t.block, t.sub, t.aic, false, flagId, mode, pipe, {}});
    t.lastFlagOp = 2;
    t.lastFlagId = flagId;
}

void SyncAllBarrier(bool aivOnly)
{
    CheckAbort();
    Thread& t = Self();
    Machine& m = M();
    std::unique_lock<std::mutex> lk(m.mu);
    const char* api = aivOnly ? "SyncAll<true>" : "SyncAll<false>";
    // dav_c220 SyncAllImpl: isAIVOnly = true is the AIV-only hardware barrier (flag 14, mode 0); a mix kernel's
    // all-core barrier is SyncAll<false>() (AIC waits its AIVs, all AICs meet, AICs release their AIVs), which
    // needs a mix kernel type (SyncAll.md: 融合算子的全核同步).
    if (aivOnly && t.aic)
        RefuseLocked(api, "isAIVOnly = true", "called on an AIC: the AIV-only barrier has no AIC part (a mix kernel "
                                              "uses SyncAll<false>())");
    if (!aivOnly && m.kernelType != kMixAic11 && m.kernelType != kMixAic12)
        RefuseLocked(api, "isAIVOnly = false", "needs a mix kernel (KERNEL_TYPE_MIX_AIC_1_1 or _1_2)");
    for (auto& p : t.pending) p.clear();            // SyncAllImpl starts with PipeBarrier<PIPE_ALL>
    auto& b = m.barrier[aivOnly ? 1 : 0];
    const int participants = (aivOnly ? 2 : 3) * m.cfg.blockDim;
    if (b.joined.empty()) b.joined.assign(t.vc.size(), 0);
    Join(b.joined, t.vc);
    m.events.push_back({m.seq++, t.block, t.sub, t.aic, true, -1, aivOnly ? 1 : 0, kPipeAll, t.written});
    t.written.clear();
    t.lastFlagOp = 0;
    ++t.vc[t.tid];
    const uint64_t gen = b.generation;
    if (++b.arrived == participants) {
        b.released = b.joined;
        b.joined.assign(t.vc.size(), 0);
        b.arrived = 0;
        ++b.generation;
        m.cv.notify_all();
    } else {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(m.cfg.timeoutMs);
        if (!m.cv.wait_until(lk, deadline, [&] { return m.aborted || b.generation != gen; })) {
            std::ostringstream os;
            os << "hang: " << t.name << " waits in " << api << " for more than " << m.cfg.timeoutMs << " ms; "
               << b.arrived << " of " << participants << " units arrived";
            FatalLocked("hang", os.str());
        }
        if (m.aborted) throw EmuAbort{};
    }
    Join(t.vc, b.released);
}

void PipeBarrier(int pipe)
{
    Thread& t = Self();
    if (pipe != kPipeAll) return;
    for (auto& p : t.pending) p.clear();
    for (auto& row : t.ordered)
        for (auto& x : row) x = t.ubSeq;
}

void EventSet(int srcPipe, int dstPipe, int eventId)
{
    Thread& t = Self();
    t.events[(srcPipe * kPipeCount + dstPipe) * 16 + (eventId & 15)] = t.ubSeq;
}

void EventWait(int srcPipe, int dstPipe, int eventId)
{
    // everything issued on SRC before the matching SetFlag is done before DST goes on
    Thread& t = Self();
    auto it = t.events.find((srcPipe * kPipeCount + dstPipe) * 16 + (eventId & 15));
    if (it == t.events.end()) Fatal("rule", std::string("WaitFlag<") + PipeName(srcPipe) + "_" + PipeName(dstPipe) +
                                                ">(" + std::to_string(eventId) + ") without its SetFlag: hangs");
    UbOrder(srcPipe, dstPipe, it->second);
    t.events.erase(it);
    if (srcPipe >= 0 && srcPipe < kPipeCount) t.pending[srcPipe].clear();
}

void NoteExpArgument(float largest)
{
    Thread& t = Self();
    if (largest > t.expMaxArg) t.expMaxArg = largest;
}

void NoteCubeMacs(uint64_t macs) { Self().cubeMacs += macs; }

void MatmulUse(const char* what)
{
    if (!Self().aic) Fatal("rule", std::string(what) + " on an AIV: with ASCENDC_CUBE_ONLY the Matmul API runs on "
                                                       "the AIC only");
}

void MatmulRegister(size_t l1, size_t l0a, size_t l0b, size_t l0c)
{
    Thread& t = Self();
    Machine& m = M();
    std::unique_lock<std::mutex> lk(m.mu);
    auto& cf = m.flags[t.block];
    // "Matmul最多支持定义4个对象" and its flags [0, 2N-1] (CrossCoreSetFlag(ISASI).md, 约束说明)
    if (cf.matmulObjects + 1 > kMatmulObjectsMax)
        RefuseLocked("REGIST_MATMUL_OBJ", "Matmul object #" + std::to_string(cf.matmulObjects + 1),
                     "at most 4 Matmul objects (CrossCoreSetFlag docs)");
    ++cf.matmulObjects;
    if (cf.firstFlagId >= 0 && cf.firstFlagId < 2 * cf.matmulObjects)
        RefuseLocked("REGIST_MATMUL_OBJ", "Matmul object #" + std::to_string(cf.matmulObjects),
                     "its flag ids [0, " + std::to_string(2 * cf.matmulObjects - 1) + "] collide with flag " +
                         std::to_string(cf.firstFlagId) + " that this core's CrossCoreSetFlag/WaitFlag use");
    // Capacities of the AIC's buffers (LaunchConfig; sources there).
    const struct { const char* name; size_t need, have; } bufs[] = {
        {"L1 (depthA1 baseM baseK + depthB1 baseN baseK, plus earlier Matmul objects and TPipe L1 buffers)",
         l1 + t.l1Used, m.cfg.l1Bytes},
        {"L0A (baseM baseK, x2 with dbL0A)", l0a, m.cfg.l0aBytes},
        {"L0B (baseN baseK, x2 with dbL0B)", l0b, m.cfg.l0bBytes},
        {"L0C (baseM baseN fp32, x2 with dbL0C)", l0c, m.cfg.l0cBytes}};
    for (const auto& b : bufs)
        if (b.need > b.have)
            RefuseLocked("REGIST_MATMUL_OBJ", "TCubeTiling",
                         std::string("needs ") + std::to_string(b.need) + " bytes of " + b.name + ", the AIC has " +
                             std::to_string(b.have));
    t.l1Used += l1;                                  // the object's L1 buffers stay for the launch
    t.l1Peak = std::max(t.l1Peak, t.l1Used);
}

uint8_t* L1Alloc(size_t bytes, const char* what)
{
    Thread& t = Self();
    if (!t.aic) Refuse(what, "TPosition A1/B1/C1", "L1 belongs to the AIC; an AIV has only its Unified Buffer");
    const size_t start = (t.l1Used + 31) & ~size_t(31);
    if (start + bytes > M().cfg.l1Bytes)
        Refuse(what, "len = " + std::to_string(bytes),
               "does not fit the AIC's L1 (" + std::to_string(start) + " of " + std::to_string(M().cfg.l1Bytes) +
                   " bytes in use; A2 L1 is 512 KB, CANN platform config)");
    t.l1Used = start + bytes;
    t.l1Peak = std::max(t.l1Peak, t.l1Used);
    return t.l1Store.data() + start;
}
size_t L1Mark() { return Self().l1Used; }
void L1Release(size_t mark) { Self().l1Used = mark; }

void PositionAlloc(int pos, const char* posName)
{
    // TQue/AllocTensor.md: "同一个TPosition上的所有Queue，连续调用AllocTensor接口申请的Tensor数量 ... Atlas A2
    // 不超过8个".
    Thread& t = Self();
    if (++t.allocated[pos] > kAllocPerPositionMax)
        Refuse("TQue::AllocTensor", std::string("TPosition::") + posName,
               "more than 8 tensors allocated and not freed on one TPosition (A2 limit, TQue AllocTensor docs)");
}
void PositionFree(int pos) { --Self().allocated[pos]; }

uint8_t* UbAlloc(size_t bytes, const char* what)
{
    Thread& t = Self();
    if (t.aic) Refuse(what, "TPosition VECIN/VECOUT/VECCALC", "the AIC has no Unified Buffer: UB positions are AIV only");
    const size_t start = (t.ubUsed + 31) & ~size_t(31);
    if (start + bytes > M().cfg.ubBytes) {
        std::ostringstream os;
        os << "does not fit the Unified Buffer (" << start << " of " << M().cfg.ubBytes
           << " bytes in use; A2 UB is 192 KB per AIV, CANN platform config)";
        Refuse(what, "len = " + std::to_string(bytes), os.str());
    }
    t.ubUsed = start + bytes;
    t.ubPeak = std::max(t.ubPeak, t.ubUsed);
    return t.ub + start;
}

void UbAccess(const void* p, size_t bytes, bool write, int pipe, const char* what)
{
    Thread& t = Self();
    if (t.aic || bytes == 0) return;
    const size_t off = static_cast<size_t>(static_cast<const uint8_t*>(p) - t.ub);
    const uint64_t seq = ++t.ubSeq;
    const size_t g0 = off / 4, g1 = std::min((off + bytes + 3) / 4, t.ubShadow.size());
    bool reported = false;
    for (size_t g = g0; g < g1; ++g) {
        Thread::UbCell& c = t.ubShadow[g];
        if (!reported && c.wPipe >= 0 && c.wPipe != pipe && t.ordered[c.wPipe][pipe] < c.wSeq) {
            reported = true;
            if (!t.ubReported.insert(std::string(what) + PipeName(c.wPipe) + PipeName(pipe)).second) continue;
            Error("ub-hazard", std::string(what) + " " + (write ? "writes" : "reads") + " UB bytes at offset " +
                                   std::to_string(g * 4) + " on " + PipeName(pipe) + " that " + PipeName(c.wPipe) +
                                   " wrote without a " + PipeName(c.wPipe) + " -> " + PipeName(pipe) + " sync between");
        }
        if (write) {
            for (int q = 0; q < kPipeCount && !reported; ++q) {
                if (q != pipe && q != kPipeS && c.rSeq[q] != 0 && t.ordered[q][pipe] < c.rSeq[q]) {
                    reported = true;
                    if (!t.ubReported.insert(std::string(what) + "war" + PipeName(q) + PipeName(pipe)).second) break;
                    Error("ub-hazard", std::string(what) + " overwrites UB bytes at offset " + std::to_string(g * 4) +
                                           " on " + PipeName(pipe) + " that " + PipeName(q) + " may still be reading (no " +
                                           PipeName(q) + " -> " + PipeName(pipe) + " sync between)");
                }
            }
            c.wPipe = static_cast<int8_t>(pipe);
            c.wSeq = seq;
            std::fill(std::begin(c.rSeq), std::end(c.rSeq), 0);
        } else {
            c.rSeq[pipe] = seq;
        }
    }
}

uint64_t UbSeq() { return Self().ubSeq; }

void UbOrder(int fromPipe, int toPipe, uint64_t upToSeq)
{
    Thread& t = Self();
    if (fromPipe < 0 || fromPipe >= kPipeCount || toPipe < 0 || toPipe >= kPipeCount) return;
    t.ordered[fromPipe][toPipe] = std::max(t.ordered[fromPipe][toPipe], upToSeq);
}

size_t UbMark() { return Self().ubUsed; }
void UbRelease(size_t mark) { Self().ubUsed = mark; }

void CheckUb(const void* p, size_t bytes, const char* what, bool aligned)
{
    Thread& t = Self();
    const uint8_t* q = static_cast<const uint8_t*>(p);
    if (t.aic || q < t.ub || q + bytes > t.ub + M().cfg.ubBytes) {
        Fatal("ub", std::string(what) + ": local tensor outside this core's Unified Buffer");
    }
    // "位于Unified Buffer的地址必须32字节对齐" (DataCopy docs; vector instructions: 通用地址对齐约束)
    if (aligned && ((q - t.ub) % 32) != 0)
        Refuse(what, "LocalTensor at UB offset " + std::to_string(q - t.ub),
               "UB operands must start 32-byte aligned (asc-devkit docs, general address alignment rule)");
}

void RegisterRegion(const std::string& label, const std::string& tensor, const void* base, size_t bytes,
                    RegionKind kind, int ownerBlock, const std::string& buffer)
{
    auto r = std::make_unique<Region>();
    r->label = label;
    r->tensor = tensor;
    r->base = static_cast<const uint8_t*>(base);
    r->bytes = bytes;
    r->kind = kind;
    r->owner = ownerBlock;
    r->buffer = buffer;
    M().regions.push_back(std::move(r));
}

int Launch(const LaunchConfig& config, const std::function<void()>& kernel)
{
    Machine& m = M();
    m.cfg = config;
    const int n = 3 * config.blockDim;
    std::sort(m.regions.begin(), m.regions.end(),
              [](const std::unique_ptr<Region>& a, const std::unique_ptr<Region>& b) { return a->base < b->base; });
    for (size_t i = 1; i < m.regions.size(); ++i) {
        if (m.regions[i - 1]->base + m.regions[i - 1]->bytes > m.regions[i]->base) {
            std::fprintf(stderr, "ascendc_emu: GM buffers %s and %s overlap\n", m.regions[i - 1]->label.c_str(),
                         m.regions[i]->label.c_str());
            return kCheckFailed;
        }
    }
    for (auto& r : m.regions) {
        r->parts = r->owner >= 0 ? 3 : n;
        const size_t granules = (r->bytes + kGranule - 1) / kGranule;
        if (r->kind != RegionKind::Input && r->kind != RegionKind::Tiling) {
            r->wEpoch.assign(granules, 0);
            r->rClock.assign(granules * r->parts, 0);
        }
    }
    m.flags.assign(config.blockDim, Machine::CoreFlags{});
    for (auto& b : m.barrier) b = Machine::Barrier{};
    m.threads.clear();
    for (int tid = 0; tid < n; ++tid) {
        auto t = std::make_unique<Thread>();
        t->tid = tid;
        t->block = tid / 3;
        t->aic = tid % 3 == 0;
        t->sub = t->aic ? 0 : tid % 3 - 1;
        t->vc.assign(n, 0);
        t->vc[tid] = 1;
        t->name = ThreadName(tid);
        if (!t->aic) {
            t->ubShadow.assign(config.ubBytes / 4, Thread::UbCell{});
            t->ubStore.assign(config.ubBytes + 64, 0);
            t->ub = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(t->ubStore.data()) + 63) & ~uintptr_t(63));
        } else {
            t->l1Store.assign(config.l1Bytes, 0);
        }
        m.threads.push_back(std::move(t));
    }
    std::vector<std::thread> pool;
    for (int tid = 0; tid < n; ++tid) {
        pool.emplace_back([&m, &kernel, tid] {
            tSelf = m.threads[tid].get();
            try {
                kernel();
            } catch (const EmuAbort&) {
            } catch (const std::exception& e) {
                std::lock_guard<std::mutex> lk(m.mu);
                ErrorLocked("exception", tSelf->name + ": " + e.what());
                m.aborted = true;
                m.cv.notify_all();
            }
            tSelf = nullptr;
        });
    }
    for (auto& th : pool) th.join();
    if (!m.aborted) {
        for (int b = 0; b < config.blockDim; ++b) {
            for (int id = 0; id < kFlagIds; ++id) {
                for (int s = 0; s < 2; ++s) {
                    const size_t toAiv = m.flags[b].toAiv[s][id].size(), toAic = m.flags[b].toAic[id][s].size();
                    if (toAiv)
                        ErrorLocked("flag", "core" + std::to_string(b) + ": " + std::to_string(toAiv) +
                                                " set(s) of flag " + std::to_string(id) + " by the AIC never waited "
                                                "for by AIV" + std::to_string(s));
                    if (toAic)
                        ErrorLocked("flag", "core" + std::to_string(b) + ": " + std::to_string(toAic) +
                                                " set(s) of flag " + std::to_string(id) + " by AIV" +
                                                std::to_string(s) + " never waited for by the AIC");
                }
            }
        }
    }
    for (auto& kv : m.suppressed)
        ErrorLocked("race", std::to_string(kv.second) + " further racing accesses to " + kv.first +
                                " (counted per 2-byte granule) not listed");
    if (m.hang) return kHang;
    return m.errors.empty() ? kOk : kCheckFailed;
}

namespace {
std::string Quote(const std::string& s)
{
    std::string o = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') { o += '\\'; o += c; }
        else if (c == '\n') o += "\\n";
        else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
        else o += c;
    }
    return o + "\"";
}
}  // namespace

bool WriteReport(const std::string& path, const std::string& extraJson)
{
    Machine& m = M();
    std::ostringstream os;
    os << "{\n  \"status\": " << (m.hang ? kHang : m.errors.empty() ? kOk : kCheckFailed) << ",\n";
    os << "  \"block_dim\": " << m.cfg.blockDim << ",\n  \"timeout_ms\": " << m.cfg.timeoutMs << ",\n";
    os << "  \"errors\": [";
    for (size_t i = 0; i < m.errors.size(); ++i)
        os << (i ? "," : "") << "\n    {\"kind\": " << Quote(m.errors[i].kind)
           << ", \"message\": " << Quote(m.errors[i].message) << "}";
    os << "\n  ],\n  \"ub_peak_bytes\": {";
    bool first = true;
    for (auto& t : m.threads) {
        if (t->aic) continue;
        os << (first ? "" : ", ") << Quote(t->name) << ": " << t->ubPeak;
        first = false;
    }
    float expMax = -INFINITY;
    for (auto& t : m.threads) expMax = std::max(expMax, t->expMaxArg);
    os << "},\n  \"l1_peak_bytes\": {";
    first = true;
    for (auto& t : m.threads) {
        if (!t->aic) continue;
        os << (first ? "" : ", ") << Quote(t->name) << ": " << t->l1Peak;
        first = false;
    }
    os << "},\n  \"exp_max_arg\": ";
    if (std::isfinite(expMax)) os << expMax;
    else os << (expMax > 0 ? "\"inf\"" : "null");
    uint64_t macs = 0;
    for (auto& t : m.threads) macs += t->cubeMacs;
    os << ",\n  \"cube_macs\": " << macs;
    os << ",\n  \"events\": [";
    for (size_t i = 0; i < m.events.size(); ++i) {
        const Event& e = m.events[i];
        os << (i ? "," : "") << "\n    {\"seq\": " << e.seq << ", \"block\": " << e.block << ", \"unit\": "
           << (e.aic ? "\"AIC\"" : "\"AIV\"") << ", \"sub\": " << e.sub << ", \"op\": "
           << (e.flag < 0 ? "\"syncall\"" : e.set ? "\"set\"" : "\"wait\"") << ", \"flag\": " << e.flag << ", \"mode\": " << e.mode
           << ", \"pipe\": " << Quote(PipeName(e.pipe));
        if (e.set) {
            os << ", \"wrote\": [";
            for (size_t j = 0; j < e.wrote.size(); ++j) os << (j ? ", " : "") << Quote(e.wrote[j]);
            os << "]";
        }
        os << "}";
    }
    os << "\n  ]";
    if (!extraJson.empty()) os << ",\n  " << extraJson;
    os << "\n}\n";
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) return false;
    const std::string s = os.str();
    const bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
    return std::fclose(f) == 0 && ok;
}

std::string Summary()
{
    std::string s;
    for (auto& e : M().errors) s += "[" + e.kind + "] " + e.message + "\n";
    return s;
}

}  // namespace ascendc_emu
