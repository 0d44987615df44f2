// bf16 <-> f32 conversion for the reduced-precision exchange (--wire-precision bf16,
// wire::kFlagBf16, docs/wire-precision.md). bf16 is the upper 16 bits of an IEEE binary32:
// same sign and 8-bit exponent, 7 stored mantissa bits.
//
// Contracts (all functions are pure, thread-safe and allocate nothing):
// - to_bf16 rounds to nearest, ties to even. Finite values round; values at or above
//   0x1.ff8p127 (half a bf16 ulp above the largest finite bf16) round to Inf as IEEE requires.
//   Inf stays Inf with its sign. NaN stays NaN and comes out quiet (the quiet bit 0x0040 is set),
//   keeping its sign and upper payload bits. Denormals are converted exactly like normals (no
//   flush to zero): a float denormal rounds to a bf16 denormal or zero.
// - to_f32 is exact (every bf16 is a float): it appends 16 zero bits.
// - The byte-level functions read or write little-endian 16-bit values through memcpy, so a
//   frame at any address (ZeroMQ gives no alignment guarantee) is fine. Source and destination
//   must not overlap. Sizes are in values (floats or bf16 values), not bytes, unless named bytes.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

namespace psrun::wire {

inline constexpr std::size_t kBf16Bytes = 2;  // bytes per bf16 value on the wire

constexpr std::uint16_t to_bf16(float value) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(value);
    const std::uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    return static_cast<std::uint16_t>(nan ? ((u >> 16) | 0x0040u) : rounded);
}

constexpr float to_f32(std::uint16_t value) { return std::bit_cast<float>(static_cast<std::uint32_t>(value) << 16); }

// dst[i] = to_bf16(src[i]). REQUIRES: dst.size() == src.size().
void f32_to_bf16(std::span<const float> src, std::span<std::uint16_t> dst);
// Writes src.size() bf16 values (2 * src.size() bytes) at `dst`, any alignment.
void f32_to_bf16_bytes(std::span<const float> src, void* dst);
// Reads dst.size() bf16 values (2 * dst.size() bytes) from `src`, any alignment.
void bf16_bytes_to_f32(const void* src, std::span<float> dst);

}  // namespace psrun::wire
