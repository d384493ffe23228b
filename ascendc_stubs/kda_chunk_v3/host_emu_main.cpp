// Host runner for the emulated kda_chunk_v3: reads the inputs scripts/gen_data.py writes, computes the tiling
// with the same function the CANN TilingFunc uses, launches the kernel on emulated AI cores, writes o.bin,
// ht.bin and report.json (errors, every cross-core flag event, UB use). On an NPU the aclnn / kernel-launch
// app plays this role (README: "On real hardware").
//
//   kda_chunk_v3_emu --data DIR --out DIR [--slots 1|2] [--timeout-ms N] [--aic N]
// Exit status: 0 ok, 2 bad input, 3 a check failed (race, rule, bounds...), 4 hang.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "op_kernel/kda_chunk_v3.cpp"   // one translation unit, as CPU-debug builds of a kernel do

namespace {

[[noreturn]] void BadInput(const std::string& msg)
{
    std::fprintf(stderr, "kda_chunk_v3_emu: %s\n", msg.c_str());
    std::exit(2);
}

std::map<std::string, std::string> ReadMeta(const std::string& path)
{
    std::ifstream f(path);
    if (!f) BadInput("cannot read " + path);
    std::map<std::string, std::string> meta;
    std::string key, value;
    while (f >> key >> value) meta[key] = value;
    return meta;
}

uint32_t MetaU32(const std::map<std::string, std::string>& meta, const char* key)
{
    auto it = meta.find(key);
    if (it == meta.end()) BadInput(std::string("meta.txt has no ") + key);
    char* end = nullptr;
    const unsigned long v = std::strtoul(it->second.c_str(), &end, 10);
    if (*end != '\0' || v > 0xffffffffUL) BadInput(std::string("meta.txt: ") + key + " is not a count: " + it->second);
    return static_cast<uint32_t>(v);
}

// GM buffers: 64-byte aligned host memory, kept alive for the launch.
struct Gm {
    std::vector<std::unique_ptr<uint8_t[]>> blocks;
    uint8_t* Alloc(size_t bytes)
    {
        blocks.emplace_back(new uint8_t[bytes + 64]());
        return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(blocks.back().get()) + 63) & ~uintptr_t(63));
    }
};

uint8_t* LoadFile(Gm& gm, const std::string& path, size_t bytes)
{
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) BadInput("cannot read " + path);
    const size_t size = static_cast<size_t>(f.tellg());
    if (size != bytes) BadInput(path + ": " + std::to_string(size) + " bytes, expected " + std::to_string(bytes));
    uint8_t* p = gm.Alloc(bytes);
    f.seekg(0);
    f.read(reinterpret_cast<char*>(p), static_cast<std::streamsize>(bytes));
    return p;
}

