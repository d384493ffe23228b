// Shared by kda_chunk_v5's Cube (kda_chunk_v5.cpp) and Vector (kda_chunk_v5_vec.h) sides: flags numbered as the
// simulator's syncs pass by pass, fault injection, the workspace and the per-item area.
#pragma once
#define ASCENDC_CUBE_ONLY   // the Matmul API runs on the AIC that calls it
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "kda_kernel_io.h"
#include "kda_sync.h"
#include "kda_tiles.h"
#include "kda_diagonal_blocks.h"   // PairStart, SumSlot
#include "../op_host/kda_chunk_v5_tiling.h"

#ifndef KDA_DROP_BARRIER
#define KDA_DROP_BARRIER 0   // host tests: 1 removes the SyncAll between the passes
#endif

namespace kda_v5 {
using namespace AscendC;
using namespace kda;   // PipeFence, VecIo, TokenOffset

// ---- flags: pass p, sync n; fault injection KDA_DROP_WAIT / KDA_DROP_SET = 10 p + n (p = 1 intra, 2 state) ----
// Sync n of either pass takes flag 3 + n: the two Matmul objects own [0, 3] (CrossCoreSetFlag docs: N objects use
// [0, 2N-1]), ids 0-10 exist on A2 and SyncAll owns 11-14, so the 3 + 4 syncs and the state's own hand-off do not
// fit side by side. The passes reuse the ids: SyncAll<false>() lies between them and every set of the intra pass
// has met its wait before it. The state's own hand-off is sync 0 of the state pass (KDA_DROP_*=20), flag 8.
constexpr uint16_t MATMUL_OBJECTS_V5 = 2;
constexpr uint16_t INTRA_FLAG[4] = {0xFFFF, 4, 5, 6};
constexpr uint16_t STATE_FLAG[5] = {8, 4, 5, 6, 7};   // [0]: the state S, [1..4]: ① .. ④
constexpr bool V5FlagIdsValid()
{
    for (int i = 1; i <= 3; ++i)
        for (int j = 1; j < i; ++j)
            if (INTRA_FLAG[i] == INTRA_FLAG[j]) return false;
    for (int i = 0; i <= 4; ++i)
        for (int j = 0; j < i; ++j)
            if (STATE_FLAG[i] == STATE_FLAG[j]) return false;
    for (int i = 1; i <= 3; ++i)
        if (INTRA_FLAG[i] < 2 * MATMUL_OBJECTS_V5 || INTRA_FLAG[i] > 10) return false;
    for (int j = 0; j <= 4; ++j)
        if (STATE_FLAG[j] < 2 * MATMUL_OBJECTS_V5 || STATE_FLAG[j] > 10) return false;
    return true;
}
static_assert(V5FlagIdsValid(), "v5 flag ids: distinct within a pass, within 0-10, clear of the two Matmul objects' [0, 3]");

template <int PASS, int SYNC>
constexpr uint16_t FlagId() { return PASS == 1 ? INTRA_FLAG[SYNC] : STATE_FLAG[SYNC]; }
template <int PASS, int SYNC, pipe_t PIPE>
__aicore__ inline void Set()
{
    if constexpr (KDA_DROP_SET != 10 * PASS + SYNC) CrossCoreSetFlag<SYNC_MODE, PIPE>(FlagId<PASS, SYNC>());
}
template <int PASS, int SYNC>
__aicore__ inline void Wait()
{
    if constexpr (KDA_DROP_WAIT != 10 * PASS + SYNC) CrossCoreWaitFlag(FlagId<PASS, SYNC>());
}
__aicore__ inline void PassBarrier()
{
    if constexpr (KDA_DROP_BARRIER == 0) SyncAll<false>();   // every AIC and AIV of the launch
}


// This core's workspace and the per-item area (op_host/kda_chunk_v5_tiling.h).
template <typename T>
struct Ws {
    __aicore__ inline void Init(GM_ADDR user, const KdaChunkV5TilingData& td, uint32_t core)
    {
        base = user + core * td.wsCoreBytes;
        items = user + td.itemBase;
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
        return Get(KDA5_AINV)[off];
    }
    // SV = [S ; V_pseudo] of chunk step `buf` (0 or 1: the chunks a core runs alternate between two copies, so
    // that G of chunk t writes the next state while F2 of chunk t still reads this one).
    template <typename U = T>
    __aicore__ inline GlobalTensor<U> SV(uint32_t buf) const
    {
        GlobalTensor<U> g;
        g.SetGlobalBuffer((__gm__ U*)(base + t->wsOffset[KDA5_SV] + buf * t->svBytes));
        return g;
    }
    // K_decay of chunk step `buf` (two copies: A of chunk t+1 writes one while F1 of chunk t reads the other).
    __aicore__ inline GlobalTensor<T> KDecay(uint32_t buf) const
    {
        return Get(KDA5_K_DECAY)[uint64_t(buf) * t->chunk * t->dk];
    }
    __aicore__ inline GlobalTensor<T> M(uint32_t item) const { return Item(item, 0); }
    __aicore__ inline GlobalTensor<T> QA(uint32_t item) const { return Item(item, t->qaOffset); }
    __aicore__ inline GlobalTensor<T> Item(uint32_t item, uint64_t off) const
    {
        GlobalTensor<T> g;
        g.SetGlobalBuffer((__gm__ T*)(items + item * t->itemBytes + off));
        return g;
    }
    GM_ADDR base = nullptr;
    GM_ADDR items = nullptr;
    const KdaChunkV5TilingData* t = nullptr;
};

}  // namespace kda_v5
