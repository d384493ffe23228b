// Host runner for the emulated kda_chunk_v5 (the shared runner, ascendc_stubs/common/kda_emu_runner.h, with v5's
// tiling, workspace regions and kernel entry). On an NPU the aclnn / kernel-launch app plays this role.
//
//   kda_chunk_v5_emu --data DIR --out DIR [--timeout-ms N] [--aic N] [--tiles intra.A=N,state.A=N,state.G=N,state.F2=N]   (--slots is ignored)
// Exit status: 0 ok, 2 bad input, 3 a check failed (race, rule, bounds...), 4 hang.
#include "op_kernel/kda_chunk_v5.cpp"   // one translation unit, as CPU-debug builds of a kernel do
#include "kda_emu_subchunks.h"

struct KdaChunkV5Emu {
    static constexpr const char* kName = "kda_chunk_v5";
    using Tiling = KdaChunkV5TilingData;
    // --tiles PASS.PHASE=N[,...]: the simulator's tile counts (bridge.tiles_option) of intra.A, state.A, state.G,
    // state.F2.
    struct Extra { uint32_t stateATiles = 2, intraATiles = 1, gTiles = 0, f2Tiles = 1; };
    static bool Option(Extra& e, const std::string& flag, const std::string& value)
    {
        return flag == "--tiles" && kda_emu::ParseTiles(value, [&e](const std::string& key, uint32_t n) {
            if (key == "state.A") e.stateATiles = n;
            else if (key == "intra.A") e.intraATiles = n;
            else if (key == "state.G") e.gTiles = n;
            else if (key == "state.F2") e.f2Tiles = n;
            else return false;
            return true;
        });
    }
    static const char* MakeTiling(const KdaShape& shape, const Extra& e, uint32_t aic, uint32_t ub, Tiling& td)
    {
        return KdaChunkV5Tiling(shape, aic, ub, td, e.stateATiles, e.intraATiles, e.gTiles, e.f2Tiles);
    }
    // Per core: one region per workspace tensor, named as the simulator names the hand-offs; the Cube's and the
    // Vector's own tensors are Private. The inverse's block columns: Ai_diag[j] (the Vector's, ③) over A_inv's
    // blocks below it (the Cube's), parts of one matrix. SV: S over V_pseudo, parts of one matrix, in two copies
    // (slot0, slot1), as K_decay.
    // Per item: M by rows (its lower block triangle: row r of block I covers columns 0..16 (I+1)) and QA by rows
    // (Q_scaled of the state pass's ①, then A_qk), parts of one matrix. M and A_qk are pass outputs: written by
    // the core that computed the item, read by the core of its sequence (race-checked, no flag's payload).
    static void RegisterWorkspace(const Tiling& td, uint8_t* user)
    {
        using kda_emu::RegionKind;
        static const char* names[KDA5_WS_COUNT] = {
            "K_left", "Q_left", "K_right", "K_left4", "Q_left4", "K_right4", "A_kk_off", "A_qk_off", "A_kk_off4",
            "A_qk_off4", "A_neg", "D_beta", "Ai", "acc", "K_scaled", "K_decay", "W", "U", "WS", "SV", "S_delta",
            "S_fp32"};
        const size_t tb = td.transferBytes, S = td.sub, C = td.chunk, n = td.subChunks;
        for (uint32_t core = 0; core < td.blockDim; ++core) {
            uint8_t* base = user + core * td.wsCoreBytes;
            for (uint32_t i = 0; i < KDA5_WS_COUNT; ++i) {
                uint8_t* p = base + td.wsOffset[i];
                const size_t bytes = KdaV5WsElems(td, i) * KdaV5WsElemBytes(td, i);
                if (bytes == 0) continue;
                if (i == KDA5_AINV) {
                    kda_emu::RegisterInverse(core, p, n, S, tb);
                } else if (i == KDA5_SV) {
                    kda_emu::RegisterStateOverV(core, p, size_t(td.stateParts) * td.dk * td.dv * tb, C * td.dv * tb,
                                                td.svBytes);
                } else if (i == KDA5_K_DECAY) {
                    for (uint32_t buf = 0; buf < 2; ++buf)
                        kda_emu::RegisterWsTensor(core, buf, "K_decay", p + buf * bytes / 2, bytes / 2,
                                                  RegionKind::Workspace);
                } else {
                    const bool own = i == KDA5_ACC || i == KDA5_W || i == KDA5_S_FP32;
                    kda_emu::RegisterWsTensor(core, -1, names[i], p, bytes, own ? RegionKind::Private : RegionKind::Workspace);
                }
            }
        }
        for (uint32_t item = 0; item < td.items; ++item) {
            uint8_t* m = user + td.itemBase + item * td.itemBytes;
            uint8_t* qa = m + td.qaOffset;
            const uint32_t seqCore = (item / td.numChunks) % td.blockDim;
            const std::string it = "item" + std::to_string(item) + "/";
            for (size_t r = 0; r < C; ++r) {
                const size_t I = r / S, qBytes = size_t(td.stateParts) * td.dk * tb, row = size_t(td.qaCols) * tb;
                ascendc_emu::RegisterRegion(it + "M/" + std::to_string(r), "M", m + r * C * tb, (I + 1) * S * tb,
                                            RegionKind::Private);
                ascendc_emu::RegisterRegion(it + "Q_scaled/" + std::to_string(r), "Q_scaled", qa + r * row, qBytes,
                                            RegionKind::Workspace, static_cast<int>(seqCore), it + "QA");
                ascendc_emu::RegisterRegion(it + "A_qk/" + std::to_string(r), "A_qk", qa + r * row + qBytes, C * tb,
                                            RegionKind::Private, -1, it + "QA");
            }
        }
    }
    static uint64_t UserBytes(const Tiling& td) { return KdaV5UserWorkspaceBytes(td); }
    // Per pass, sync number -> flag id; "0" is the state pass's own state hand-off.
    static std::string FlagsJson()
    {
        std::string json = "\"matmul_objects\": " + std::to_string(kda_v5::MATMUL_OBJECTS_V5) + ", \"pass_flags\": {";
        json += "\"intra\": {\"1\": " + std::to_string(kda_v5::INTRA_FLAG[1]) + ", \"2\": " +
                std::to_string(kda_v5::INTRA_FLAG[2]) + ", \"3\": " + std::to_string(kda_v5::INTRA_FLAG[3]) + "}";
        json += ", \"state\": {";
        for (int n = 0; n <= 4; ++n)
            json += (n > 0 ? ", \"" : "\"") + std::to_string(n) + "\": " + std::to_string(kda_v5::STATE_FLAG[n]);
        return json + "}}, \"drop_barrier\": " + std::to_string(KDA_DROP_BARRIER);
    }
    static void Launch(const kda_emu::Args& a)
    {
        kda_chunk_v5(a.q, a.k, a.v, a.g, a.beta, a.h0, a.o, a.ht, a.workspace, a.tiling);
    }
    // The state's parts and type, and the bytes of one copy of each hand-off, by the simulator's names.
    static std::string ReportJson(const Tiling& td)
    {
        std::string json = ", \"state_parts\": " + std::to_string(td.stateParts) + ", \"state_dtype\": \"fp32\"" +
                           ", \"items\": " + std::to_string(td.items) + ", \"tensor_bytes\": {";
        auto add = [&json](const std::string& name, uint64_t bytes) {
            json += (json.back() == '{' ? "\"" : ", \"") + name + "\": " + std::to_string(bytes);
        };
        kda_emu::AddIntraTensorBytes(td, KdaV5WsElems, add);
        kda_emu::AddStateTensorBytes(td, add);
        return json + "}" + kda_tiles::Json();
    }
};

int main(int argc, char** argv) { return kda_emu::KdaEmuMain<KdaChunkV5Emu>(argc, argv); }
