// bf16 <-> f32 conversion (common/wire_precision.h): round to nearest even checked bit by bit,
// NaN, Inf, denormals and the largest finite values, and the span functions at odd addresses
// and lengths against the scalar conversion.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/wire_precision.h"

using namespace psrun::wire;

namespace {

float bits(std::uint32_t u) { return std::bit_cast<float>(u); }

// The reference: of the two bf16 values around `u` (truncated, and one bf16 ulp up), the nearer
// one in exact (double) arithmetic, ties to the even one. Finite inputs only.
std::uint16_t reference(std::uint32_t u) {
    const std::uint32_t lo = u & 0xFFFF0000u;
    const double x = bits(u), a = bits(lo);
    // The value one bf16 ulp further from zero; past the largest finite float it is 2^128.
    const double b = (lo & 0x7FFFFFFFu) == 0x7F7F0000u ? std::copysign(std::ldexp(1.0, 128), x) : bits(lo + 0x10000u);
    const double da = std::fabs(x - a), db = std::fabs(b - x);
    const std::uint16_t l = static_cast<std::uint16_t>(lo >> 16);
    if (da < db) return l;
    if (db < da) return static_cast<std::uint16_t>(l + 1);
    return (l & 1u) ? static_cast<std::uint16_t>(l + 1) : l;
}

}  // namespace

TEST_CASE("to_bf16 rounds to nearest, ties to even", "[wire_precision]") {
    CHECK(to_bf16(1.0f) == 0x3F80);
    CHECK(to_bf16(bits(0x3F807FFFu)) == 0x3F80);  // just below half an ulp
    CHECK(to_bf16(bits(0x3F808000u)) == 0x3F80);  // tie, 0x3F80 is even
    CHECK(to_bf16(bits(0x3F808001u)) == 0x3F81);  // just above half
    CHECK(to_bf16(bits(0x3F818000u)) == 0x3F82);  // tie, 0x3F81 is odd: up to even
    CHECK(to_bf16(bits(0xBF808000u)) == 0xBF80);  // ties are symmetric in sign
    CHECK(to_bf16(bits(0xBF818000u)) == 0xBF82);
    CHECK(to_bf16(bits(0x3FFF8000u)) == 0x4000);  // a tie that carries into the exponent
    CHECK(to_bf16(0.0f) == 0x0000);
    CHECK(to_bf16(-0.0f) == 0x8000);
}

TEST_CASE("to_bf16 keeps Inf, keeps NaN quiet, and overflows to Inf only past the largest finite bf16",
          "[wire_precision]") {
    const float inf = std::numeric_limits<float>::infinity();
    CHECK(to_bf16(inf) == 0x7F80);
    CHECK(to_bf16(-inf) == 0xFF80);
    CHECK(to_bf16(std::numeric_limits<float>::quiet_NaN()) == 0x7FC0);
    // NaNs whose rounding would carry into the sign or turn them into Inf stay NaN, quiet, signed.
    for (std::uint32_t u : {0x7F800001u, 0x7FBFFFFFu, 0x7FFFFFFFu, 0x7F80FFFFu, 0xFF800001u, 0xFFFFFFFFu}) {
        INFO(std::hex << u);
        const std::uint16_t b = to_bf16(bits(u));
        CHECK(std::isnan(to_f32(b)));
        CHECK((b & 0x0040u) != 0);  // quiet
        CHECK((b >> 15) == (u >> 31));
    }
    CHECK(to_bf16(bits(0x7F7F0000u)) == 0x7F7F);  // largest finite bf16 (3.3895e38): exact
    CHECK(to_bf16(bits(0x7F7F7FFFu)) == 0x7F7F);  // below half an ulp above it
    CHECK(to_bf16(bits(0x7F7F8000u)) == 0x7F80);  // the tie rounds to even: Inf
    CHECK(to_bf16(std::numeric_limits<float>::max()) == 0x7F80);
    CHECK(to_bf16(-std::numeric_limits<float>::max()) == 0xFF80);
    CHECK(to_f32(0x7F7F) == bits(0x7F7F0000u));
    CHECK(std::isinf(to_f32(0x7F80)));
}

TEST_CASE("denormals convert like normals, without flush to zero", "[wire_precision]") {
    CHECK(to_bf16(bits(0x00010000u)) == 0x0001);  // smallest bf16 denormal, exact
    CHECK(to_bf16(bits(0x00000001u)) == 0x0000);  // smallest float denormal rounds to zero
    CHECK(to_bf16(bits(0x80000001u)) == 0x8000);  // ... to -0 when negative
    CHECK(to_bf16(bits(0x00008000u)) == 0x0000);  // tie to even (zero)
    CHECK(to_bf16(bits(0x00018000u)) == 0x0002);  // tie to even (up)
    CHECK(to_bf16(bits(0x007FFFFFu)) == 0x0080);  // largest float denormal rounds up to the smallest normal
    CHECK(to_f32(0x0001) == bits(0x00010000u));
    CHECK(to_f32(0x0001) > 0.0f);
}

TEST_CASE("every bf16 survives f32 and back; random floats match the exact reference", "[wire_precision]") {
    for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
        const float f = to_f32(static_cast<std::uint16_t>(b));
        if (std::isnan(f)) continue;
        REQUIRE(to_bf16(f) == b);
    }
    std::mt19937 rng(7);
    std::size_t checked = 0;
    for (int i = 0; i < 2000000; ++i) {
        const std::uint32_t u = rng();
        if (!std::isfinite(bits(u))) continue;
        ++checked;
        if (to_bf16(bits(u)) != reference(u)) FAIL("0x" << std::hex << u);
    }
    CHECK(checked > 1900000);
}

TEST_CASE("the span functions equal the scalar conversion at odd addresses and lengths", "[wire_precision]") {
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    for (std::size_t n :
         {std::size_t{0}, std::size_t{1}, std::size_t{17}, std::size_t{1023}, std::size_t{1024}, std::size_t{5001}}) {
        INFO(n);
        std::vector<float> src(n);
        for (auto& x : src) x = normal(rng);
        if (n > 3) src[3] = std::numeric_limits<float>::quiet_NaN();
        std::vector<std::uint16_t> aligned(n);
        f32_to_bf16(src, aligned);
        std::vector<unsigned char> bytes(2 * n + 3);
        f32_to_bf16_bytes(src, bytes.data() + 1);  // odd address
        std::vector<float> back(n);
        bf16_bytes_to_f32(bytes.data() + 1, back);
        for (std::size_t i = 0; i < n; ++i) {
            std::uint16_t b;
            std::memcpy(&b, bytes.data() + 1 + 2 * i, 2);
            REQUIRE(b == to_bf16(src[i]));
            REQUIRE(aligned[i] == b);
            REQUIRE(std::bit_cast<std::uint32_t>(back[i]) == static_cast<std::uint32_t>(b) << 16);
        }
        CHECK(bytes[0] == 0);  // nothing written outside
        CHECK(bytes[2 * n + 1] == 0);
    }
}
