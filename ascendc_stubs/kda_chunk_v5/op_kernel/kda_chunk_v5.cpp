// kda_chunk_v5: kda/programs/v5.py as an AscendC mix kernel for Atlas A2 (910B). Two passes in one launch, an
// all-core SyncAll<false>() between them (the design's boundary = BARRIER); every exp argument is <= 0.
//
// Pass "intra", over every (sequence, chunk) item, item i on AI core i % blockDim: M = (I + A_kk)^-1 Diag(beta)
// and A_qk of the chunk, with v4's reference points twice (16-wide sub-chunks, 4-wide micro-chunks inside).
//   AIV: A set①  wait② C set③          ① K_left, Q_left, K_right, K_left4, Q_left4, K_right4
//   AIC: wait① B set②  wait③ D         ② A_kk_off, A_qk_off, A_kk_off4, A_qk_off4   ③ Ai_diag, A_neg, D_beta
// D writes M into the item's GM area; C writes A_qk there (the pass outputs, read by the state pass).
// Pass "state", per sequence on core s % blockDim, its chunks in order; only what needs the state waits for it.
// Each unit runs v5.py's per-chunk order, and the AIVs make chunk t+1's operands (A) before the state of chunk t
// (G), so that the Cube's D1 of chunk t+1 (W = M K_scaled, U = M V: no state) runs beside G, as F2 does:
//   AIV: ... wait②(t) E set③(t)  A(t+1) set①(t+1)  wait④(t) G set S(t+1)  wait②(t+1) ...
//   AIC: ... wait S(t) D2 set②(t)  wait③(t) F1 set④(t) F2  wait①(t+1) D1  wait S(t+1) D2 ...
// ① K_scaled, Q_scaled, K_decay   S: the state, on its own hand-off   ② U, WS   ③ V_pseudo   ④ S_delta.
// A sequence starts with A(0) set①(0), then S := h0 set S(0) (the simulator counts that first hand-off free: the
// state is a GM input). F2 writes O = [Q_scaled | A_qk] [S ; V_pseudo] straight to the output (a second Matmul
// object, C in fp32). What two chunks have in flight at once has two copies, by the parity of the core's chunk
// count: SV = [S ; V_pseudo] (G of chunk t writes the next state while F2 of chunk t reads this one), K_decay
// (A of chunk t+1 writes it while F1 of chunk t reads it) and gamma_C in UB.
//
// Flags: the simulator's syncs, pass by pass: sync n takes id 3 + n in both passes (intra ①②③ = 4, 5, 6; state
// ①②③④ = 4, 5, 6, 7), the state's own hand-off id 8. The passes reuse ids across the SyncAll; two Matmul objects
// take 0-3 (CrossCoreSetFlag docs: N objects use [0, 2N-1]); SyncAll owns 11-14.
// The two AIVs split every phase: the factors of A by key channels, the micro-diagonal blocks and C by
// sub-chunks (AIV s takes sub-chunks [s n/2, (s+1) n/2), so the micro blocks it keeps in UB are the ones its C
// needs), E by rows, G by rows of S (key channels, matching gamma_C). No AIV reads what the other wrote.
//
// Compiles with CANN (bisheng, SOC_VERSION=Ascend910B2) or with g++ against ascendc_stubs/host.
#include "kda_chunk_v5_vec.h"   // the Vector side, and kda_chunk_v5_common.h

namespace kda_v5 {
using namespace AscendC;
using namespace kda;

// ---- Cube ------------------------------------------------------------------------------------------------
template <typename T>
class KdaV5Cube {
public:
    using Operand = MatmulType<TPosition::GM, CubeFormat::ND, T, true>;
    Matmul<Operand, Operand, MatmulType<TPosition::GM, CubeFormat::ND, T>> mm;             // C in T
    Matmul<Operand, Operand, MatmulType<TPosition::GM, CubeFormat::ND, float>> mmOut;     // O, in fp32

    __aicore__ inline void Init(GM_ADDR v, GM_ADDR o, GM_ADDR user, const KdaChunkV5TilingData& td)
    {
        td_ = &td;
        ws_.Init(user, td, static_cast<uint32_t>(GetBlockIdx()));
        vGm_.SetGlobalBuffer((__gm__ T*)v);
        oGm_.SetGlobalBuffer((__gm__ float*)o);
    }

