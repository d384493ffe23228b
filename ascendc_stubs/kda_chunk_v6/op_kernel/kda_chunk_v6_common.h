// Shared by kda_chunk_v6's Cube (kda_chunk_v6.cpp) and Vector (kda_chunk_v6_vec.h) sides: flags numbered as the
// simulator's syncs, fault injection and the workspace.
#pragma once
#define ASCENDC_CUBE_ONLY   // the Matmul API runs on the AIC that calls it
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "kda_kernel_io.h"
#include "kda_sync.h"
#include "kda_tiles.h"
#include "kda_diagonal_blocks.h"   // PairStart, SumSlot
#include "../op_host/kda_chunk_v6_tiling.h"

namespace kda_v6 {
using namespace AscendC;
using namespace kda;   // PipeFence, VecIo, TokenOffset

// ---- flags: sync n (1..6) and the state's own hand-off (0); fault injection KDA_DROP_WAIT / KDA_DROP_SET = 10 + n
// (kda_chunk_v5's numbering for its first pass; 10: the state) ----
// Two Matmul objects own [0, 3] (CrossCoreSetFlag docs: N objects use [0, 2N-1]), ids 0-10 exist on A2 and SyncAll
// owns 11-14: the six syncs take 4-9 and the state's hand-off 10, every id of 4-10 once.
constexpr uint16_t MATMUL_OBJECTS_V6 = 2;
constexpr uint16_t FLAG[7] = {10, 4, 5, 6, 7, 8, 9};   // [0]: the state S, [1..6]: ① .. ⑥
constexpr bool V6FlagIdsValid()
{
    for (int i = 0; i <= 6; ++i) {
        if (FLAG[i] < 2 * MATMUL_OBJECTS_V6 || FLAG[i] > 10) return false;
        for (int j = 0; j < i; ++j)
            if (FLAG[i] == FLAG[j]) return false;
    }
    return true;
}
static_assert(V6FlagIdsValid(), "v6 flag ids: distinct, within 0-10, clear of the two Matmul objects' [0, 3]");

template <int SYNC, pipe_t PIPE>
__aicore__ inline void Set()
{
    if constexpr (KDA_DROP_SET != 10 + SYNC) CrossCoreSetFlag<SYNC_MODE, PIPE>(FLAG[SYNC]);
}
template <int SYNC>
__aicore__ inline void Wait()
{
    if constexpr (KDA_DROP_WAIT != 10 + SYNC) CrossCoreWaitFlag(FLAG[SYNC]);
}


// This core's workspace (op_host/kda_chunk_v6_tiling.h).
template <typename T>
struct Ws {
    __aicore__ inline void Init(GM_ADDR user, const KdaChunkV6TilingData& td, uint32_t core)
    {
        base = user + core * td.wsCoreBytes;
        t = &td;
    }
    template <typename U = T>
    __aicore__ inline GlobalTensor<U> Get(uint32_t i) const
    {
        GlobalTensor<U> g;
        g.SetGlobalBuffer((__gm__ U*)(base + t->wsOffset[i]));
        return g;
    }
    // Column j of the inverse: Ai_diag[j] [16, 16] over A_inv's blocks (j+1..n-1, j), ld 16.
    __aicore__ inline GlobalTensor<T> AinvCol(uint32_t j) const
    {
        uint32_t off = 0;
        for (uint32_t c = 0; c < j; ++c) off += (t->subChunks - c) * t->sub * t->sub;
        return Get(KDA6_AINV)[off];
    }
    // SV = [S ; V_pseudo] of chunk step `buf` (0 or 1: a core's chunks alternate between two copies, so that G of
    // chunk t writes the next state while F2 of chunk t still reads this one).
    template <typename U = T>
    __aicore__ inline GlobalTensor<U> SV(uint32_t buf) const
    {
        GlobalTensor<U> g;
        g.SetGlobalBuffer((__gm__ U*)(base + t->wsOffset[KDA6_SV] + buf * t->svBytes));
        return g;
    }
    GM_ADDR base = nullptr;
    const KdaChunkV6TilingData* t = nullptr;
};

}  // namespace kda_v6
