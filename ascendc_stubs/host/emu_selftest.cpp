// Self-test of the host emulation: one tiny kernel per rule, run on one emulated AI core.
//   ascendc_emu_selftest SCENARIO REPORT.json      (exit status = the emulator's: 0 ok, 3 check failed, 4 hang)
// tests/test_ascendc_stubs.py runs every scenario and checks the kind of error each one must produce.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>

#define ASCENDC_CUBE_ONLY
#include "kernel_operator.h"
#include "lib/matmul_intf.h"

using namespace AscendC;

namespace {

alignas(64) uint8_t g_gm[4096];
alignas(64) uint8_t g_pair[128];    // two 64-byte regions, parts of one buffer (a matrix holding two tensors)
alignas(64) uint8_t g_apart[128];   // two 64-byte regions of different buffers

void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// mode 2: the AIC's wait returns only after BOTH AIVs set (AIV1 sets 100 ms late); the AIC's set releases both.
void Mode2()
{
    if ASCEND_IS_AIC {
        CrossCoreWaitFlag(1);
        CrossCoreSetFlag<2, PIPE_FIX>(2);
    }
    if ASCEND_IS_AIV {
        if (GetSubBlockIdx() == 1) Sleep(100);
        CrossCoreSetFlag<2, PIPE_MTE3>(1);
        CrossCoreWaitFlag(2);
    }
}
// 16 sets of flag 1 that nobody waits for: the counter holds at most 15.
void Overflow()
{
    if ASCEND_IS_AIV {
        for (int i = 0; i < 16; ++i) {
            CrossCoreSetFlag<2, PIPE_MTE3>(1);
            CrossCoreSetFlag<2, PIPE_MTE3>(2);
        }
    }
}
void TwiceInARow()
{
    if ASCEND_IS_AIC {
        CrossCoreSetFlag<2, PIPE_FIX>(1);
        CrossCoreSetFlag<2, PIPE_FIX>(1);
    }
    if ASCEND_IS_AIV {
        CrossCoreWaitFlag(1);
        CrossCoreWaitFlag(1);
    }
}
void ReservedId()   // (only the set: whichever of set and wait came first would be the one refused)
{
    if ASCEND_IS_AIC CrossCoreSetFlag<2, PIPE_FIX>(12);
}
void Hang()
{
    if ASCEND_IS_AIC CrossCoreWaitFlag(3);
}
void UbOverflow()
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TBuf<TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, 200 * 1024);
    }
}
void Misaligned()
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TBuf<TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, 1024);
        LocalTensor<float> x = buf.Get<float>();
        Exp(x[1], x[1], 8);
    }
}
void OutOfBounds()
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TBuf<TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, 1024);
        GlobalTensor<float> gm;
        gm.SetGlobalBuffer(reinterpret_cast<float*>(g_gm));
        DataCopy(buf.Get<float>(), gm[1000], 64);   // 256 bytes from byte 4000 of a 4096-byte buffer
    }
}
// the same AIV writes GM (MTE3) and reads it back (MTE2) into the same UB with nothing in between: a GM
// read-after-write and a UB write-after-read
void Hazard()
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TBuf<TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, 1024);
        GlobalTensor<float> gm;
        gm.SetGlobalBuffer(reinterpret_cast<float*>(g_gm) + GetSubBlockIdx() * 64);
        DataCopy(gm, buf.Get<float>(), 64);
        DataCopy(buf.Get<float>(), gm, 64);
    }
}
// AIV0 writes, the AIC reads, no flag between them
void Race()
{
    GlobalTensor<float> gm;
    gm.SetGlobalBuffer(reinterpret_cast<float*>(g_gm));
    if ASCEND_IS_AIV {
        TPipe pipe;
        TBuf<TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, 1024);
        if (GetSubBlockIdx() == 0) DataCopy(gm, buf.Get<float>(), 64);
    }
    if ASCEND_IS_AIC {
        Sleep(20);
        (void)gm.GetValue(3);
    }
}
// a set on PIPE_V after a PIPE_MTE3 write: the flag could overtake its payload
void SetPipe()
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TBuf<TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, 1024);
        GlobalTensor<float> gm;
        gm.SetGlobalBuffer(reinterpret_cast<float*>(g_gm) + GetSubBlockIdx() * 64);
        DataCopy(gm, buf.Get<float>(), 64);
        CrossCoreSetFlag<2, PIPE_V>(1);
    }
    if ASCEND_IS_AIC CrossCoreWaitFlag(1);
}
// a scalar read of UB a vector instruction wrote: needs SetFlag/WaitFlag<HardEvent::V_S> between (fenced = true)
void UbScalarRead(bool fenced)
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TBuf<TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, 1024);
        LocalTensor<float> x = buf.Get<float>();
        Duplicate(x, 1.0f, 64);
        if (fenced) {
            SetFlag<HardEvent::V_S>(EVENT_ID0);
            WaitFlag<HardEvent::V_S>(EVENT_ID0);
        }
        if (x.GetValue(3) != 1.0f) ascendc_emu::Error("value", "Duplicate did not write");
    }
}
// one 128-byte read across two adjacent regions: fine within one buffer (inBuffer), out of bounds otherwise
void ReadAcross(bool inBuffer)
{
    if ASCEND_IS_AIV {
        if (GetSubBlockIdx() != 0) return;
        TPipe pipe;
        TBuf<TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, 1024);
        GlobalTensor<float> gm;
        gm.SetGlobalBuffer(reinterpret_cast<float*>(inBuffer ? g_pair : g_apart));
        DataCopy(buf.Get<float>(), gm, 32);
    }
}
// ReduceSum over two repeats (100 floats of 1.0 -> 100) and the largest Exp argument in the report (0.5)
void ReduceSumAndExp()
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TBuf<TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, 1024);
        LocalTensor<float> x = buf.Get<float>();
        Duplicate(x, 1.0f, 104);
        ReduceSum(x[128], x, x[136], 100);
        Duplicate(x[144], -1.0f, 8);
        Duplicate(x[152], 0.5f, 8);
        Exp(x[144], x[144], 16);
        SetFlag<HardEvent::V_S>(EVENT_ID0);
        WaitFlag<HardEvent::V_S>(EVENT_ID0);
        if (x.GetValue(128) != 100.0f) ascendc_emu::Error("value", "ReduceSum of 100 ones is not 100");
    }
}
// bf16 / half rounding: ties to even, overflow to inf
void Float16()
{
    if ASCEND_IS_AIC {
        const bool ok = static_cast<float>(bfloat16_t(1.00390625f)) == 1.0f &&   // 1 + 2^-8: tie, to even
                        static_cast<float>(bfloat16_t(1.01171875f)) == 1.015625f &&
                        static_cast<float>(half(65504.0f)) == 65504.0f && std::isinf(static_cast<float>(half(65520.0f))) &&
                        static_cast<float>(half(1.0f / 16777216.0f)) == 1.0f / 16777216.0f;
        if (!ok) ascendc_emu::Error("float16", "half / bfloat16_t rounding is wrong");
    }
}