    __aicore__ inline void Process()
    {
        const KdaChunkV5TilingData& td = *td_;
        const uint32_t core = static_cast<uint32_t>(GetBlockIdx());
        for (uint32_t item = core; item < td.items; item += GetBlockNum()) {
            Wait<1, 1>();              // ① the factors of A
            IntraB();
            Set<1, 2, PIPE_FIX>();     // ② A_kk_off, A_qk_off, A_kk_off4, A_qk_off4
            Wait<1, 3>();              // ③ Ai_diag, A_neg, D_beta
            IntraD(item);              // M of the item, to its GM area
        }
        PassBarrier();                 // every item's M and A_qk are in GM
        uint32_t step = 0;             // this core's chunks so far: copy step % 2
        for (uint32_t seq = core; seq < td.sequences; seq += GetBlockNum()) {
            Wait<2, 1>();              // ① of the sequence's first chunk
            StateD1(seq, 0, seq * td.numChunks);
            for (uint32_t t = 0; t < td.numChunks; ++t, ++step) {
                const uint32_t item = seq * td.numChunks + t, buf = step % 2;
                Wait<2, 0>();          // S, the state, on its own hand-off
                StateD2(buf);
                Set<2, 2, PIPE_FIX>(); // ② U, WS
                Wait<2, 3>();          // ③ V_pseudo
                StateF1(buf);
                Set<2, 4, PIPE_FIX>(); // ④ S_delta
                StateF2(seq, t, item, buf);       // O, beside G on the AIVs
                if (t + 1 < td.numChunks) {
                    Wait<2, 1>();      // ① K_scaled, Q_scaled, K_decay of chunk t+1
                    StateD1(seq, t + 1, item + 1);   // no state: beside G of chunk t
                }
            }
        }
        mm.End();
        mmOut.End();
    }

private:
    // C[m, n] = op(A) op(B) over k; lda, ldb, ldc: the row lengths as stored (A^T: A stored [k, m]).
    template <typename MM, typename TC>
    __aicore__ inline void MatMul(MM& obj, const GlobalTensor<TC>& c, uint32_t ldc, const GlobalTensor<T>& a,
                                  uint32_t lda, bool transA, const GlobalTensor<T>& b, uint32_t ldb, bool transB,
                                  uint32_t m, uint32_t n, uint32_t k)
    {
        const int orgM = transA ? lda : m, orgKa = transA ? k : lda;
        const int orgN = transB ? n : ldb, orgKb = transB ? ldb : k;
        obj.SetOrgShape(orgM, orgN, orgKa, orgKb, static_cast<int>(ldc) == orgN ? 0 : ldc);
        obj.SetSingleShape(m, n, k);
        obj.SetTensorA(a, transA);
        obj.SetTensorB(b, transB);
        obj.IterateAll(c);
    }

    // Intra B: the blocks between 16-wide sub-chunks (per I >= 1: [16, 16 I] = K_left[I] K_right(I, 0..I-1)^T)
    // and between 4-wide micro-chunks inside each sub-chunk (per I, a >= 1: [4, 4 a]), for K K^T and Q K^T.
    __aicore__ inline void IntraB()
    {
        const KdaChunkV5TilingData& td = *td_;
        const uint32_t S = td.sub, s = td.micro, dk = td.dk, P4 = td.pairs4, m1 = td.micros - 1;
        for (uint32_t I = 1; I < td.subChunks; ++I) {
            const GlobalTensor<T> right = ws_.Get(KDA5_K_RIGHT)[PairStart(I) * S * dk];
            MatMul(mm, ws_.Get(KDA5_A_KK_OFF)[PairStart(I) * S * S], I * S, ws_.Get(KDA5_K_LEFT)[(I - 1) * S * dk], dk,
                   false, right, dk, true, S, I * S, dk);
            MatMul(mm, ws_.Get(KDA5_A_QK_OFF)[PairStart(I) * S * S], I * S, ws_.Get(KDA5_Q_LEFT)[(I - 1) * S * dk], dk,
                   false, right, dk, true, S, I * S, dk);
        }
        for (uint32_t I = 0; I < td.subChunks; ++I) {
            for (uint32_t a = 1; a < td.micros; ++a) {
                const uint32_t blk = I * P4 + PairStart(a), left = (I * m1 + a - 1) * s * dk;
                const GlobalTensor<T> right = ws_.Get(KDA5_K_RIGHT4)[blk * s * dk];
                MatMul(mm, ws_.Get(KDA5_A_KK_OFF4)[blk * s * s], a * s, ws_.Get(KDA5_K_LEFT4)[left], dk, false, right,
                       dk, true, s, a * s, dk);
                MatMul(mm, ws_.Get(KDA5_A_QK_OFF4)[blk * s * s], a * s, ws_.Get(KDA5_Q_LEFT4)[left], dk, false, right,
                       dk, true, s, a * s, dk);
            }
        }
    }