bool SaveFile(const std::string& path, const uint8_t* p, size_t bytes)
{
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(bytes));
    return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv)
{
    std::string data, out;
    uint32_t slots = 2, aic = 24;      // 24 AI cores on Ascend 910B2
    int timeoutMs = 2000;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) BadInput(a + " needs a value");
            return argv[++i];
        };
        if (a == "--data") data = next();
        else if (a == "--out") out = next();
        else if (a == "--slots") slots = static_cast<uint32_t>(std::atoi(next().c_str()));
        else if (a == "--timeout-ms") timeoutMs = std::atoi(next().c_str());
        else if (a == "--aic") aic = static_cast<uint32_t>(std::atoi(next().c_str()));
        else BadInput("unknown argument " + a);
    }
    if (data.empty() || out.empty()) BadInput("usage: kda_chunk_v3_emu --data DIR --out DIR [--slots 1|2] "
                                              "[--timeout-ms N] [--aic N]");
    if (timeoutMs <= 0) BadInput("--timeout-ms must be positive");
    if (slots != 1 && slots != 2) BadInput("--slots must be 1 or 2");
    if (aic == 0) BadInput("--aic must be positive");
    std::error_code ec;
    std::filesystem::create_directories(out, ec);
    if (ec) BadInput("cannot create " + out + ": " + ec.message());

    const auto meta = ReadMeta(data + "/meta.txt");
    KdaShape shape{};
    shape.batch = MetaU32(meta, "B");
    shape.seqLen = MetaU32(meta, "T");
    shape.heads = MetaU32(meta, "H");
    shape.dk = MetaU32(meta, "K");
    shape.dv = MetaU32(meta, "V");
    shape.chunk = MetaU32(meta, "C");
    const std::string dtype = meta.count("dtype") ? meta.at("dtype") : "";
    if (dtype != "fp32" && dtype != "bf16") BadInput("meta.txt: dtype must be fp32 or bf16, got '" + dtype + "'");
    shape.transferBytes = dtype == "fp32" ? 4 : 2;
    shape.hasInitialState = MetaU32(meta, "h0") != 0;
    const std::string gate = meta.count("gate") ? meta.at("gate") : "";
    if (gate != "log" && gate != "alpha") BadInput("meta.txt: gate must be log or alpha, got '" + gate + "'");
    shape.gateIsLog = gate == "log";
    shape.scale = meta.count("scale") ? std::strtof(meta.at("scale").c_str(), nullptr) : 0.0f;
    shape.slots = slots;

    KdaChunkV3TilingData td{};
    if (const char* why = KdaChunkV3Tiling(shape, aic, 192 * 1024, td)) BadInput(why);

    Gm gm;
    const size_t tb = shape.transferBytes, B = td.batch, T = td.seqLen, H = td.heads, K = td.dk, V = td.dv;
    uint8_t* q = LoadFile(gm, data + "/q.bin", B * T * H * K * tb);
    uint8_t* k = LoadFile(gm, data + "/k.bin", B * T * H * K * tb);
    uint8_t* v = LoadFile(gm, data + "/v.bin", B * T * H * V * tb);
    uint8_t* g = LoadFile(gm, data + "/g.bin", B * T * H * K * 4);
    uint8_t* beta = LoadFile(gm, data + "/beta.bin", B * T * H * 4);
    uint8_t* h0 = td.hasInitialState ? LoadFile(gm, data + "/h0.bin", B * H * K * V * 4) : nullptr;
    uint8_t* o = gm.Alloc(B * T * H * V * 4);
    uint8_t* ht = gm.Alloc(B * H * K * V * 4);
    const size_t sysBytes = 64 * 1024;   // stands in for GetLibApiWorkSpaceSize()
    uint8_t* workspace = gm.Alloc(sysBytes + td.wsCoreBytes * td.blockDim);
    uint8_t* tiling = gm.Alloc(sizeof(td));
    std::memcpy(tiling, &td, sizeof(td));

    using ascendc_emu::RegionKind;
    ascendc_emu::RegisterRegion("q", "q", q, B * T * H * K * tb, RegionKind::Input);
    ascendc_emu::RegisterRegion("k", "k", k, B * T * H * K * tb, RegionKind::Input);
    ascendc_emu::RegisterRegion("v", "v", v, B * T * H * V * tb, RegionKind::Input);
    ascendc_emu::RegisterRegion("g", "g", g, B * T * H * K * 4, RegionKind::Input);
    ascendc_emu::RegisterRegion("beta", "beta", beta, B * T * H * 4, RegionKind::Input);
    if (h0) ascendc_emu::RegisterRegion("h0", "h0", h0, B * H * K * V * 4, RegionKind::Input);
    ascendc_emu::RegisterRegion("o", "o", o, B * T * H * V * 4, RegionKind::Output);
    ascendc_emu::RegisterRegion("ht", "ht", ht, B * H * K * V * 4, RegionKind::Output);
    ascendc_emu::RegisterRegion("tiling", "tiling", tiling, sizeof(td), RegionKind::Tiling);
    ascendc_emu::RegisterRegion("sys_workspace", "sys_workspace", workspace, sysBytes, RegionKind::Private);
    // One region per workspace tensor, slot and core, named as the simulator names the hand-offs.
    for (uint32_t core = 0; core < td.blockDim; ++core) {
        uint8_t* base = workspace + sysBytes + core * td.wsCoreBytes;
        for (uint32_t i = 0; i < KDA_WS_COUNT; ++i) {
            const size_t bytes = size_t(KdaWsRows(td, i)) * KdaWsCols(td, i) * tb;
            const RegionKind kind = i == KDA_WS_W ? RegionKind::Private : RegionKind::Workspace;
            const uint32_t copies = i >= KDA_WS_FIRST_SLOT_TENSOR ? td.slots : 1;
            for (uint32_t s = 0; s < copies; ++s) {
                const std::string label = "core" + std::to_string(core) + "/" +
                                          (i >= KDA_WS_FIRST_SLOT_TENSOR ? "slot" + std::to_string(s) + "/" : "") +
                                          KdaWsName(i);
                ascendc_emu::RegisterRegion(label, KdaWsName(i), base + td.wsOffset[i] + s * td.wsSlotBytes, bytes,
                                            kind, static_cast<int>(core));
            }
        }
    }

    ascendc_emu::LaunchConfig cfg;
    cfg.blockDim = static_cast<int>(td.blockDim);
    cfg.tilingKey = shape.transferBytes == 4 ? KDA_TILING_KEY_FP32 : KDA_TILING_KEY_BF16;
    cfg.timeoutMs = timeoutMs;
    cfg.workspace = workspace;
    cfg.sysWorkspaceBytes = sysBytes;
    const int status = ascendc_emu::Launch(cfg, [&] { kda_chunk_v3(q, k, v, g, beta, h0, o, ht, workspace, tiling); });

    std::ostringstream extra;
    extra << "\"kernel\": \"kda_chunk_v3\", \"dtype\": \"" << dtype << "\", \"slots\": " << td.slots
          << ", \"chunks\": " << td.numChunks << ", \"sequences\": " << td.sequences
          << ", \"workspace_bytes_per_core\": " << td.wsCoreBytes << ", \"ub_plan_bytes\": " << td.ubBytes
          << ", \"drop_wait\": " << KDA_DROP_WAIT << ", \"drop_set\": " << KDA_DROP_SET
          << ", \"matmul_objects\": " << kda_v3::MATMUL_OBJECTS << ", \"sync_flags\": {";
    for (int n = 1; n <= kda_v3::NUM_SYNCS; ++n) extra << (n > 1 ? ", " : "") << "\"" << n << "\": " << kda_v3::FLAG_OF_SYNC[n];
    extra << "}";
    bool ok = ascendc_emu::WriteReport(out + "/report.json", extra.str());
    ok = SaveFile(out + "/o.bin", o, B * T * H * V * 4) && ok;
    ok = SaveFile(out + "/ht.bin", ht, B * H * K * V * 4) && ok;
    if (!ok) {
        std::fprintf(stderr, "kda_chunk_v3_emu: cannot write to %s\n", out.c_str());
        return 2;
    }
    if (status != ascendc_emu::kOk) std::fprintf(stderr, "%s", ascendc_emu::Summary().c_str());
    return status;
}