// ---- conformance: calls the real AscendC API refuses (tests/test_ascendc_conformance.py checks each message) ----

// a flag id past the A2 range (0-10), on the set and on the wait
void FlagIdRange(bool wait)
{
    if ASCEND_IS_AIV {
        if (wait) CrossCoreWaitFlag(15);
        else CrossCoreSetFlag<2, PIPE_MTE3>(15);
    }
}
template <pipe_t PIPE>
void FlagPipe()
{
    if ASCEND_IS_AIV CrossCoreSetFlag<2, PIPE>(3);
}
void FlagMode4()
{
    if ASCEND_IS_AIV CrossCoreSetFlag<4, PIPE_MTE3>(3);
}
// mode 2 in a kernel declared AIV-only (the launcher skips its usual KERNEL_TASK_TYPE_DEFAULT for this one)
void KernelType()
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    if ASCEND_IS_AIV CrossCoreSetFlag<2, PIPE_MTE3>(3);
}
TCubeTiling SmallTiling()
{
    TCubeTiling t;
    t.M = t.N = t.Ka = t.Kb = 64;
    t.baseM = t.baseN = t.baseK = 64;
    t.depthA1 = t.depthB1 = 1;
    return t;
}
using Mm = Matmul<MatmulType<TPosition::GM, CubeFormat::ND, float>, MatmulType<TPosition::GM, CubeFormat::ND, float>,
                  MatmulType<TPosition::GM, CubeFormat::ND, float>>;
