// The host runner both KDA chunk kernels share: reads the inputs scripts/gen_data.py writes, computes the
// tiling with the same function the CANN TilingFunc uses, launches the kernel on emulated AI cores and writes
// o.bin, ht.bin and report.json (errors, every cross-core flag event, UB use). On an NPU the aclnn /
// kernel-launch app plays this role (README: "On real hardware"). A kernel's host_emu_main.cpp includes its
// op_kernel source and this header, and supplies a traits struct (see KdaEmuMain).
//
//   NAME_emu --data DIR --out DIR [--slots 1|2] [--timeout-ms N] [--aic N] [kernel options]
// Exit status: 0 ok, 2 bad input, 3 a check failed (race, rule, bounds...), 4 hang.
#pragma once
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

#include "kda_sync.h"
#include "kda_tiling_common.h"

namespace kda_emu {

using ascendc_emu::RegionKind;

struct Options {
    std::string data, out;
    uint32_t slots = 2, aic = 24;       // 24 AI cores on Ascend 910B2
    int timeoutMs = 2000;
    // Capacities per AIV (UB) and per AIC (L1, L0A/B/C), in bytes: the emulation's A2 defaults (LaunchConfig),
    // or a profile's [core] figures (bridge.run(..., profile=...)). The tiling plans UB with ubBytes.
    ascendc_emu::LaunchConfig caps;
};

// The kernel's arguments, as GM buffers of the emulated device.
struct Args {
    uint8_t *q, *k, *v, *g, *beta, *h0, *o, *ht, *workspace, *tiling;
    uint8_t* user;                      // this launch's user workspace (after the system workspace)
};

[[noreturn]] inline void BadInput(const std::string& name, const std::string& msg)
{
    std::fprintf(stderr, "%s: %s\n", name.c_str(), msg.c_str());
    std::exit(2);
}

// --tiles KEY=N[,KEY=N...] (bridge.tiles_option): calls set(key, n) per item; false if an item is malformed or
// set refuses its key.
template <typename Set>
inline bool ParseTiles(const std::string& value, Set set)
{
    size_t pos = 0;
    while (true) {
        const size_t end = value.find(',', pos);
        const std::string item = value.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        const size_t eq = item.find('=');
        if (eq == std::string::npos) return false;
        if (!set(item.substr(0, eq), static_cast<uint32_t>(std::strtoul(item.c_str() + eq + 1, nullptr, 10))))
            return false;
        if (end == std::string::npos) return true;
        pos = end + 1;
    }
}

// One copy of a workspace tensor of one AI core, as a named region: "core0/slot1/M" (slot < 0: resident).
// `matrix`: the workspace matrix it is part of, where one matrix holds two tensors (an access may run on from
// one part into the next).
inline void RegisterWsTensor(uint32_t core, int slot, const char* tensor, const uint8_t* p, size_t bytes,
                             RegionKind kind, const char* matrix = nullptr)
{
    const std::string prefix = "core" + std::to_string(core) + "/" + (slot >= 0 ? "slot" + std::to_string(slot) + "/" : "");
    ascendc_emu::RegisterRegion(prefix + tensor, tensor, p, bytes, kind, static_cast<int>(core),
                                matrix ? prefix + matrix : std::string());
}

// The flags of kernels that use the six syncs of common/kda_sync.h (v3, v4).
inline std::string SixSyncFlagsJson()
{
    std::string json = "\"matmul_objects\": " + std::to_string(kda::MATMUL_OBJECTS) + ", \"sync_flags\": {";
    for (int n = 1; n <= kda::NUM_SYNCS; ++n)
        json += (n > 1 ? ", \"" : "\"") + std::to_string(n) + "\": " + std::to_string(kda::FLAG_OF_SYNC[n]);
    return json + "}";
}

namespace detail {

inline std::map<std::string, std::string> ReadMeta(const std::string& name, const std::string& path)
{
    std::ifstream f(path);
    if (!f) BadInput(name, "cannot read " + path);
    std::map<std::string, std::string> meta;
    std::string key, value;
    while (f >> key >> value) meta[key] = value;
    return meta;
}

inline uint32_t MetaU32(const std::string& name, const std::map<std::string, std::string>& meta, const char* key)
{
    auto it = meta.find(key);
    if (it == meta.end()) BadInput(name, std::string("meta.txt has no ") + key);
    char* end = nullptr;
    const unsigned long v = std::strtoul(it->second.c_str(), &end, 10);
    if (*end != '\0' || v > 0xffffffffUL)
        BadInput(name, std::string("meta.txt: ") + key + " is not a count: " + it->second);
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

inline uint8_t* LoadFile(const std::string& name, Gm& gm, const std::string& path, size_t bytes)
{
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) BadInput(name, "cannot read " + path);
    const size_t size = static_cast<size_t>(f.tellg());
    if (size != bytes) BadInput(name, path + ": " + std::to_string(size) + " bytes, expected " + std::to_string(bytes));
    uint8_t* p = gm.Alloc(bytes);
    f.seekg(0);
    f.read(reinterpret_cast<char*>(p), static_cast<std::streamsize>(bytes));
    return p;
}

inline bool SaveFile(const std::string& path, const uint8_t* p, size_t bytes)
{
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(bytes));
    return static_cast<bool>(f);
}

}  // namespace detail

