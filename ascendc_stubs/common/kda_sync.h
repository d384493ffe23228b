// Cross-core flags of the KDA chunk kernels (v3 and v4 share the simulator's six syncs, numbered alike), the
// fault injection the host tests use, and the intra-core pipe fence. Kernel side: CANN or ascendc_stubs/host.
#pragma once
#include "kernel_operator.h"

namespace kda {
using namespace AscendC;

// ---- cross-core flags -------------------------------------------------------------------------------
// Mode 2: an AIC set releases both AIVs' waits; the AIC's wait returns once both AIVs have set.
constexpr uint8_t SYNC_MODE = 2;
// FLAG_OF_SYNC[n] implements the simulator's sync n. Rules (asc-devkit CrossCoreSetFlag): ids 0-10 on
// A2/A3; SyncAll reserves 11-14; the Matmul API reserves [0, 2N-1] for N Matmul objects (N = 1 here);
// no flag is set twice in a row (each unit sets three different ids per chunk, in turn).
constexpr uint16_t FLAG_OF_SYNC[7] = {0xFFFF, 3, 4, 5, 6, 7, 8};
constexpr uint16_t MATMUL_OBJECTS = 1;
constexpr int NUM_SYNCS = 6;

constexpr bool FlagIdsValid()
{
    for (int i = 1; i <= NUM_SYNCS; ++i) {
        if (FLAG_OF_SYNC[i] > 10 || FLAG_OF_SYNC[i] < 2 * MATMUL_OBJECTS) return false;
        for (int j = 1; j < i; ++j)
            if (FLAG_OF_SYNC[i] == FLAG_OF_SYNC[j]) return false;
    }
    return true;
}
static_assert(FlagIdsValid(), "flag ids: distinct, within 0-10, clear of the Matmul API's [0, 2N-1]");

// Fault injection for the host tests: -DKDA_DROP_WAIT=n removes the wait of sync n, -DKDA_DROP_SET=n its set.
#ifndef KDA_DROP_WAIT
#define KDA_DROP_WAIT 0
#endif
#ifndef KDA_DROP_SET
#define KDA_DROP_SET 0
#endif

// The producer of sync n: issued on the pipe that wrote its payload (MTE3 on an AIV, FIX on the AIC), so
// the flag cannot overtake the data.
template <int SYNC, pipe_t PIPE>
__aicore__ inline void SetSyncFlag()
{
    if constexpr (KDA_DROP_SET != SYNC) CrossCoreSetFlag<SYNC_MODE, PIPE>(FLAG_OF_SYNC[SYNC]);
}
template <int SYNC>
__aicore__ inline void WaitSyncFlag()
{
    if constexpr (KDA_DROP_WAIT != SYNC) CrossCoreWaitFlag(FLAG_OF_SYNC[SYNC]);
}

// Orders every earlier instruction of one pipe before every later one of another, on this core. The TQues
// order MTE2 -> V -> MTE3 for the tiles they carry; these fences cover the rest (scalar reads and writes of
// UB that vector instructions write or read).
template <HardEvent EVENT>
__aicore__ inline void PipeFence()
{
    SetFlag<EVENT>(EVENT_ID0);
    WaitFlag<EVENT>(EVENT_ID0);
}

}  // namespace kda
