// The emulated machine behind the host kernel_operator.h: one AI core = 1 AIC thread + 2 AIV threads.
//
// What it models: mode-2 cross-core flags (bounded counters, hang timeout), GM as host memory with a
// happens-before race detector (vector clocks carried by CrossCoreSetFlag -> CrossCoreWaitFlag), GM bounds,
// the 192 KiB Unified Buffer per AIV, and which GM writes a flag set publishes (its payload).
// What it does not model: time, the intra-core pipes' concurrency (each core runs its instructions in program
// order), L1/L0 buffers, the Cube's fractal layouts. See ascendc_stubs/README.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace ascendc_emu {

// Same numbering as pipe_t in the host kernel_operator.h.
enum PipeId : int { kPipeS = 0, kPipeV, kPipeM, kPipeMte1, kPipeMte2, kPipeMte3, kPipeAll, kPipeFix, kPipeCount };
const char* PipeName(int pipe);

enum class RegionKind : uint8_t {
    Input,      // read-only GM input
    Output,     // GM output
    Workspace,  // a Cube<->Vector hand-off buffer: race-checked, and counted in the payload of the next flag set
    Private,    // GM scratch one unit keeps for itself (the Cube's W): race-checked, not a payload
    Tiling,     // the tiling struct
};

// ---- called from kernel code (on an emulated core) ----
int BlockIdx();             // AIC: its AI core; AIV: core * 2 + sub-block, as on the hardware
int BlockNum();             // number of AI cores launched
int SubBlockIdx();          // AIV: 0 or 1; AIC: 0
bool IsAic();
bool IsAiv();
uint64_t TilingKey();
void SetKernelType(int type);
uint8_t* SysWorkspace();
uint8_t* UserWorkspace(uint8_t* workspace);

// One GM access of `bytes` at `addr` by the current core; `what` names the API call for messages.
void GmAccess(const void* addr, size_t bytes, bool write, int pipe, const char* what);
void FlagSet(int mode, int pipe, int flagId);
void FlagWait(int mode, int pipe, int flagId);
void PipeBarrier(int pipe);
// SyncAll<isAIVOnly>(): every AIV of the launch (isAIVOnly), or every AIC and AIV (a mix kernel's SyncAll<false>),
// meets here; writes before it are ordered before every unit's accesses after it. Recorded as an event
// ("syncall") with the hand-off tensors the unit wrote since its previous set or barrier.
void SyncAllBarrier(bool aivOnly);
void EventSet(int srcPipe, int dstPipe, int eventId);    // SetFlag<HardEvent::SRC_DST>(id) on this core
void EventWait(int srcPipe, int dstPipe, int eventId);   // WaitFlag<HardEvent::SRC_DST>(id)
void MatmulUse(const char* what);           // Matmul API calls: AIC only
// REGIST_MATMUL_OBJ on this core: one more Matmul object (it reserves flag ids [0, 2N-1]) whose tiling needs
// `l1` bytes of L1 and `l0a`, `l0b`, `l0c` bytes of L0A / L0B / L0C (checked against the launch's capacities).
void MatmulRegister(size_t l1, size_t l0a, size_t l0b, size_t l0c);
uint8_t* L1Alloc(size_t bytes, const char* what);   // TPipe::InitBuffer of an L1 position (A1/B1/C1): AIC only
size_t L1Mark();
void L1Release(size_t mark);
// AllocTensor / FreeTensor on a queue of TPosition `pos` (named `posName`): the AllocTensor calls outstanding
// per position are bounded (8 on A2).
void PositionAlloc(int pos, const char* posName);
void PositionFree(int pos);
void NoteExpArgument(float largest);        // the largest argument an Exp instruction saw (report: exp_max_arg)
void NoteCubeMacs(uint64_t macs);           // multiply-adds of one Matmul call (report: cube_macs)

// Unified Buffer accesses by pipe, for the intra-core hazard model: an access on pipe Q to UB bytes that pipe P
// wrote (or, for a write, read) needs a P->Q ordering issued after that access: a TQue EnQue/DeQue or
// FreeTensor/AllocTensor pair, SetFlag/WaitFlag<HardEvent::P_Q>, or PipeBarrier<PIPE_ALL>. Reads on PIPE_S
// need nothing after them (the scalar unit issues every later instruction).
void UbAccess(const void* p, size_t bytes, bool write, int pipe, const char* what);
uint64_t UbSeq();                                    // UB accesses so far on this core
void UbOrder(int fromPipe, int toPipe, uint64_t upToSeq);   // fromPipe's accesses up to seq precede toPipe's next

uint8_t* UbAlloc(size_t bytes, const char* what);   // 32-byte aligned, from the current AIV's UB
size_t UbMark();
void UbRelease(size_t mark);
// `p .. p+bytes` must lie in the current AIV's UB; `aligned`: the start must be 32-byte aligned.
void CheckUb(const void* p, size_t bytes, const char* what, bool aligned);

[[noreturn]] void Fatal(const std::string& kind, const std::string& message);  // stops the launch
// A call the real AscendC API refuses (or silently mishandles): one line "API: argument: rule (source)",
// kind "api", and the launch stops (exit status 3). Every caller names the rule's source in a comment.
[[noreturn]] void Refuse(const std::string& api, const std::string& argument, const std::string& rule);
void Error(const std::string& kind, const std::string& message);               // recorded; the run goes on
std::string CoreName();     // "core0.AIC", "core1.AIV0", ...

// ---- host side: set up GM, launch, report ----
struct LaunchConfig {
    int blockDim = 1;
    uint64_t tilingKey = 0;
    int timeoutMs = 2000;               // a flag wait longer than this is reported as a hang
    // Per-core buffers of A2/A3 (arch 2201), from CANN's platform config files (docs/sources/ascend.md:
    // "UB 192 KB per AIV; L1 512 KB, L0A 64 KB, L0B 64 KB, L0C 128 KB per AIC").
    size_t ubBytes = 192 * 1024;        // Unified Buffer per AIV
    size_t l1Bytes = 512 * 1024;        // L1 per AIC
    size_t l0aBytes = 64 * 1024, l0bBytes = 64 * 1024, l0cBytes = 128 * 1024;
    uint8_t* workspace = nullptr;       // system workspace first, then the user workspace
    size_t sysWorkspaceBytes = 0;
};

// `label` names the buffer in messages ("core0/slot1/M"); `tensor` is the name payloads use ("M").
// ownerBlock >= 0: only that AI core's three threads may touch it. `buffer`: regions that are parts of one
// matrix (A_qk: diagonal and off-diagonal blocks) share it; one access may run from one into the next
// adjacent one (a matmul reading a row across both), which is otherwise out of bounds.
void RegisterRegion(const std::string& label, const std::string& tensor, const void* base, size_t bytes,
                    RegionKind kind, int ownerBlock = -1, const std::string& buffer = "");
enum Status : int { kOk = 0, kCheckFailed = 3, kHang = 4 };
int Launch(const LaunchConfig& config, const std::function<void()>& kernel);
// JSON: status, errors, every flag event in order (with the payload each set publishes), UB use, the largest
// argument of any Exp (exp_max_arg; null when no Exp ran) and the Cube's multiply-adds (cube_macs).
// `extraJson` is spliced in as further members ("\"key\": value, ...") or left empty.
bool WriteReport(const std::string& path, const std::string& extraJson);
std::string Summary();      // one line per error, for stderr

}  // namespace ascendc_emu
