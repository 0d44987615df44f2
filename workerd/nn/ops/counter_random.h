// Counter-based random bits for the kernels that draw per element (dropout's masks, the random
// kind's noise): element i of a draw reads bits(base, i), so a value depends only on the draw's
// base (the step's seed and the layer's name), never on threads or the formats oneDNN picks,
// and the loops stay element-wise (they vectorize).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/wire_precision.h"

namespace psrun::nn {

// SplitMix64's finaliser of base + (counter + 1) * the golden ratio.
inline std::uint64_t counter_bits(std::uint64_t base, std::uint64_t counter) {
    std::uint64_t r = base + (counter + 1) * 0x9E3779B97F4A7C15ull;
    r = (r ^ (r >> 30)) * 0xBF58476D1CE4E5B9ull;
    r = (r ^ (r >> 27)) * 0x94D049BB133111EBull;
    return r ^ (r >> 31);
}

// Element i of an f32 or bf16 array, as f32, for the loops over either type.
inline float load_element(const float* p, std::size_t i) { return p[i]; }
inline float load_element(const std::uint16_t* p, std::size_t i) { return wire::to_f32(p[i]); }
inline void store_element(float* p, std::size_t i, float v) { p[i] = v; }
inline void store_element(std::uint16_t* p, std::size_t i, float v) { p[i] = wire::to_bf16(v); }

}  // namespace psrun::nn
