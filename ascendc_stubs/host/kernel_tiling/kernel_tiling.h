// Host stand-in for CANN's kernel_tiling/kernel_tiling.h: only the TCubeTiling fields the emulated Matmul reads.
// On the NPU, CANN's header and matmul_tiling::MatmulApiTiling::GetTiling fill the real struct.
#pragma once
#include <cstdint>

struct TCubeTiling {
    int32_t usedCoreNum = 1;
    int32_t M = 0, N = 0, Ka = 0, Kb = 0;                      // the largest shape the tiling was made for
    int32_t singleCoreM = 0, singleCoreN = 0, singleCoreK = 0;
    int32_t baseM = 0, baseN = 0, baseK = 0;
    int32_t isBias = 0;
};
namespace AscendC { namespace tiling { using ::TCubeTiling; } }