// Kernel: a traits struct with
//   static constexpr const char* kName;                 // "kda_chunk_v3"
//   using Tiling = ...;                                   // the kernel's tiling struct
//   struct Extra { ... };                                 // the kernel's own options, defaults
//   static bool Option(Extra&, const std::string& flag, const std::string& value);   // false: unknown flag
//   static const char* MakeTiling(const KdaShape&, const Extra&, uint32_t aic, uint32_t ubBytes, Tiling&);
//                                                         // nullptr or why not
//   static void RegisterWorkspace(const Tiling&, uint8_t* user);   // every workspace tensor, via RegisterWsTensor
//   static void Launch(const Args&);                      // calls the kernel entry
//   static std::string ReportJson(const Tiling&);        // extra report members, "" or ", \"key\": value..."
//   static uint64_t UserBytes(const Tiling&);             // the user workspace the kernel needs
//   static std::string FlagsJson();                       // "\"matmul_objects\": N, \"sync_flags\": {...}"
template <typename Kernel>
int KdaEmuMain(int argc, char** argv)
{
    using namespace detail;
    const std::string name = std::string(Kernel::kName) + "_emu";
    Options opt;
    typename Kernel::Extra extra{};
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) BadInput(name, a + " needs a value");
            return argv[++i];
        };
        if (a == "--data") opt.data = next();
        else if (a == "--out") opt.out = next();
        else if (a == "--slots") opt.slots = static_cast<uint32_t>(std::atoi(next().c_str()));
        else if (a == "--timeout-ms") opt.timeoutMs = std::atoi(next().c_str());
        else if (a == "--aic") opt.aic = static_cast<uint32_t>(std::atoi(next().c_str()));
        else if (a == "--ub-bytes") opt.caps.ubBytes = std::strtoull(next().c_str(), nullptr, 10);
        else if (a == "--l1-bytes") opt.caps.l1Bytes = std::strtoull(next().c_str(), nullptr, 10);
        else if (a == "--l0a-bytes") opt.caps.l0aBytes = std::strtoull(next().c_str(), nullptr, 10);
        else if (a == "--l0b-bytes") opt.caps.l0bBytes = std::strtoull(next().c_str(), nullptr, 10);
        else if (a == "--l0c-bytes") opt.caps.l0cBytes = std::strtoull(next().c_str(), nullptr, 10);
        else if (a.rfind("--", 0) != 0 || !Kernel::Option(extra, a, next())) BadInput(name, "unknown argument " + a);
    }
    if (opt.data.empty() || opt.out.empty())
        BadInput(name, "usage: " + name + " --data DIR --out DIR [--slots 1|2] [--timeout-ms N] [--aic N]");
    if (opt.timeoutMs <= 0) BadInput(name, "--timeout-ms must be positive");
    if (opt.slots != 1 && opt.slots != 2) BadInput(name, "--slots must be 1 or 2");
    if (opt.aic == 0) BadInput(name, "--aic must be positive");
    if (opt.caps.ubBytes == 0 || opt.caps.l1Bytes == 0 || opt.caps.l0aBytes == 0 || opt.caps.l0bBytes == 0 ||
        opt.caps.l0cBytes == 0)
        BadInput(name, "--ub-bytes, --l1-bytes, --l0a-bytes, --l0b-bytes and --l0c-bytes must be positive");
    std::error_code ec;
    std::filesystem::create_directories(opt.out, ec);
    if (ec) BadInput(name, "cannot create " + opt.out + ": " + ec.message());

    const auto meta = ReadMeta(name, opt.data + "/meta.txt");
    KdaShape shape{};
    shape.batch = MetaU32(name, meta, "B");
    shape.seqLen = MetaU32(name, meta, "T");
    shape.heads = MetaU32(name, meta, "H");
    shape.dk = MetaU32(name, meta, "K");
    shape.dv = MetaU32(name, meta, "V");
    shape.chunk = MetaU32(name, meta, "C");
    const std::string dtype = meta.count("dtype") ? meta.at("dtype") : "";
    if (dtype != "fp32" && dtype != "bf16" && dtype != "fp16")
        BadInput(name, "meta.txt: dtype must be fp32, bf16 or fp16, got '" + dtype + "'");
    shape.transferBytes = dtype == "fp32" ? 4 : 2;
    shape.fp16 = dtype == "fp16";
    shape.hasInitialState = MetaU32(name, meta, "h0") != 0;
    const std::string gate = meta.count("gate") ? meta.at("gate") : "";
    if (gate != "log" && gate != "alpha") BadInput(name, "meta.txt: gate must be log or alpha, got '" + gate + "'");
    shape.gateIsLog = gate == "log";
    shape.scale = meta.count("scale") ? std::strtof(meta.at("scale").c_str(), nullptr) : 0.0f;
    shape.slots = opt.slots;

    typename Kernel::Tiling td{};
    if (const char* why = Kernel::MakeTiling(shape, extra, opt.aic, static_cast<uint32_t>(opt.caps.ubBytes), td))
        BadInput(name, why);

    Gm gm;
    const size_t tb = shape.transferBytes, B = td.batch, T = td.seqLen, H = td.heads, K = td.dk, V = td.dv;
    Args args{};
    args.q = LoadFile(name, gm, opt.data + "/q.bin", B * T * H * K * tb);
    args.k = LoadFile(name, gm, opt.data + "/k.bin", B * T * H * K * tb);
    args.v = LoadFile(name, gm, opt.data + "/v.bin", B * T * H * V * tb);
    args.g = LoadFile(name, gm, opt.data + "/g.bin", B * T * H * K * 4);
    args.beta = LoadFile(name, gm, opt.data + "/beta.bin", B * T * H * 4);
    args.h0 = td.hasInitialState ? LoadFile(name, gm, opt.data + "/h0.bin", B * H * K * V * 4) : nullptr;
    args.o = gm.Alloc(B * T * H * V * 4);
    args.ht = gm.Alloc(B * H * K * V * 4);
    const size_t sysBytes = 64 * 1024;   // stands in for GetLibApiWorkSpaceSize()
    args.workspace = gm.Alloc(sysBytes + Kernel::UserBytes(td));
    args.user = args.workspace + sysBytes;
    args.tiling = gm.Alloc(sizeof(td));
    std::memcpy(args.tiling, &td, sizeof(td));

    ascendc_emu::RegisterRegion("q", "q", args.q, B * T * H * K * tb, RegionKind::Input);
    ascendc_emu::RegisterRegion("k", "k", args.k, B * T * H * K * tb, RegionKind::Input);
    ascendc_emu::RegisterRegion("v", "v", args.v, B * T * H * V * tb, RegionKind::Input);
    ascendc_emu::RegisterRegion("g", "g", args.g, B * T * H * K * 4, RegionKind::Input);
    ascendc_emu::RegisterRegion("beta", "beta", args.beta, B * T * H * 4, RegionKind::Input);
    if (args.h0) ascendc_emu::RegisterRegion("h0", "h0", args.h0, B * H * K * V * 4, RegionKind::Input);
    ascendc_emu::RegisterRegion("o", "o", args.o, B * T * H * V * 4, RegionKind::Output);
    ascendc_emu::RegisterRegion("ht", "ht", args.ht, B * H * K * V * 4, RegionKind::Output);
    ascendc_emu::RegisterRegion("tiling", "tiling", args.tiling, sizeof(td), RegionKind::Tiling);
    ascendc_emu::RegisterRegion("sys_workspace", "sys_workspace", args.workspace, sysBytes, RegionKind::Private);
    Kernel::RegisterWorkspace(td, args.user);   // named as the simulator names the hand-offs

    ascendc_emu::LaunchConfig cfg = opt.caps;
    cfg.blockDim = static_cast<int>(td.blockDim);
    cfg.tilingKey = shape.transferBytes == 4 ? KDA_TILING_KEY_FP32 : shape.fp16 ? KDA_TILING_KEY_FP16 : KDA_TILING_KEY_BF16;
    cfg.timeoutMs = opt.timeoutMs;
    cfg.workspace = args.workspace;
    cfg.sysWorkspaceBytes = sysBytes;
    const int status = ascendc_emu::Launch(cfg, [&] { Kernel::Launch(args); });

    std::ostringstream report;
    report << "\"kernel\": \"" << Kernel::kName << "\", \"dtype\": \"" << dtype << "\", \"slots\": " << td.slots
           << ", \"chunks\": " << td.numChunks << ", \"sequences\": " << td.sequences
           << ", \"workspace_bytes_per_core\": " << td.wsCoreBytes << ", \"ub_plan_bytes\": " << td.ubBytes
           << ", \"capacities\": {\"ub\": " << cfg.ubBytes << ", \"l1\": " << cfg.l1Bytes << ", \"l0a\": "
           << cfg.l0aBytes << ", \"l0b\": " << cfg.l0bBytes << ", \"l0c\": " << cfg.l0cBytes << "}"
           << ", \"drop_wait\": " << KDA_DROP_WAIT << ", \"drop_set\": " << KDA_DROP_SET
           << ", " << Kernel::FlagsJson() << Kernel::ReportJson(td);
    bool ok = ascendc_emu::WriteReport(opt.out + "/report.json", report.str());
    ok = SaveFile(opt.out + "/o.bin", args.o, B * T * H * V * 4) && ok;
    ok = SaveFile(opt.out + "/ht.bin", args.ht, B * H * K * V * 4) && ok;
    if (!ok) {
        std::fprintf(stderr, "%s: cannot write to %s\n", name.c_str(), opt.out.c_str());
        return 2;
    }
    if (status != ascendc_emu::kOk) std::fprintf(stderr, "%s", ascendc_emu::Summary().c_str());
    return status;
}

}  // namespace kda_emu
