// Host emulation of the AscendC Matmul high-level API (lib/matmul_intf.h), GM in / GM out, ND format.
// Semantics only: C = op(A) op(B) accumulated in fp32 (as L0C does), rounded once to C's type (as FixPipe
// does). Tiling over L1/L0 and the fractal formats are not modelled. Kernels define ASCENDC_CUBE_ONLY before
// including it: the Matmul then runs on the AIC that calls it (no AIV->AIC message queue), which is what
// the emulation implements; calling it from an AIV is reported.
#pragma once
#include <string>
#include <vector>

#include "kernel_operator.h"
#include "kernel_tiling/kernel_tiling.h"

#ifndef ASCENDC_CUBE_ONLY
#error "the host emulation implements the Matmul API in ASCENDC_CUBE_ONLY mode: define it before this include"
#endif

enum class CubeFormat : uint8_t { ND, NZ, ND_ALIGN };

namespace AscendC {

enum class LayoutMode : uint8_t { NONE, BSNGD, SBNGD, BNGS1S2, NORMAL };

// As asc-devkit impl/adv_api/detail/matmul/utils/matmul_type_def.h (SRCPOS matters on Ascend 950 only).
template <TPosition POSITION, CubeFormat FORMAT, typename TYPE, bool ISTRANS = false,
          LayoutMode LAYOUT = LayoutMode::NONE, bool IBSHARE = false, TPosition SRCPOS = TPosition::GM>
struct MatmulType {
    constexpr static TPosition pos = POSITION;
    constexpr static CubeFormat format = FORMAT;
    using T = TYPE;
    constexpr static bool isTrans = ISTRANS;
    constexpr static LayoutMode layout = LAYOUT;
    constexpr static bool ibShare = IBSHARE;
    constexpr static TPosition srcPos = SRCPOS;
};

namespace detail {
template <typename A, typename C>
constexpr bool OneOf() { return false; }
template <typename A, typename C, typename X, typename... Rest>
constexpr bool OneOf() { return std::is_same<C, X>::value || OneOf<A, C, Rest...>(); }
// Matmul使用说明.md, 表2 "Matmul输入输出数据类型的支持列表", the rows for Atlas A2: A and B of one type, and C:
//   float -> float/half/bfloat16_t; half -> float/half/bfloat16_t/int8_t; bfloat16_t -> float/half/bfloat16_t/
//   int8_t; int8_t -> int32_t/half/int8_t (int4b_t is not emulated; half x int8_t is Atlas 300I only).
template <typename A, typename C>
constexpr bool MatmulCTypeOk()
{
    if (std::is_same<A, float>::value) return OneOf<A, C, float, half, bfloat16_t>();
    if (std::is_same<A, half>::value || std::is_same<A, bfloat16_t>::value)
        return OneOf<A, C, float, half, bfloat16_t, int8_t>();
    if (std::is_same<A, int8_t>::value) return OneOf<A, C, int32_t, half, int8_t>();
    return false;
}
}  // namespace detail

// Real: template <class A_TYPE, class B_TYPE, class C_TYPE, class BIAS_TYPE = C_TYPE, const auto& MM_CFG = CFG_NORM,
// class MM_CB = MatmulCallBackFunc<nullptr, nullptr, nullptr>, MATMUL_POLICY_DEFAULT_OF(MatmulPolicy)> class Matmul
// (Matmul模板参数.md); the emulation keeps the first four.
template <class A_TYPE, class B_TYPE, class C_TYPE, class BIAS_TYPE = C_TYPE>
class Matmul {
    using TA = typename A_TYPE::T;
    using TB = typename B_TYPE::T;
    using TC = typename C_TYPE::T;
    static_assert(std::is_same<TA, TB>::value,
                  "Matmul: A_TYPE::T and B_TYPE::T differ; on Atlas A2 A and B are one type (Matmul使用说明, table 2)");
    static_assert(detail::MatmulCTypeOk<TA, TC>(),
                  "Matmul: this (A, C) type pair is not in the Atlas A2 rows of Matmul使用说明 table 2");
    static_assert(A_TYPE::pos == TPosition::GM && B_TYPE::pos == TPosition::GM && C_TYPE::pos == TPosition::GM,
                  "the emulation supports GM operands only");
    static_assert(A_TYPE::format == CubeFormat::ND && B_TYPE::format == CubeFormat::ND &&
                  C_TYPE::format == CubeFormat::ND, "the emulation supports ND format only");

public:
    // Real: Init(const TCubeTiling* __restrict cubeTiling, TPipe* tpipe = nullptr) (Init-85.md).
    __aicore__ inline void Init(const TCubeTiling* tiling, TPipe* = nullptr)
    {
        ascendc_emu::MatmulUse("REGIST_MATMUL_OBJ");
        if (tiling == nullptr) ascendc_emu::Refuse("REGIST_MATMUL_OBJ", "tiling", "no TCubeTiling given");
        tiling_ = *tiling;
        const TCubeTiling& t = tiling_;
        if (t.baseM <= 0 || t.baseN <= 0 || t.baseK <= 0)
            ascendc_emu::Refuse("REGIST_MATMUL_OBJ", "TCubeTiling baseM/baseN/baseK",
                                "zero: the tiling was not filled (GetTiling on the NPU, KdaFillMatmulTiling here)");
        // What the tiling keeps in the AIC's buffers: depthA1 (depthB1) blocks of baseM x baseK (baseN x baseK) in
        // L1; one block, or two with dbL0A/dbL0B, in L0A/L0B; a baseM x baseN fp32/int32 block (x dbL0C) in L0C.
        const size_t m = t.baseM, n = t.baseN, k = t.baseK;
        ascendc_emu::MatmulRegister(t.depthA1 * m * k * sizeof(TA) + t.depthB1 * n * k * sizeof(TB),
                                    t.dbL0A * m * k * sizeof(TA), t.dbL0B * n * k * sizeof(TB), t.dbL0C * m * n * 4);
        registered_ = true;
    }
    __aicore__ inline void SetOrgShape(int orgM, int orgN, int orgK) { SetOrgShape(orgM, orgN, orgK, orgK); }
    // orgKc: C's row length, where it differs from B's N (0: orgN)
    __aicore__ inline void SetOrgShape(int orgM, int orgN, int orgKa, int orgKb, int orgKc = 0)
    {
        orgM_ = orgM; orgN_ = orgN; orgKa_ = orgKa; orgKb_ = orgKb; orgKc_ = orgKc;
    }
    __aicore__ inline void SetSingleShape(int m, int n, int k) { m_ = m; n_ = n; k_ = k; }
    __aicore__ inline void SetTensorA(const GlobalTensor<TA>& gm, bool transpose = false)
    {
        if (transpose && !A_TYPE::isTrans) ascendc_emu::Fatal("matmul", "SetTensorA(.., true) needs MatmulType<.., isTrans=true>");
        a_ = gm; transA_ = transpose; haveA_ = true;
    }
    __aicore__ inline void SetTensorB(const GlobalTensor<TB>& gm, bool transpose = false)
    {
        if (transpose && !B_TYPE::isTrans) ascendc_emu::Fatal("matmul", "SetTensorB(.., true) needs MatmulType<.., isTrans=true>");
        b_ = gm; transB_ = transpose; haveB_ = true;
    }
    template <bool sync = true>
    __aicore__ inline void IterateAll(const GlobalTensor<TC>& gm, uint8_t enAtomic = 0, bool = false, bool = false,
                                      bool = false)
    {
        ascendc_emu::MatmulUse("Matmul::IterateAll");
        if (!registered_) ascendc_emu::Fatal("matmul", "IterateAll before REGIST_MATMUL_OBJ");
        if (!haveA_ || !haveB_) ascendc_emu::Fatal("matmul", "IterateAll without SetTensorA / SetTensorB");
        if (enAtomic != 0) ascendc_emu::Fatal("unsupported", "IterateAll with atomic add is not emulated");
        if (m_ > tiling_.M || n_ > tiling_.N || k_ > tiling_.Ka)
            ascendc_emu::Fatal("matmul", "single shape " + std::to_string(m_) + "x" + std::to_string(n_) + "x" +
                                             std::to_string(k_) + " exceeds the TCubeTiling's M/N/Ka");
        if (m_ > orgM_ || n_ > orgN_ || k_ > orgKa_ || k_ > orgKb_)
            ascendc_emu::Fatal("matmul", "single shape exceeds the org shape");
        // A: [M][Ka] (ld orgKa) or, transposed, [Ka][M] (ld orgM); B: [Kb][N] (ld orgN) or [N][Kb] (ld orgKb)
        const int ldA = transA_ ? orgM_ : orgKa_, ldB = transB_ ? orgKb_ : orgN_;
        ReadRows(a_.GetPhyAddr(), transA_ ? k_ : m_, transA_ ? m_ : k_, ldA);
        ReadRows(b_.GetPhyAddr(), transB_ ? n_ : k_, transB_ ? k_ : n_, ldB);
        ascendc_emu::NoteCubeMacs(static_cast<uint64_t>(m_) * n_ * k_);
        std::vector<float> acc(static_cast<size_t>(m_) * n_, 0.0f);
        const TA* A = a_.GetPhyAddr();
        const TB* B = b_.GetPhyAddr();
        for (int i = 0; i < m_; ++i) {
            float* row = &acc[static_cast<size_t>(i) * n_];
            for (int kk = 0; kk < k_; ++kk) {
                const float a = static_cast<float>(transA_ ? A[static_cast<size_t>(kk) * ldA + i]
                                                           : A[static_cast<size_t>(i) * ldA + kk]);
                for (int j = 0; j < n_; ++j)
                    row[j] += a * static_cast<float>(transB_ ? B[static_cast<size_t>(j) * ldB + kk]
                                                             : B[static_cast<size_t>(kk) * ldB + j]);
            }
        }
        TC* C = gm.GetPhyAddr();
        const size_t ldC = static_cast<size_t>(orgKc_ > 0 ? orgKc_ : orgN_);
        if (static_cast<size_t>(n_) > ldC) ascendc_emu::Fatal("matmul", "single N exceeds C's row length (orgKc)");
        for (int i = 0; i < m_; ++i) {
            ascendc_emu::GmAccess(C + static_cast<size_t>(i) * ldC, n_ * sizeof(TC), true, PIPE_FIX,
                                  "Matmul::IterateAll (FixPipe)");
            for (int j = 0; j < n_; ++j) C[static_cast<size_t>(i) * ldC + j] = static_cast<TC>(acc[static_cast<size_t>(i) * n_ + j]);
        }
        haveA_ = haveB_ = false;
    }
    __aicore__ inline void End() { ascendc_emu::MatmulUse("Matmul::End"); registered_ = false; }

private:
    template <typename T>
    void ReadRows(const T* base, int rows, int cols, int ld)
    {
        for (int r = 0; r < rows; ++r)
            ascendc_emu::GmAccess(base + static_cast<size_t>(r) * ld, cols * sizeof(T), false, PIPE_MTE2,
                                  "Matmul::IterateAll (load)");
    }
    TCubeTiling tiling_{};
    GlobalTensor<TA> a_;
    GlobalTensor<TB> b_;
    int orgM_ = 0, orgN_ = 0, orgKa_ = 0, orgKb_ = 0, orgKc_ = 0, m_ = 0, n_ = 0, k_ = 0;
    bool transA_ = false, transB_ = false, haveA_ = false, haveB_ = false, registered_ = false;
};

}  // namespace AscendC

namespace matmul {
using AscendC::Matmul;
using AscendC::MatmulType;
}  // namespace matmul

// REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm1, &tiling1 [, mm2, &tiling2 ...]): each object with its tiling,
// in order (their flag ids [0, 2N-1] and L1 add up).
namespace ascendc_emu_detail {
inline void RegistMatmul(AscendC::TPipe*) {}
template <typename MM, typename... Rest>
inline void RegistMatmul(AscendC::TPipe* pipe, MM& mm, const TCubeTiling* tiling, Rest&&... rest)
{
    mm.Init(tiling, pipe);
    RegistMatmul(pipe, rest...);
}
}  // namespace ascendc_emu_detail
#define REGIST_MATMUL_OBJ(tpipe, workspace, ...) ::ascendc_emu_detail::RegistMatmul((tpipe), __VA_ARGS__)
