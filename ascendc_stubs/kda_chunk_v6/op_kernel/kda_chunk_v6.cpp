// kda_chunk_v6: kda/programs/v6.py as an AscendC mix kernel for Atlas A2 (910B). v5's math in one loop per chunk:
// every exp argument is <= 0, six hand-offs and the state on a hand-off of its own. Sequence s runs on AI core
// s % blockDim, its chunks in order.
//
// Per chunk (the simulator's six syncs and the state S, in the template's order on each unit):
//   A  (Vec)  gates' cumsum, the cross-block factors of 16- and 4-wide reference points, the micro-diagonal blocks
//   ①  K_left, Q_left, K_right, K_left4, Q_left4, K_right4
//   B  (Cube) the off-diagonal blocks of A_kk and A_qk
//   ②  A_kk_off, A_qk_off, A_kk_off4, A_qk_off4
//   C  (Vec)  A_kk and A_qk assembled, the 16-wide diagonal inverses; K_scaled, Q_scaled, K_decay, gamma_C
//   ③  Ai_diag, A_neg, D_beta, A_qk, K_scaled, Q_scaled, K_decay
//   D1 (Cube) M = (I + StrictTril(A_kk))^-1 Diag(beta) by FLA's merge, W = M K_scaled, U = M V (no state)
//   S  the state, on its own hand-off (G of the chunk before, or h0)
//   D2 (Cube) W S
//   ④  U, WS
//   E  (Vec)  V_pseudo = U - W S
//   ⑤  V_pseudo
//   F1 (Cube) S_delta = K_decay^T V_pseudo
//   ⑥  S_delta
//   G  (Vec)  S_new = Diag(gamma_C) S + S_delta;   F2 (Cube) O = [Q_scaled | A_qk] [S ; V_pseudo], beside G
//
// The AIVs run one chunk ahead: A and C of chunk t+1 (no state) before G of chunk t, so the Cube's B and D1 of
// chunk t+1 run beside G and only D2 waits for the state:
//   AIV: ... wait④(t) E set⑤(t)  A(t+1) set①(t+1) wait②(t+1) C(t+1) set③(t+1)  wait⑥(t) G set S(t+1)  wait④(t+1) ...
//   AIC: ... wait⑤(t) F1 set⑥(t) F2  wait①(t+1) B set②(t+1)  wait③(t+1) D1  wait S(t+1) D2 set④(t+1) ...
// A sequence opens with A(0) set①(0) wait②(0) C(0) set③(0), then S := h0, set S(0). What two chunks have in flight
// at once has two copies, by the parity of the core's chunk count: SV = [S ; V_pseudo] (G of chunk t writes the
// next state while F2 of chunk t reads this one) and gamma_C in UB (C of chunk t+1 makes it before G of chunk t
// uses chunk t's). Everything else has one copy: C(t+1) writes its tensors after wait②(t+1), which the Cube sets
// after F1(t) and F2(t) read chunk t's.
//
// Flags: sync n takes id 3 + n (4-9), the state's hand-off id 10; two Matmul objects take 0-3 (CrossCoreSetFlag
// docs: N objects use [0, 2N-1]); SyncAll owns 11-14.
// The two AIVs split every phase as in kda_chunk_v5: the factors of A and C's operands by key channels, the
// micro-diagonal blocks and C's assembly by sub-chunks (AIV s takes sub-chunks [s n/2, (s+1) n/2), so the micro
// blocks it keeps in UB are the ones its C needs), E by rows, G by rows of S (key channels, matching gamma_C).
// No AIV reads what the other wrote.
//
// Compiles with CANN (bisheng, SOC_VERSION=Ascend910B2) or with g++ against ascendc_stubs/host.
#include "kda_chunk_v6_vec.h"   // the Vector side, and kda_chunk_v6_common.h

namespace kda_v6 {
using namespace AscendC;
using namespace kda;

// ---- Cube ------------------------------------------------------------------------------------------------
template <typename T>
class KdaV6Cube {
public:
    using Operand = MatmulType<TPosition::GM, CubeFormat::ND, T, true>;
    Matmul<Operand, Operand, MatmulType<TPosition::GM, CubeFormat::ND, T>> mm;             // C in T
    Matmul<Operand, Operand, MatmulType<TPosition::GM, CubeFormat::ND, float>> mmOut;     // O, in fp32

    __aicore__ inline void Init(GM_ADDR v, GM_ADDR o, GM_ADDR user, const KdaChunkV6TilingData& td)
    {
        td_ = &td;
        ws_.Init(user, td, static_cast<uint32_t>(GetBlockIdx()));
        vGm_.SetGlobalBuffer((__gm__ T*)v);
        oGm_.SetGlobalBuffer((__gm__ float*)o);
    }

