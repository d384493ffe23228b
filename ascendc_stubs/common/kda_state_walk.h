// The state walk of the fused KDA kernels' Vector side (kda_chunk_v5's state pass, kda_chunk_v6): Phase E,
// Phase G, the initial state, and the state's two copies (fp32 for the Vector; the transfer type for the Cube).
// A kernel's Vector class derives from StateWalk<the class, T, its names> and makes it a friend; the names are
// its workspace tensors U, WS, S_DELTA, S_FP32 and its Phase G's name in the simulator's template (PHASE_G).
// The class holds td_, sub_, ws_, io_, calc_[5], gamma_, h0Gm_ and htGm_.
#pragma once
#include "kernel_operator.h"
#include "kda_kernel_io.h"
#include "kda_sync.h"
#include "kda_tiles.h"

namespace kda {
using namespace AscendC;

template <typename Vec, typename T, typename Names>
class StateWalk {
protected:
    static constexpr bool kFloatTransfers = sizeof(T) == sizeof(float);

    // Phase E: V_pseudo = U - WS, this AIV's rows, below the state in this chunk's SV copy.
    __aicore__ inline void PhaseE(uint32_t buf)
    {
        Vec& v = Self();
        const auto& td = *v.td_;
        const uint32_t ch = td.chunk / 2, r0 = v.sub_ * ch, dv = td.dv, kS = td.stateParts * td.dk;
        v.io_.Load(v.calc_[0], v.ws_.Get(Names::U)[r0 * dv], ch, dv, dv);
        v.io_.Load(v.calc_[1], v.ws_.Get(Names::WS)[r0 * dv], ch, dv, dv);
        Sub(v.calc_[0], v.calc_[0], v.calc_[1], ch * dv);
        v.io_.Store(v.ws_.SV(buf)[(kS + r0) * dv], v.calc_[0], ch, dv, dv);
    }
    // Phase G: S_new = Diag(gamma_C) S_prev + S_delta in fp32, S_prev from SV copy `buf`, in the simulator's tiles:
    // td.gTiles slices of d_v, [d_k, w] each, split between the AIVs by rows (this AIV's key channels, whose gamma_C
    // it keeps); to the other copy (WriteState) or, after the last chunk, to ht. A piece [d_k / 2, w] may take two
    // neighbouring work tiles (calc_[0..1] and calc_[2..3]; the tiling checks it), and moves through the queues in
    // pieces of whole rows.
    __aicore__ inline void PhaseG(uint32_t seq, uint32_t buf, bool lastChunk)
    {
        Vec& v = Self();
        const auto& td = *v.td_;
        const uint32_t dv = td.dv, dh = td.dk / 2, k0 = v.sub_ * dh, w = dv / td.gTiles, n = dh * w;
        LocalTensor<float> s = v.calc_[0], delta = v.calc_[2];
        PipeFence<HardEvent::V_S>();                   // gamma_C (written by the Vector) is read as scalars
        if (v.sub_ == 0) KDA_PHASE_RUN(Names::PHASE_G);
        for (uint32_t c0 = 0; c0 < dv; c0 += w) {
            // both AIVs; S and S_delta in fp32, and with 2-byte transfers S_hi in T (WriteState)
            if (v.sub_ == 0)
                KDA_TILE(Names::PHASE_G, 2ull * n * sizeof(float) + (kFloatTransfers ? 0ull : n * sizeof(T)), td.dk, w);
            const uint64_t at = uint64_t(k0) * dv + c0;
            v.io_.Load(s, StateFp32(buf)[at], dh, w, dv);
            v.io_.Load(delta, v.ws_.Get(Names::S_DELTA)[at], dh, w, dv);
            for (uint32_t j = 0; j < dh; ++j) Muls(s[j * w], s[j * w], v.gamma_.GetValue(buf * dh + j), w);
            Add(s, s, delta, n);
            if (lastChunk) v.io_.Store(v.htGm_[uint64_t(seq) * td.dk * dv + at], s, dh, w, dv);
            else WriteState(buf ^ 1u, k0, dh, c0, w, s);
        }
    }
    // The initial state (h0, or zeros) into SV copy `buf`, this AIV's rows, in tiles of td.stateTileRows rows.
    __aicore__ inline void InitState(uint32_t seq, uint32_t buf)
    {
        Vec& v = Self();
        const auto& td = *v.td_;
        const uint32_t dv = td.dv, dh = td.dk / 2, k0 = v.sub_ * dh;
        for (uint32_t r = 0; r < dh; r += td.stateTileRows) {
            const uint32_t n = dh - r < td.stateTileRows ? dh - r : td.stateTileRows, row = k0 + r;
            if (td.hasInitialState)
                v.io_.Load(v.calc_[0], v.h0Gm_[uint64_t(seq) * td.dk * dv + uint64_t(row) * dv], n, dv, dv);
            else Duplicate(v.calc_[0], 0.0f, n * dv);
            WriteState(buf, row, n, 0, dv, v.calc_[0]);
        }
    }
    // The fp32 state between chunks: S of SV copy `buf` itself with fp32 transfers, else the Vector's own S_fp32
    // (one copy: G reads and rewrites its own rows in place).
    __aicore__ inline GlobalTensor<float> StateFp32(uint32_t buf)
    {
        Vec& v = Self();
        return kFloatTransfers ? v.ws_.template SV<float>(buf) : v.ws_.template Get<float>(Names::S_FP32);
    }
    // Rows row..row+n, columns col..col+w of the state s ([n, w] fp32, in calc_[0..1]): the fp32 copy, and the
    // Cube's S in SV copy `buf` (2-byte transfers: S_hi over S_lo = T(s - S_hi); S_hi in calc_[4], S_lo in calc_[2..3]).
    __aicore__ inline void WriteState(uint32_t buf, uint32_t row, uint32_t n, uint32_t col, uint32_t w,
                                      const LocalTensor<float>& s)
    {
        Vec& v = Self();
        const uint32_t dv = v.td_->dv;
        const uint64_t at = uint64_t(row) * dv + col;
        v.io_.Store(StateFp32(buf)[at], s, n, w, dv);
        if constexpr (!kFloatTransfers) {
            const GlobalTensor<T> cubeState = v.ws_.SV(buf);
            v.io_.Store(cubeState[at], s, n, w, dv);
            const LocalTensor<T> hi = v.calc_[4].template ReinterpretCast<T>();
            Cast(hi, s, RoundMode::CAST_RINT, n * w);
            Cast(v.calc_[2], hi, RoundMode::CAST_NONE, n * w);
            Sub(v.calc_[2], s, v.calc_[2], n * w);
            v.io_.Store(cubeState[uint64_t(v.td_->dk) * dv + at], v.calc_[2], n, w, dv);
        }
    }

private:
    __aicore__ inline Vec& Self() { return *static_cast<Vec*>(this); }
};

}  // namespace kda
