// Host emulation of the AscendC 16-bit float types `half` and `bfloat16_t`.
// Storage is the raw 16 bits; arithmetic goes through float. float -> 16 bit rounds to nearest, ties to even
// (AscendC RoundMode::CAST_RINT), which is also what torch's .to(torch.bfloat16 / torch.float16) does.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ascendc_emu {

inline uint32_t FloatBits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float BitsFloat(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline uint16_t FloatToBf16Bits(float f)
{
    uint32_t u = FloatBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7fc0u);  // NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}
inline float Bf16BitsToFloat(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

inline uint16_t FloatToHalfBits(float f)
{
    const uint32_t x = FloatBits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) return static_cast<uint16_t>(sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);      // >= 65520 rounds to inf
    if (absx < 0x38800000u) {                                                    // half subnormal or zero
        const float scaled = BitsFloat(absx) * 16777216.0f;                      // exact: units of 2^-24
        return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
    }
    uint32_t h = ((((absx >> 23) - 127u + 15u)) << 10) | ((absx & 0x7fffffu) >> 13);
    const uint32_t rem = absx & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;                      // carry may bump the exponent
    return static_cast<uint16_t>(sign | h);
}
inline float HalfBitsToFloat(uint16_t h)
{
    const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        const float v = std::ldexp(static_cast<float>(mant), -24);
        return sign ? -v : v;
    }
    if (exp == 31) return BitsFloat(sign | 0x7f800000u | (mant << 13));
    return BitsFloat(sign | ((exp - 15u + 127u) << 23) | (mant << 13));
}

}  // namespace ascendc_emu

// The kernel-side type names, as CANN's compiler provides them.
struct half {
    uint16_t bits = 0;
    half() = default;
    half(float f) : bits(ascendc_emu::FloatToHalfBits(f)) {}
    operator float() const { return ascendc_emu::HalfBitsToFloat(bits); }
};
struct bfloat16_t {
    uint16_t bits = 0;
    bfloat16_t() = default;
    bfloat16_t(float f) : bits(ascendc_emu::FloatToBf16Bits(f)) {}
    operator float() const { return ascendc_emu::Bf16BitsToFloat(bits); }
};
static_assert(sizeof(half) == 2 && sizeof(bfloat16_t) == 2, "16-bit types must be 2 bytes");
