// Host stand-in for CANN's kernel_tiling/kernel_tiling.h: the TCubeTiling fields the emulated Matmul reads (names as in
// asc-devkit docs Matmul-Tiling类/TCubeTiling结构体.md), including those that size its L1 and L0 use.
// On the NPU, CANN's header and matmul_tiling::MatmulApiTiling::GetTiling fill the real struct.
#pragma once
#include <cstdint>

struct TCubeTiling {
    int32_t usedCoreNum = 1;
    int32_t M = 0, N = 0, Ka = 0, Kb = 0;                      // the largest shape the tiling was made for
    int32_t singleCoreM = 0, singleCoreN = 0, singleCoreK = 0;
    int32_t baseM = 0, baseN = 0, baseK = 0;
    int32_t depthA1 = 0, depthB1 = 0;                          // baseM x baseK (baseN x baseK) blocks held in L1
    int32_t stepM = 0, stepN = 0, stepKa = 0, stepKb = 0;
    int32_t isBias = 0;
    int32_t dbL0A = 1, dbL0B = 1, dbL0C = 1;                   // 2: double-buffered L0A / L0B / L0C
};
namespace AscendC { namespace tiling { using ::TCubeTiling; } }
