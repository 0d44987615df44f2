#include "common/wire_precision.h"

#include <cstring>

namespace psrun::wire {
namespace {

// Blocks of this many values go through an aligned stack buffer, so that the inner loops have
// no memcpy per element and GCC vectorises them (AVX-512 with -march=native: 16 values a step).
constexpr std::size_t kBlock = 1024;

}  // namespace

void f32_to_bf16(std::span<const float> src, std::span<std::uint16_t> dst) {
    const float* s = src.data();
    std::uint16_t* d = dst.data();
    const std::size_t n = src.size() < dst.size() ? src.size() : dst.size();
    for (std::size_t i = 0; i < n; ++i) d[i] = to_bf16(s[i]);
}

void f32_to_bf16_bytes(std::span<const float> src, void* dst) {
    auto* out = static_cast<unsigned char*>(dst);
    alignas(64) std::uint16_t block[kBlock];
    for (std::size_t begin = 0; begin < src.size(); begin += kBlock) {
        const std::size_t n = src.size() - begin < kBlock ? src.size() - begin : kBlock;
        f32_to_bf16(src.subspan(begin, n), std::span<std::uint16_t>(block, n));
        std::memcpy(out + begin * kBf16Bytes, block, n * kBf16Bytes);
    }
}

void bf16_bytes_to_f32(const void* src, std::span<float> dst) {
    const auto* in = static_cast<const unsigned char*>(src);
    alignas(64) std::uint16_t block[kBlock];
    for (std::size_t begin = 0; begin < dst.size(); begin += kBlock) {
        const std::size_t n = dst.size() - begin < kBlock ? dst.size() - begin : kBlock;
        std::memcpy(block, in + begin * kBf16Bytes, n * kBf16Bytes);
        float* d = dst.data() + begin;
        for (std::size_t i = 0; i < n; ++i) d[i] = to_f32(block[i]);
    }
}

}  // namespace psrun::wire
