// Tile use of the phases a kernel tiles as the simulator plans (bridge.tiles_option -> --tiles).
#pragma once
#include <cstdint>

// Tile use, recorded by the host emulation only (report.json "tiles"): per phase ("state.A"), tiles run, phase
// runs (one per chunk, counted by AIV 0 or the AIC), the tile shape (the simulator's tile_shape without its leading
// sequence axis) and the UB bytes one tile's buffers take on one AIV (a Vector phase) or the L1 bytes of the
// Matmul tiling that runs it (a Cube phase), the largest seen.
//   KDA_TILE(key, ubBytes, dims...)        one Vector tile of shape dims... ran
//   KDA_CUBE_TILE(key, l1Bytes, dims...)   one Cube tile (a Matmul call) of shape dims... ran
//   KDA_PHASE_RUN(key)                      one run of the phase (a chunk)
#if !defined(__CCE_AICORE__)
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <vector>
namespace kda_tiles {
struct Use { uint64_t tiles = 0, runs = 0; std::vector<uint32_t> shape; uint64_t bytes = 0; bool l1 = false; };
inline std::mutex& Mu() { static std::mutex m; return m; }
inline std::map<std::string, Use>& Log() { static std::map<std::string, Use> l; return l; }
inline void Tile(const char* key, uint64_t bytes, std::initializer_list<uint32_t> shape, bool l1 = false)
{
    std::lock_guard<std::mutex> g(Mu());
    Use& u = Log()[key];
    ++u.tiles;
    u.shape.assign(shape.begin(), shape.end());
    u.l1 = l1;
    if (bytes > u.bytes) u.bytes = bytes;
}
inline void Run(const char* key) { std::lock_guard<std::mutex> g(Mu()); ++Log()[key].runs; }
inline std::string Json()
{
    std::lock_guard<std::mutex> g(Mu());
    std::string json = ", \"tiles\": {";
    for (const auto& [k, u] : Log()) {
        std::string shape;
        for (uint32_t d : u.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
        json += (json.back() == '{' ? "\"" : ", \"") + k + "\": {\"tiles\": " + std::to_string(u.tiles) +
                ", \"runs\": " + std::to_string(u.runs) + ", \"shape\": [" + shape + "], \"" +
                (u.l1 ? "l1_bytes" : "ub_bytes") + "\": " + std::to_string(u.bytes) + "}";
    }
    return json + "}";
}
}  // namespace kda_tiles
#define KDA_TILE(key, ubBytes, ...) kda_tiles::Tile(key, ubBytes, {__VA_ARGS__})
#define KDA_CUBE_TILE(key, l1Bytes, ...) kda_tiles::Tile(key, l1Bytes, {__VA_ARGS__}, true)
#define KDA_PHASE_RUN(key) kda_tiles::Run(key)
#else
#define KDA_TILE(key, ubBytes, ...)
#define KDA_CUBE_TILE(key, l1Bytes, ...)
#define KDA_PHASE_RUN(key)
#endif