    // Intra D: the blocks of (I + A_kk)^-1 below the diagonal from its diagonal blocks (fla.merge_inverse:
    // Ai[i][j] = Ai[i][i] sum_m A_neg[i][m] Ai[m][j], m = j..i-1, nearest the diagonal first), then
    // M = A_inv Diag(beta), block column by block column: M[16 j.., 16 j..] = col_j D_beta[16 j, 16 j].
    // A column of the inverse is stored whole (Ai_diag[j] over the blocks below it), so each sum over m is one
    // matmul of a row segment of A_neg by the top of column j. M's blocks above the diagonal are never written
    // (nor read: the state pass multiplies by its lower block triangle only).
    __aicore__ inline void IntraD(uint32_t item)
    {
        const KdaChunkV5TilingData& td = *td_;
        const uint32_t S = td.sub, C = td.chunk, n = td.subChunks;
        const GlobalTensor<T> aNeg = ws_.Get(KDA5_A_NEG), acc = ws_.Get(KDA5_ACC);
        for (uint32_t d = 1; d < n; ++d) {
            for (uint32_t i = d; i < n; ++i) {
                const uint32_t j = i - d;
                MatMul(mm, acc, S, aNeg[i * S * C + j * S], C, false, ws_.AinvCol(j), S, false, S, S, d * S);
                PipeBarrier<PIPE_ALL>();   // acc went out through FixPipe; the next matmul reads it through MTE2
                MatMul(mm, ws_.AinvCol(j)[d * S * S], S, ws_.AinvCol(i), S, false, acc, S, false, S, S, S);
                PipeBarrier<PIPE_ALL>();   // this block of the inverse is read by the next diagonals and by M
            }
        }
        for (uint32_t j = 0; j < n; ++j)
            MatMul(mm, ws_.M(item)[j * S * C + j * S], C, ws_.AinvCol(j), S, false,
                   ws_.Get(KDA5_D_BETA)[j * S * C + j * S], C, false, (n - j) * S, S, S);
    }

    // State D1: W = M K_scaled (twice side by side with the state in two parts), U = M V (V from the input), per
    // row block I over M's lower block triangle (K = 16 (I+1)). Needs no state.
    __aicore__ inline void StateD1(uint32_t seq, uint32_t t, uint32_t item)
    {
        const KdaChunkV5TilingData& td = *td_;
        const uint32_t S = td.sub, C = td.chunk, dk = td.dk, dv = td.dv, kS = td.stateParts * dk;
        const GlobalTensor<T> M = ws_.M(item), W = ws_.Get(KDA5_W), v = vGm_[TokenOffset(td, seq, t, 0, dv)];
        for (uint32_t I = 0; I < td.subChunks; ++I) {
            for (uint32_t part = 0; part < td.stateParts; ++part)
                MatMul(mm, W[I * S * kS + part * dk], kS, M[I * S * C], C, false, ws_.Get(KDA5_K_SCALED), dk, false,
                       S, dk, (I + 1) * S);
            MatMul(mm, ws_.Get(KDA5_U)[I * S * dv], dv, M[I * S * C], C, false, v, td.heads * dv, false, S, dv,
                   (I + 1) * S);
        }
        PipeBarrier<PIPE_ALL>();   // W went out through FixPipe; D2 reads it back through MTE2
    }

