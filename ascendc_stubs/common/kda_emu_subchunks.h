// What the host runners of the sub-chunk kernels (v5, v6) share: the workspace regions of the inverse's block
// columns and of SV, and the bytes of one copy of their common hand-offs, by the simulator's names.
#pragma once

#include "kda_emu_runner.h"

namespace kda_emu {

// The inverse by block columns, from p: column j = Ai_diag[j] [S, S] (the Vector's, ③) over A_inv's blocks below
// it [(n-1-j) S, S] (the Cube's own), parts of one matrix.
inline void RegisterInverse(uint32_t core, uint8_t* p, size_t n, size_t S, size_t tb)
{
    for (size_t j = 0; j < n; ++j) {
        const std::string col = "Ainv" + std::to_string(j);
        RegisterWsTensor(core, -1, "Ai_diag", p, S * S * tb, RegionKind::Workspace, col.c_str());
        if (j + 1 < n)
            RegisterWsTensor(core, -1, "A_inv", p + S * S * tb, (n - 1 - j) * S * S * tb, RegionKind::Private,
                             col.c_str());
        p += (n - j) * S * S * tb;
    }
}

// SV from p: S (sBytes) over V_pseudo (vBytes), parts of one matrix, in two copies svBytes apart (slot0, slot1).
inline void RegisterStateOverV(uint32_t core, uint8_t* p, size_t sBytes, size_t vBytes, size_t svBytes)
{
    for (uint32_t buf = 0; buf < 2; ++buf, p += svBytes) {   // core0/slot0/S ...
        RegisterWsTensor(core, static_cast<int>(buf), "S", p, sBytes, RegionKind::Workspace, "SV");
        RegisterWsTensor(core, static_cast<int>(buf), "V_pseudo", p + sBytes, vBytes, RegionKind::Workspace, "SV");
    }
}

// add(name, bytes) for the intra hand-offs: the first twelve workspace tensors (elems(i) elements each), then the
// inverse's diagonal blocks.
template <class Tiling, class Elems, class Add>
inline void AddIntraTensorBytes(const Tiling& td, Elems elems, Add add)
{
    static const char* plain[] = {"K_left", "Q_left", "K_right", "K_left4", "Q_left4", "K_right4", "A_kk_off",
                                  "A_qk_off", "A_kk_off4", "A_qk_off4", "A_neg", "D_beta"};
    const uint64_t tb = td.transferBytes, S = td.sub;
    for (uint32_t i = 0; i < 12; ++i) add(plain[i], elems(td, i) * tb);
    add("Ai_diag", td.subChunks * S * S * tb);
}

// add(name, bytes) for the state's hand-offs, K_scaled to S.
template <class Tiling, class Add>
inline void AddStateTensorBytes(const Tiling& td, Add add)
{
    const uint64_t tb = td.transferBytes, C = td.chunk, dk = td.dk, dv = td.dv;
    add("K_scaled", C * dk * tb);
    add("K_decay", C * dk * tb);
    add("Q_scaled", C * td.stateParts * dk * tb);
    add("U", C * dv * tb);
    add("WS", C * dv * tb);
    add("V_pseudo", C * dv * tb);
    add("S_delta", dk * dv * tb);
    add("S", td.stateParts * dk * dv * tb);
}

}  // namespace kda_emu
