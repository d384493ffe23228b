// Host runner for the emulated kda_chunk_v6 (the shared runner, ascendc_stubs/common/kda_emu_runner.h, with v6's
// tiling, workspace regions and kernel entry). On an NPU the aclnn / kernel-launch app plays this role.
//
//   kda_chunk_v6_emu --data DIR --out DIR [--timeout-ms N] [--aic N] [--tiles A=N,G=N,F2=N]   (--slots is ignored)
// Exit status: 0 ok, 2 bad input, 3 a check failed (race, rule, bounds...), 4 hang.
#include "op_kernel/kda_chunk_v6.cpp"   // one translation unit, as CPU-debug builds of a kernel do
#include "kda_emu_subchunks.h"

struct KdaChunkV6Emu {
    static constexpr const char* kName = "kda_chunk_v6";
    using Tiling = KdaChunkV6TilingData;
    // --tiles PHASE=N[,...]: the simulator's tile counts (bridge.tiles_option) of A, G, F2.
    struct Extra { uint32_t aTiles = 1, gTiles = 0, f2Tiles = 1; };
    static bool Option(Extra& e, const std::string& flag, const std::string& value)
    {
        return flag == "--tiles" && kda_emu::ParseTiles(value, [&e](const std::string& key, uint32_t n) {
            if (key == "A") e.aTiles = n;
            else if (key == "G") e.gTiles = n;
            else if (key == "F2") e.f2Tiles = n;
            else return false;
            return true;
        });
    }
    static const char* MakeTiling(const KdaShape& shape, const Extra& e, uint32_t aic, uint32_t ub, Tiling& td)
    {
        return KdaChunkV6Tiling(shape, aic, ub, td, e.aTiles, e.gTiles, e.f2Tiles);
    }
    // Per core: one region per workspace tensor, named as the simulator names the hand-offs; the Cube's and the
    // Vector's own tensors are Private. The inverse's block columns: Ai_diag[j] (the Vector's, ③) over A_inv's
    // blocks below it (the Cube's), parts of one matrix. M by rows (its lower block triangle: row r of block I
    // covers columns 0..16 (I+1)). QA by rows: Q_scaled then A_qk, parts of one matrix. SV: S over V_pseudo, parts
    // of one matrix, in two copies (slot0, slot1).
    static void RegisterWorkspace(const Tiling& td, uint8_t* user)
    {
        using kda_emu::RegionKind;
        static const char* names[KDA6_WS_COUNT] = {
            "K_left", "Q_left", "K_right", "K_left4", "Q_left4", "K_right4", "A_kk_off", "A_qk_off", "A_kk_off4",
            "A_qk_off4", "A_neg", "D_beta", "Ai", "acc", "M", "K_scaled", "K_decay", "QA", "W", "U", "WS", "SV",
            "S_delta", "S_fp32"};
        const size_t tb = td.transferBytes, S = td.sub, C = td.chunk, n = td.subChunks;
        for (uint32_t core = 0; core < td.blockDim; ++core) {
            uint8_t* base = user + core * td.wsCoreBytes;
            const std::string at = "core" + std::to_string(core) + "/";
            for (uint32_t i = 0; i < KDA6_WS_COUNT; ++i) {
                uint8_t* p = base + td.wsOffset[i];
                const size_t bytes = KdaV6WsElems(td, i) * KdaV6WsElemBytes(td, i);
                if (bytes == 0) continue;
                if (i == KDA6_AINV) {
                    kda_emu::RegisterInverse(core, p, n, S, tb);
                } else if (i == KDA6_M) {
                    for (size_t r = 0; r < C; ++r)
                        ascendc_emu::RegisterRegion(at + "M/" + std::to_string(r), "M", p + r * C * tb,
                                                    (r / S + 1) * S * tb, RegionKind::Private, static_cast<int>(core));
                } else if (i == KDA6_QA) {
                    const size_t qBytes = size_t(td.stateParts) * td.dk * tb, row = size_t(td.qaCols) * tb;
                    for (size_t r = 0; r < C; ++r) {
                        ascendc_emu::RegisterRegion(at + "Q_scaled/" + std::to_string(r), "Q_scaled", p + r * row,
                                                    qBytes, RegionKind::Workspace, static_cast<int>(core), at + "QA");
                        ascendc_emu::RegisterRegion(at + "A_qk/" + std::to_string(r), "A_qk", p + r * row + qBytes,
                                                    C * tb, RegionKind::Workspace, static_cast<int>(core), at + "QA");
                    }
                } else if (i == KDA6_SV) {
                    kda_emu::RegisterStateOverV(core, p, size_t(td.stateParts) * td.dk * td.dv * tb, C * td.dv * tb,
                                                td.svBytes);
                } else {
                    const bool own = i == KDA6_ACC || i == KDA6_W || i == KDA6_S_FP32;
                    kda_emu::RegisterWsTensor(core, -1, names[i], p, bytes, own ? RegionKind::Private : RegionKind::Workspace);
                }
            }
        }
    }
    static uint64_t UserBytes(const Tiling& td) { return KdaV6UserWorkspaceBytes(td); }
    // Sync number -> flag id; "0" is the state's own hand-off.
    static std::string FlagsJson()
    {
        std::string json = "\"matmul_objects\": " + std::to_string(kda_v6::MATMUL_OBJECTS_V6) + ", \"sync_flags\": {";
        for (int n = 0; n <= 6; ++n)
            json += (n > 0 ? ", \"" : "\"") + std::to_string(n) + "\": " + std::to_string(kda_v6::FLAG[n]);
        return json + "}";
    }
    static void Launch(const kda_emu::Args& a)
    {
        kda_chunk_v6(a.q, a.k, a.v, a.g, a.beta, a.h0, a.o, a.ht, a.workspace, a.tiling);
    }
    // The state's parts and type, and the bytes of one copy of each hand-off, by the simulator's names.
    static std::string ReportJson(const Tiling& td)
    {
        std::string json = ", \"state_parts\": " + std::to_string(td.stateParts) + ", \"state_dtype\": \"fp32\"" +
                           ", \"tensor_bytes\": {";
        auto add = [&json](const std::string& name, uint64_t bytes) {
            json += (json.back() == '{' ? "\"" : ", \"") + name + "\": " + std::to_string(bytes);
        };
        kda_emu::AddIntraTensorBytes(td, KdaV6WsElems, add);
        add("A_qk", uint64_t(td.chunk) * td.chunk * td.transferBytes);
        kda_emu::AddStateTensorBytes(td, add);
        return json + "}" + kda_tiles::Json();
    }
};

int main(int argc, char** argv) { return kda_emu::KdaEmuMain<KdaChunkV6Emu>(argc, argv); }