    // State D2: WS = W S (K = parts d_k: S_hi and S_lo in turn with bf16 transfers).
    __aicore__ inline void StateD2(uint32_t buf)
    {
        const KdaChunkV5TilingData& td = *td_;
        const uint32_t C = td.chunk, dv = td.dv, kS = td.stateParts * td.dk;
        MatMul(mm, ws_.Get(KDA5_WS), dv, ws_.Get(KDA5_W), kS, false, ws_.SV(buf), dv, false, C, dv, kS);
    }

    // State F1: S_delta = K_decay^T V_pseudo.
    __aicore__ inline void StateF1(uint32_t buf)
    {
        const KdaChunkV5TilingData& td = *td_;
        const uint32_t C = td.chunk, dk = td.dk, dv = td.dv, kS = td.stateParts * dk;
        MatMul(mm, ws_.Get(KDA5_S_DELTA), dv, ws_.KDecay(buf), dk, true, ws_.SV(buf)[kS * dv], dv, false, dk,
               dv, C);
    }

    // State F2: O = [Q_scaled | A_qk] [S ; V_pseudo], one accumulation over K = parts d_k + C, to the output in fp32,
    // in the simulator's tiles: the state cut along d_v, one Matmul call per mmTilingOut.singleCoreN columns.
    __aicore__ inline void StateF2(uint32_t seq, uint32_t t, uint32_t item, uint32_t buf)
    {
        const KdaChunkV5TilingData& td = *td_;
        const uint32_t C = td.chunk, dv = td.dv, n = static_cast<uint32_t>(td.mmTilingOut.singleCoreN);
        KDA_PHASE_RUN("state.F2");
        for (uint32_t c0 = 0; c0 < dv; c0 += n) {
            KDA_CUBE_TILE("state.F2", KdaMatmulL1Bytes(td.mmTilingOut, sizeof(T)), td.dk, n);   // S's [d_k, n]
            MatMul(mmOut, oGm_[TokenOffset(td, seq, t, 0, dv) + c0], td.heads * dv, ws_.QA(item), td.qaCols, false,
                   ws_.SV(buf)[c0], dv, false, C, n, td.qaCols);
        }
    }

    const KdaChunkV5TilingData* td_ = nullptr;
    Ws<T> ws_;
    GlobalTensor<T> vGm_;
    GlobalTensor<float> oGm_;
};

template <typename T>
__aicore__ inline void Run(GM_ADDR q, GM_ADDR k, GM_ADDR v, GM_ADDR g, GM_ADDR beta, GM_ADDR h0, GM_ADDR o, GM_ADDR ht,
                           GM_ADDR user, const KdaChunkV5TilingData& td)
{
    if ASCEND_IS_AIC {
        TPipe pipe;
        KdaV5Cube<T> cube;
        cube.Init(v, o, user, td);
        REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), cube.mm, &td.mmTiling, cube.mmOut, &td.mmTilingOut);
        cube.Process();
    }
    if ASCEND_IS_AIV {
        TPipe pipe;
        KdaV5Vec<T> vec;
        vec.Init(q, k, g, beta, h0, ht, user, td, &pipe);
        vec.Process();
    }
}

}  // namespace kda_v5

extern "C" __global__ __aicore__ void kda_chunk_v5(GM_ADDR q, GM_ADDR k, GM_ADDR v, GM_ADDR g, GM_ADDR beta,
                                                   GM_ADDR h0, GM_ADDR o, GM_ADDR ht, GM_ADDR workspace,
                                                   GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    REGISTER_TILING_DEFAULT(KdaChunkV5TilingData);
    GET_TILING_DATA_WITH_STRUCT(KdaChunkV5TilingData, tilingData, tiling);
    GM_ADDR user = AscendC::GetUserWorkspace(workspace);
    if (TILING_KEY_IS(KDA_TILING_KEY_FP32)) {
        kda_v5::Run<float>(q, k, v, g, beta, h0, o, ht, user, tilingData);
    } else if (TILING_KEY_IS(KDA_TILING_KEY_BF16)) {
        kda_v5::Run<bfloat16_t>(q, k, v, g, beta, h0, o, ht, user, tilingData);
    }
}
