// Tile use of the phases a kernel tiles as the simulator plans (bridge.tiles_option -> --tiles).
#pragma once
#include <cstdint>

// Tile use, recorded by the host emulation only (report.json "tiles"): per phase ("state.A"), tiles run, phase
// runs (one per chunk, counted by AIV 0), the tile shape and the UB bytes one tile's buffers take.
#if !defined(__CCE_AICORE__)
#include <map>
#include <mutex>
#include <string>
namespace kda_tiles {
struct Use { uint64_t tiles = 0, runs = 0; uint32_t rows = 0, cols = 0; uint64_t ubBytes = 0; };
inline std::mutex& Mu() { static std::mutex m; return m; }
inline std::map<std::string, Use>& Log() { static std::map<std::string, Use> l; return l; }
inline void Tile(const char* key, uint32_t rows, uint32_t cols, uint64_t ubBytes)
{
    std::lock_guard<std::mutex> g(Mu());
    Use& u = Log()[key];
    ++u.tiles; u.rows = rows; u.cols = cols;
    if (ubBytes > u.ubBytes) u.ubBytes = ubBytes;
}
inline void Run(const char* key) { std::lock_guard<std::mutex> g(Mu()); ++Log()[key].runs; }
inline std::string Json()
{
    std::lock_guard<std::mutex> g(Mu());
    std::string json = ", \"tiles\": {";
    for (const auto& [k, u] : Log())
        json += (json.back() == '{' ? "\"" : ", \"") + k + "\": {\"tiles\": " + std::to_string(u.tiles) +
                ", \"runs\": " + std::to_string(u.runs) + ", \"shape\": [" + std::to_string(u.rows) + ", " +
                std::to_string(u.cols) + "], \"ub_bytes\": " + std::to_string(u.ubBytes) + "}";
    return json + "}";
}
}  // namespace kda_tiles
#define KDA_TILE(key, rows, cols, ubBytes) kda_tiles::Tile(key, rows, cols, ubBytes)
#define KDA_PHASE_RUN(key) kda_tiles::Run(key)
#else
#define KDA_TILE(key, rows, cols, ubBytes)
#define KDA_PHASE_RUN(key)
#endif