    __aicore__ inline void Process()
    {
        const KdaChunkV6TilingData& td = *td_;
        const uint32_t core = static_cast<uint32_t>(GetBlockIdx());
        uint32_t step = 0;             // this core's chunks so far: SV copy step % 2
        for (uint32_t seq = core; seq < td.sequences; seq += GetBlockNum()) {
            for (uint32_t t = 0; t < td.numChunks; ++t, ++step) {
                const uint32_t buf = step % 2;
                Wait<1>();             // ① the factors of A
                PhaseB();
                Set<2, PIPE_FIX>();    // ② A_kk_off, A_qk_off, A_kk_off4, A_qk_off4
                Wait<3>();             // ③ Ai_diag, A_neg, D_beta, A_qk, K_scaled, Q_scaled, K_decay
                PhaseD1(seq, t);       // no state
                Wait<0>();             // S, the state, on its own hand-off
                PhaseD2(buf);
                Set<4, PIPE_FIX>();    // ④ U, WS
                Wait<5>();             // ⑤ V_pseudo
                PhaseF1(buf);
                Set<6, PIPE_FIX>();    // ⑥ S_delta
                PhaseF2(seq, t, buf);  // O, beside G on the AIVs
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

    // B: the blocks between 16-wide sub-chunks (per I >= 1: [16, 16 I] = K_left[I] K_right(I, 0..I-1)^T) and
    // between 4-wide micro-chunks inside each sub-chunk (per I, a >= 1: [4, 4 a]), for K K^T and Q K^T.
    __aicore__ inline void PhaseB()
    {
        const KdaChunkV6TilingData& td = *td_;
        const uint32_t S = td.sub, s = td.micro, dk = td.dk, P4 = td.pairs4, m1 = td.micros - 1;
        for (uint32_t I = 1; I < td.subChunks; ++I) {
            const GlobalTensor<T> right = ws_.Get(KDA6_K_RIGHT)[PairStart(I) * S * dk];
            MatMul(mm, ws_.Get(KDA6_A_KK_OFF)[PairStart(I) * S * S], I * S, ws_.Get(KDA6_K_LEFT)[(I - 1) * S * dk], dk,
                   false, right, dk, true, S, I * S, dk);
            MatMul(mm, ws_.Get(KDA6_A_QK_OFF)[PairStart(I) * S * S], I * S, ws_.Get(KDA6_Q_LEFT)[(I - 1) * S * dk], dk,
                   false, right, dk, true, S, I * S, dk);
        }
        for (uint32_t I = 0; I < td.subChunks; ++I) {
            for (uint32_t a = 1; a < td.micros; ++a) {
                const uint32_t blk = I * P4 + PairStart(a), left = (I * m1 + a - 1) * s * dk;
                const GlobalTensor<T> right = ws_.Get(KDA6_K_RIGHT4)[blk * s * dk];
                MatMul(mm, ws_.Get(KDA6_A_KK_OFF4)[blk * s * s], a * s, ws_.Get(KDA6_K_LEFT4)[left], dk, false, right,
                       dk, true, s, a * s, dk);
                MatMul(mm, ws_.Get(KDA6_A_QK_OFF4)[blk * s * s], a * s, ws_.Get(KDA6_Q_LEFT4)[left], dk, false, right,
                       dk, true, s, a * s, dk);
            }
        }
    }

    // D1: the blocks of (I + A_kk)^-1 below the diagonal from its diagonal blocks (fla.merge_inverse:
    // Ai[i][j] = Ai[i][i] sum_m A_neg[i][m] Ai[m][j], m = j..i-1, nearest the diagonal first), then
    // M = A_inv Diag(beta) block column by block column (M's blocks above the diagonal are never written nor read),
    // then W = M K_scaled (twice side by side with the state in two parts) and U = M V (V from the input), per row
    // block I over M's lower block triangle (K = 16 (I+1)). M, W and the inverse's lower blocks are the Cube's own.
    __aicore__ inline void PhaseD1(uint32_t seq, uint32_t t)
    {
        const KdaChunkV6TilingData& td = *td_;
        const uint32_t S = td.sub, C = td.chunk, n = td.subChunks, dk = td.dk, dv = td.dv, kS = td.stateParts * dk;
        const GlobalTensor<T> aNeg = ws_.Get(KDA6_A_NEG), acc = ws_.Get(KDA6_ACC), M = ws_.Get(KDA6_M);
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
            MatMul(mm, M[j * S * C + j * S], C, ws_.AinvCol(j), S, false, ws_.Get(KDA6_D_BETA)[j * S * C + j * S], C,
                   false, (n - j) * S, S, S);
        PipeBarrier<PIPE_ALL>();       // M went out through FixPipe; W and U read it back through MTE2
        const GlobalTensor<T> W = ws_.Get(KDA6_W), v = vGm_[TokenOffset(td, seq, t, 0, dv)];
        for (uint32_t I = 0; I < n; ++I) {
            for (uint32_t part = 0; part < td.stateParts; ++part)
                MatMul(mm, W[I * S * kS + part * dk], kS, M[I * S * C], C, false, ws_.Get(KDA6_K_SCALED), dk, false,
                       S, dk, (I + 1) * S);
            MatMul(mm, ws_.Get(KDA6_U)[I * S * dv], dv, M[I * S * C], C, false, v, td.heads * dv, false, S, dv,
                   (I + 1) * S);
        }
        PipeBarrier<PIPE_ALL>();       // W went out through FixPipe; D2 reads it back through MTE2
    }

    // D2: WS = W S (K = parts d_k: S_hi and S_lo in turn with 2-byte transfers).
    __aicore__ inline void PhaseD2(uint32_t buf)
    {
        const KdaChunkV6TilingData& td = *td_;
        const uint32_t C = td.chunk, dv = td.dv, kS = td.stateParts * td.dk;
        MatMul(mm, ws_.Get(KDA6_WS), dv, ws_.Get(KDA6_W), kS, false, ws_.SV(buf), dv, false, C, dv, kS);
    }

    // F1: S_delta = K_decay^T V_pseudo.
    __aicore__ inline void PhaseF1(uint32_t buf)
    {
        const KdaChunkV6TilingData& td = *td_;
        const uint32_t C = td.chunk, dk = td.dk, dv = td.dv, kS = td.stateParts * dk;
        MatMul(mm, ws_.Get(KDA6_S_DELTA), dv, ws_.Get(KDA6_K_DECAY), dk, true, ws_.SV(buf)[kS * dv], dv, false, dk,
               dv, C);
    }

    // F2: O = [Q_scaled | A_qk] [S ; V_pseudo], one accumulation over K = parts d_k + C, to the output in fp32, in the
    // simulator's tiles: the state cut along d_v, one Matmul call per mmTilingOut.singleCoreN columns.
    __aicore__ inline void PhaseF2(uint32_t seq, uint32_t t, uint32_t buf)
    {
        const KdaChunkV6TilingData& td = *td_;
        const uint32_t C = td.chunk, dv = td.dv, n = static_cast<uint32_t>(td.mmTilingOut.singleCoreN);
        KDA_PHASE_RUN("F2");
        for (uint32_t c0 = 0; c0 < dv; c0 += n) {
            KDA_CUBE_TILE("F2", KdaMatmulL1Bytes(td.mmTilingOut, sizeof(T)), td.dk, n);   // S's [d_k, n]
            MatMul(mmOut, oGm_[TokenOffset(td, seq, t, 0, dv) + c0], td.heads * dv, ws_.Get(KDA6_QA), td.qaCols, false,
                   ws_.SV(buf)[c0], dv, false, C, n, td.qaCols);
        }
    }

    const KdaChunkV6TilingData* td_ = nullptr;
    Ws<T> ws_;
    GlobalTensor<T> vGm_;
    GlobalTensor<float> oGm_;
};

template <typename T>
__aicore__ inline void Run(GM_ADDR q, GM_ADDR k, GM_ADDR v, GM_ADDR g, GM_ADDR beta, GM_ADDR h0, GM_ADDR o, GM_ADDR ht,
                           GM_ADDR user, const KdaChunkV6TilingData& td)
{
    if ASCEND_IS_AIC {
        TPipe pipe;
        KdaV6Cube<T> cube;
        cube.Init(v, o, user, td);
        REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), cube.mm, &td.mmTiling, cube.mmOut, &td.mmTilingOut);
        cube.Process();
    }
    if ASCEND_IS_AIV {
        TPipe pipe;
        KdaV6Vec<T> vec;
        vec.Init(q, k, g, beta, h0, ht, user, td, &pipe);
        vec.Process();
    }
}

}  // namespace kda_v6

extern "C" __global__ __aicore__ void kda_chunk_v6(GM_ADDR q, GM_ADDR k, GM_ADDR v, GM_ADDR g, GM_ADDR beta,
                                                   GM_ADDR h0, GM_ADDR o, GM_ADDR ht, GM_ADDR workspace,
                                                   GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    REGISTER_TILING_DEFAULT(KdaChunkV6TilingData);
    GET_TILING_DATA_WITH_STRUCT(KdaChunkV6TilingData, tilingData, tiling);
    GM_ADDR user = AscendC::GetUserWorkspace(workspace);
    if (TILING_KEY_IS(KDA_TILING_KEY_FP32)) {
        kda_v6::Run<float>(q, k, v, g, beta, h0, o, ht, user, tilingData);
    } else if (TILING_KEY_IS(KDA_TILING_KEY_BF16)) {
        kda_v6::Run<bfloat16_t>(q, k, v, g, beta, h0, o, ht, user, tilingData);
    } else if (TILING_KEY_IS(KDA_TILING_KEY_FP16)) {
        kda_v6::Run<half>(q, k, v, g, beta, h0, o, ht, user, tilingData);
    }
}
