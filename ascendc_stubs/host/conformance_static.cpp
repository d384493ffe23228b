// Compile-time refusals of the host emulation: type rules of the real AscendC API that the emulation turns
// into static_asserts. Not built by CMake: tests/test_ascendc_conformance.py compiles it with g++ -fsyntax-only,
// once as it is (every case below must be refused, each with its own message) and once with -DKDA_CONFORMANCE_OK
// (the same calls with types the API accepts must compile).
#define ASCENDC_CUBE_ONLY
#include "kernel_operator.h"
#include "lib/matmul_intf.h"

using namespace AscendC;

#ifdef KDA_CONFORMANCE_OK
using Bad16 = float;   // every case below with a type the real API takes
using BadB = float;
using BadC = float;
using BadInt = float;
constexpr int32_t kDepth = 1;
using BadCastSrc = bfloat16_t;
#else
using Bad16 = bfloat16_t;   // no bfloat16_t arithmetic on Atlas A2 (Add.md: int16_t, half, int32_t, float)
using BadB = bfloat16_t;    // Matmul with A float and B bfloat16_t (Matmul使用说明 table 2: A and B of one type)
using BadC = int8_t;        // float x float -> int8_t is not an A2 row of that table
using BadInt = int32_t;     // Exp / ReduceSum take half or float
constexpr int32_t kDepth = 0;   // depth 0 is the inplace form; EnQue/DeQue need depth >= 1
using BadCastSrc = int32_t;     // not a pair the emulation (or this kernel set) uses
#endif

void CaseAdd(const LocalTensor<Bad16>& x) { Add(x, x, x, 16); }
void CaseMuls(const LocalTensor<Bad16>& x) { Muls(x, x, static_cast<Bad16>(2.0f), 16); }
void CaseExp(const LocalTensor<BadInt>& x) { Exp(x, x, 8); }
void CaseReduceSum(const LocalTensor<BadInt>& x) { ReduceSum(x, x, x, 8); }
void CaseCast(const LocalTensor<float>& d, const LocalTensor<BadCastSrc>& s) { Cast(d, s, RoundMode::CAST_NONE, 8); }
void CaseQueue(TQue<TPosition::VECIN, kDepth>& q) { (void)q.AllocTensor<float>(); }
using OperandA = MatmulType<TPosition::GM, CubeFormat::ND, float>;
void CaseMatmulAB(Matmul<OperandA, MatmulType<TPosition::GM, CubeFormat::ND, BadB>, OperandA>& mm) { mm.End(); }
void CaseMatmulC(Matmul<OperandA, OperandA, MatmulType<TPosition::GM, CubeFormat::ND, BadC>>& mm) { mm.End(); }
