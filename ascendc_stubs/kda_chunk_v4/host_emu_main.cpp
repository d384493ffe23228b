// Host runner for the emulated kda_chunk_v4 (the shared runner, ascendc_stubs/common/kda_emu_runner.h, with
// v4's tiling, workspace regions and kernel entry). On an NPU the aclnn / kernel-launch app plays this role.
//
//   kda_chunk_v4_emu --data DIR --out DIR [--slots 1|2] [--timeout-ms N] [--aic N] [--state-parts 1|2] [--tiles A=N,G=N]
// --state-parts (bf16 only): 2 (default) hands the Cube the fp32 state as S_hi + S_lo; 1 as bf16(S) only.
// --tiles A=N,G=N: the simulator's tile counts (bridge.tiles_option): N key-channel tiles of Phase A's diagonal
// blocks per chunk; N tiles of the state along d_v in Phase G.
// Exit status: 0 ok, 2 bad input, 3 a check failed (race, rule, bounds...), 4 hang.
#include "op_kernel/kda_chunk_v4.cpp"   // one translation unit, as CPU-debug builds of a kernel do
#include "kda_emu_runner.h"

struct KdaChunkV4Emu {
    static constexpr const char* kName = "kda_chunk_v4";
    using Tiling = KdaChunkV4TilingData;
    struct Extra {
        uint32_t stateParts = 0;   // 0: the tiling's default
        uint32_t diagTiles = 1;    // every key channel at once
        uint32_t gTiles = 0;       // the fewest that fit a work tile
    };
    static bool Option(Extra& e, const std::string& flag, const std::string& value)
    {
        if (flag == "--tiles")
            return kda_emu::ParseTiles(value, [&e](const std::string& key, uint32_t n) {
                if (key == "A") e.diagTiles = n;
                else if (key == "G") e.gTiles = n;
                else return false;
                return true;
            });
        if (flag != "--state-parts") return false;
        if (value != "1" && value != "2") kda_emu::BadInput(kName, "--state-parts must be 1 or 2");
        e.stateParts = value == "1" ? 1 : 2;
        return true;
    }
    static const char* MakeTiling(const KdaShape& shape, const Extra& e, uint32_t aic, uint32_t ub, Tiling& td)
    {
        return KdaChunkV4Tiling(shape, aic, ub, e.stateParts, td, e.diagTiles, e.gTiles);
    }
    // One region per workspace tensor, slot and core, named as the simulator names the hand-offs. A_qk is two
    // tensors in one matrix: per row, the diagonal block's 16 columns (A_qk_diag, from the Vector on ③) and
    // the columns left of it (A_qk_off, the Cube's own), parts of one matrix "A_qk" (Phase F reads a row
    // across both); the columns right of it are never touched, so they are no region at all (an access there
    // is reported as out of bounds).
    static void RegisterWorkspace(const Tiling& td, uint8_t* user)
    {
        using kda_emu::RegionKind;
        for (uint32_t core = 0; core < td.blockDim; ++core) {
            uint8_t* base = user + core * td.wsCoreBytes;
            for (uint32_t i = 0; i < KDA4_WS_COUNT; ++i) {
                const size_t bytes = KdaV4WsElems(td, i) * KdaV4WsElemBytes(td, i);
                if (bytes == 0) continue;
                const RegionKind kind = KdaV4WsIsPrivate(i) ? RegionKind::Private : RegionKind::Workspace;
                const bool resident = i < KDA4_WS_FIRST_SLOT_TENSOR;
                for (uint32_t s = 0; s < (resident ? 1 : td.slots); ++s) {
                    uint8_t* p = base + td.wsOffset[i] + s * td.wsSlotBytes;
                    const int slot = resident ? -1 : static_cast<int>(s);
                    if (i == KDA4_WS_A_QK) RegisterAqk(core, slot, p, td);
                    else kda_emu::RegisterWsTensor(core, slot, KdaV4WsName(i), p, bytes, kind);
                }
            }
        }
    }
    static void RegisterAqk(uint32_t core, int slot, uint8_t* p, const Tiling& td)
    {
        const size_t S = td.sub, tb = td.transferBytes, rowBytes = size_t(td.chunk) * tb;
        for (size_t r = 0; r < td.chunk; ++r) {
            const size_t I = r / S;
            if (I > 0)
                kda_emu::RegisterWsTensor(core, slot, "A_qk_off", p + r * rowBytes, I * S * tb,
                                          kda_emu::RegionKind::Private, "A_qk");
            kda_emu::RegisterWsTensor(core, slot, "A_qk_diag", p + r * rowBytes + I * S * tb, S * tb,
                                      kda_emu::RegionKind::Workspace, "A_qk");
        }
    }
    static uint64_t UserBytes(const Tiling& td) { return td.wsCoreBytes * td.blockDim; }
    static std::string FlagsJson() { return kda_emu::SixSyncFlagsJson(); }
    static void Launch(const kda_emu::Args& a)
    {
        kda_chunk_v4(a.q, a.k, a.v, a.g, a.beta, a.h0, a.o, a.ht, a.workspace, a.tiling);
    }
    // The state's parts and type, and the bytes of one copy of each workspace tensor, by the simulator's names
    // (A_qk as its two tensors).
    static std::string ReportJson(const Tiling& td)
    {
        std::string json = ", \"state_parts\": " + std::to_string(td.stateParts) + ", \"state_dtype\": \"fp32\"" +
                           ", \"tensor_bytes\": {";
        auto add = [&json](const std::string& name, uint64_t bytes) {
            json += (json.back() == '{' ? "\"" : ", \"") + name + "\": " + std::to_string(bytes);
        };
        const uint64_t block = uint64_t(td.sub) * td.sub * td.transferBytes;
        for (uint32_t i = 0; i < KDA4_WS_COUNT; ++i) {
            if (i != KDA4_WS_A_QK) add(KdaV4WsName(i), KdaV4WsElems(td, i) * KdaV4WsElemBytes(td, i));
        }
        add("A_qk_diag", td.subChunks * block);
        add("A_qk_off", td.pairs * block);
        return json + "}" + kda_tiles::Json();
    }
};

int main(int argc, char** argv) { return kda_emu::KdaEmuMain<KdaChunkV4Emu>(argc, argv); }