// one Matmul object reserves flag ids 0-1: the AIC sets flag 1 after registering it
void MatmulFlag()
{
    if ASCEND_IS_AIC {
        TPipe pipe;
        Mm mm;
        const TCubeTiling t = SmallTiling();
        REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &t);
        CrossCoreSetFlag<2, PIPE_FIX>(1);
    }
}
// a tiling whose L1 blocks (depthA1 = 64 blocks of 64 x 64 floats = 1 MiB) exceed the AIC's 512 KiB
void MatmulL1()
{
    if ASCEND_IS_AIC {
        TPipe pipe;
        Mm mm;
        TCubeTiling t = SmallTiling();
        t.depthA1 = 64;
        REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &t);
    }
}
// 600 KiB of L1 buffers on the AIC
void L1Buffer()
{
    if ASCEND_IS_AIC {
        TPipe pipe;
        TBuf<TPosition::A1> a;
        pipe.InitBuffer(a, 600 * 1024);
    }
}
// 7 floats: 28 bytes, not a multiple of 32 (the hardware would copy 0 bytes)
void DmaLength()
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TBuf<TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, 1024);
        GlobalTensor<float> gm;
        gm.SetGlobalBuffer(reinterpret_cast<float*>(g_gm));
        DataCopy(buf.Get<float>(), gm, 7);
    }
}
void DmaBlockCount()
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TBuf<TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, 1024);
        GlobalTensor<float> gm;
        gm.SetGlobalBuffer(reinterpret_cast<float*>(g_gm));
        DataCopyParams p;
        p.blockCount = 4096;
        p.blockLen = 1;
        DataCopy(buf.Get<float>(), gm, p);
    }
}
// a float GlobalTensor at byte offset 2
void GmAlign()
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TBuf<TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, 1024);
        GlobalTensor<float> gm;
        gm.SetGlobalBuffer(reinterpret_cast<float*>(g_gm + 2));
        DataCopy(buf.Get<float>(), gm, 8);
    }
}
// depth 1, two buffers: two EnQue without a DeQue
void QueueDepth()
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TQue<TPosition::VECIN, 1> q;
        pipe.InitBuffer(q, 2, 256);
        LocalTensor<float> a = q.AllocTensor<float>();
        q.EnQue(a);
        LocalTensor<float> b = q.AllocTensor<float>();
        q.EnQue(b);
    }
}
// one buffer, two AllocTensor without a FreeTensor
void QueueAlloc()
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TQue<TPosition::VECOUT, 1> q;
        pipe.InitBuffer(q, 1, 256);
        (void)q.AllocTensor<float>();
        (void)q.AllocTensor<float>();
    }
}
void QueueEmpty()
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TQue<TPosition::VECIN, 1> q;
        pipe.InitBuffer(q, 1, 256);
        (void)q.DeQue<float>();
    }
}
// nine VECIN tensors allocated at once (A2: at most 8 per TPosition)
void PositionLimit()
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TQue<TPosition::VECIN, 1> q[9];
        for (auto& x : q) pipe.InitBuffer(x, 1, 256);
        for (auto& x : q) (void)x.AllocTensor<float>();
    }
}
// 65 buffers in one TPipe (at most 64)
void TooManyBuffers()
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TBuf<TPosition::VECCALC> b[65];
        for (auto& x : b) pipe.InitBuffer(x, 32);
    }
}
void TBufGet()
{
    if ASCEND_IS_AIV {
        TPipe pipe;
        TBuf<TPosition::VECCALC> b;
        pipe.InitBuffer(b, 64);
        (void)b.Get<float>(32);
    }
}

