// Microbenchmark of the calibrated profile's chip.barrier_us (ASSUMED): the time of one all-core SyncAll<false>()
// in a mix kernel (1 AIC + 2 AIVs per AI core), as kda_chunk_v5 places it between its passes. Every unit of every
// core runs `repeats` barriers back to back and nothing else.
//
// On a 910B (docs/how-to/measure-assumed.md): compile for the chip (the ascendc CMake module, as README "On real
// hardware" step 2 does for the kernels), launch it on all 24 AI cores with repeats = 0 and repeats = 10000, each
// profiled by msprof (Task Duration(us) of the op_summary row), then
//     barrier_us = (T(10000) - T(0)) / 10000
// and give it to the simulator: `python -m kda.run ... --set chip.barrier_us=VALUE`, or a profile file that
// inherits ascend-910b2. SyncAll.md's constraints apply: numBlocks no more than the AI cores, batch mode.
//
// Here it compiles with g++ against ascendc_stubs/host and runs on the emulation, which checks the API rules
// (SyncAll<false> only in a mix kernel, every unit arriving) but has no time: tests/ascendc/test_ascendc_microbench.py.
#include "kernel_operator.h"

extern "C" __global__ __aicore__ void syncall_latency(GM_ADDR repeats)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    AscendC::GlobalTensor<uint32_t> n;
    n.SetGlobalBuffer((__gm__ uint32_t*)repeats);
    const uint32_t count = n.GetValue(0);
    for (uint32_t i = 0; i < count; ++i) AscendC::SyncAll<false>();
}

#if !defined(__CCE_AICORE__)
#include <cstdlib>
#include <string>

// syncall_latency_emu REPEATS CORES REPORT.json: exit status 0, or the emulation's (3 a rule broken, 4 a hang).
int main(int argc, char** argv)
{
    if (argc != 4) {
        std::fprintf(stderr, "usage: syncall_latency_emu REPEATS CORES REPORT.json\n");
        return 2;
    }
    alignas(32) static uint32_t repeats[8] = {static_cast<uint32_t>(std::strtoul(argv[1], nullptr, 10))};
    ascendc_emu::RegisterRegion("repeats", "repeats", repeats, sizeof(repeats), ascendc_emu::RegionKind::Input);
    ascendc_emu::LaunchConfig cfg;
    cfg.blockDim = std::atoi(argv[2]);
    const int status = ascendc_emu::Launch(cfg, [] { syncall_latency(reinterpret_cast<GM_ADDR>(repeats)); });
    ascendc_emu::WriteReport(argv[3], "\"repeats\": " + std::string(argv[1]));
    return status;
}
#endif
