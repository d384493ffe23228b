// Host runner for the emulated kda_chunk_v3 (the shared runner, ascendc_stubs/common/kda_emu_runner.h, with
// v3's tiling, workspace regions and kernel entry). On an NPU the aclnn / kernel-launch app plays this role.
//
//   kda_chunk_v3_emu --data DIR --out DIR [--slots 1|2] [--timeout-ms N] [--aic N] [--tiles A=N,G=N]
// Exit status: 0 ok, 2 bad input, 3 a check failed (race, rule, bounds...), 4 hang.
#include "op_kernel/kda_chunk_v3.cpp"   // one translation unit, as CPU-debug builds of a kernel do
#include "kda_emu_runner.h"

struct KdaChunkV3Emu {
    static constexpr const char* kName = "kda_chunk_v3";
    using Tiling = KdaChunkV3TilingData;
    // --tiles A=N,G=N: the simulator's tile counts of Phases A and G (bridge.tiles_option).
    struct Extra { uint32_t phaseATiles = 2, gTiles = 0; };
    static bool Option(Extra& e, const std::string& flag, const std::string& value)
    {
        return flag == "--tiles" && kda_emu::ParseTiles(value, [&e](const std::string& key, uint32_t n) {
            if (key == "A") e.phaseATiles = n;
            else if (key == "G") e.gTiles = n;
            else return false;
            return true;
        });
    }
    static const char* MakeTiling(const KdaShape& shape, const Extra& e, uint32_t aic, uint32_t ub, Tiling& td)
    {
        return KdaChunkV3Tiling(shape, aic, ub, td, e.phaseATiles, e.gTiles);
    }
    // One region per workspace tensor, slot and core, named as the simulator names the hand-offs; W is the
    // Cube's own scratch.
    static void RegisterWorkspace(const Tiling& td, uint8_t* user)
    {
        for (uint32_t core = 0; core < td.blockDim; ++core) {
            uint8_t* base = user + core * td.wsCoreBytes;
            for (uint32_t i = 0; i < KDA_WS_COUNT; ++i) {
                const size_t bytes = size_t(KdaWsRows(td, i)) * KdaWsCols(td, i) * td.transferBytes;
                const auto kind = i == KDA_WS_W ? kda_emu::RegionKind::Private : kda_emu::RegionKind::Workspace;
                if (i < KDA_WS_FIRST_SLOT_TENSOR) {
                    kda_emu::RegisterWsTensor(core, -1, KdaWsName(i), base + td.wsOffset[i], bytes, kind);
                    continue;
                }
                for (uint32_t s = 0; s < td.slots; ++s)
                    kda_emu::RegisterWsTensor(core, static_cast<int>(s), KdaWsName(i),
                                              base + td.wsOffset[i] + s * td.wsSlotBytes, bytes, kind);
            }
        }
    }
    static uint64_t UserBytes(const Tiling& td) { return td.wsCoreBytes * td.blockDim; }
    static std::string FlagsJson() { return kda_emu::SixSyncFlagsJson(); }
    static void Launch(const kda_emu::Args& a)
    {
        kda_chunk_v3(a.q, a.k, a.v, a.g, a.beta, a.h0, a.o, a.ht, a.workspace, a.tiling);
    }
    // Bytes of one copy of each workspace tensor, by the simulator's names.
    static std::string ReportJson(const Tiling& td)
    {
        std::string json = ", \"tensor_bytes\": {";
        for (uint32_t i = 0; i < KDA_WS_COUNT; ++i)
            json += (i ? ", \"" : "\"") + std::string(KdaWsName(i)) + "\": " +
                    std::to_string(uint64_t(KdaWsRows(td, i)) * KdaWsCols(td, i) * td.transferBytes);
        return json + "}" + kda_tiles::Json();
    }
};

int main(int argc, char** argv) { return kda_emu::KdaEmuMain<KdaChunkV3Emu>(argc, argv); }