// SyncAll<false>(): AIV0 writes GM, every unit meets, the AIC reads it (ordered: no race). skipOnAiv1: AIV1 never
// arrives (a hang); aivOnlyOnAic: the AIC calls the AIV-only form (refused).
void SyncAllScenario(bool skipOnAiv1, bool aivOnlyOnAic)
{
    GlobalTensor<float> gm;
    gm.SetGlobalBuffer(reinterpret_cast<float*>(g_gm));
    if ASCEND_IS_AIV {
        TPipe pipe;
        TBuf<TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, 1024);
        if (GetSubBlockIdx() == 0) DataCopy(gm, buf.Get<float>(), 64);
        if (skipOnAiv1 && GetSubBlockIdx() == 1) return;
        SyncAll<false>();
    }
    if ASCEND_IS_AIC {
        if (aivOnlyOnAic) SyncAll<true>();
        else SyncAll<false>();
        (void)gm.GetValue(3);
    }
}

}  // namespace

int main(int argc, char** argv)
{
    const std::map<std::string, std::function<void()>> scenarios = {
        {"mode2", Mode2}, {"overflow", Overflow}, {"twice", TwiceInARow}, {"reserved", ReservedId}, {"hang", Hang},
        {"ub", UbOverflow}, {"align", Misaligned}, {"bounds", OutOfBounds}, {"hazard", Hazard}, {"race", Race},
        {"setpipe", SetPipe}, {"float16", Float16}, {"matrix", [] { ReadAcross(true); }},
        {"across", [] { ReadAcross(false); }}, {"reducesum", ReduceSumAndExp},
        {"ubhazard", [] { UbScalarRead(false); }}, {"ubfence", [] { UbScalarRead(true); }},
        {"flagid", [] { FlagIdRange(false); }}, {"waitflagid", [] { FlagIdRange(true); }},
        {"pipe_s", FlagPipe<PIPE_S>}, {"pipe_all", FlagPipe<PIPE_ALL>}, {"mode4", FlagMode4}, {"kerneltype", KernelType},
        {"matmulflag", MatmulFlag}, {"matmull1", MatmulL1}, {"l1buffer", L1Buffer}, {"dmalen", DmaLength},
        {"dmacount", DmaBlockCount}, {"gmalign", GmAlign}, {"quedepth", QueueDepth}, {"quealloc", QueueAlloc},
        {"queempty", QueueEmpty}, {"position", PositionLimit}, {"buffers", TooManyBuffers}, {"tbufget", TBufGet},
        {"syncall", [] { SyncAllScenario(false, false); }}, {"syncall_hang", [] { SyncAllScenario(true, false); }},
        {"syncall_aivonly", [] { SyncAllScenario(false, true); }}};
    if (argc != 3 || !scenarios.count(argv[1])) {
        std::fprintf(stderr, "usage: ascendc_emu_selftest SCENARIO REPORT.json; scenarios:");
        for (auto& kv : scenarios) std::fprintf(stderr, " %s", kv.first.c_str());
        std::fprintf(stderr, "\n");
        return 2;
    }
    using ascendc_emu::RegionKind;
    ascendc_emu::RegisterRegion("gm", "gm", g_gm, sizeof(g_gm), RegionKind::Workspace, 0);
    ascendc_emu::RegisterRegion("pair/a", "a", g_pair, 64, RegionKind::Workspace, 0, "pair");
    ascendc_emu::RegisterRegion("pair/b", "b", g_pair + 64, 64, RegionKind::Workspace, 0, "pair");
    ascendc_emu::RegisterRegion("apart/a", "a", g_apart, 64, RegionKind::Workspace, 0);
    ascendc_emu::RegisterRegion("apart/b", "b", g_apart + 64, 64, RegionKind::Workspace, 0);
    ascendc_emu::LaunchConfig cfg;
    cfg.timeoutMs = 300;
    const auto& kernel = scenarios.at(argv[1]);
    const bool ownType = std::string(argv[1]) == "kerneltype";
    const int status = ascendc_emu::Launch(cfg, [&] {
        if (!ownType) KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
        kernel();
    });
    ascendc_emu::WriteReport(argv[2], "\"scenario\": \"" + std::string(argv[1]) + "\"");
    return status;
}
