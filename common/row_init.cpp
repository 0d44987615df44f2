#include "common/row_init.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>

namespace psrun {
namespace {

std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// The random bits of one row: the hashes of seed and row are computed once per row (fill_row()
// draws width values from them), the column and draw mixed in per value.
struct RowBits {
    std::uint64_t row_key;
    RowBits(std::uint64_t seed, std::uint64_t row) : row_key(splitmix64(splitmix64(seed) ^ row)) {}
    // A uniform double in (0, 1) from the draw-th 64 random bits of element (row, col).
    double uniform(std::uint32_t col, std::uint32_t draw) const {
        const std::uint64_t bits = splitmix64(row_key ^ ((static_cast<std::uint64_t>(draw) << 32) | col));
        return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
    }
    double standard_normal(std::uint32_t col, std::uint32_t draw) const {
        const double u1 = uniform(col, 2 * draw), u2 = uniform(col, 2 * draw + 1);
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
};

float value(const RowInit& init, const RowBits& bits, std::uint32_t col) {
    switch (init.kind) {
        case RowInitKind::kZeros: return 0.0f;
        case RowInitKind::kUniform: return static_cast<float>((2.0 * bits.uniform(col, 0) - 1.0) * init.scale);
        case RowInitKind::kNormal: return static_cast<float>(bits.standard_normal(col, 0) * init.scale);
        case RowInitKind::kTruncatedNormal:
            for (std::uint32_t draw = 0;; ++draw) {  // P(|z| > 2) = 4.6%: a few draws at most in practice
                const double z = bits.standard_normal(col, draw);
                if (std::fabs(z) <= 2.0) return static_cast<float>(z * init.scale);
            }
    }
    return 0.0f;
}

}  // namespace

float row_init_value(const RowInit& init, std::uint64_t row, std::uint32_t col) {
    return value(init, RowBits(init.seed, row), col);
}

void fill_row(const RowInit& init, std::uint64_t row, std::span<float> out) {
    if (init.kind == RowInitKind::kZeros) {
        std::fill(out.begin(), out.end(), 0.0f);
        return;
    }
    const RowBits bits(init.seed, row);
    for (std::size_t c = 0; c < out.size(); ++c) out[c] = value(init, bits, static_cast<std::uint32_t>(c));
}

namespace {
constexpr std::array<const char*, 4> kRowInitNames = {"zeros", "uniform", "normal", "truncated_normal"};
}  // namespace

nlohmann::json row_init_to_json(const RowInit& init) {
    return {{"kind", kRowInitNames[static_cast<int>(init.kind) & 3]}, {"scale", init.scale}, {"seed", init.seed}};
}

std::optional<RowInit> row_init_from_json(const nlohmann::json& j) {
    if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string() || !j.contains("scale") ||
        !j["scale"].is_number() || !j.contains("seed") || !j["seed"].is_number_unsigned())
        return std::nullopt;
    const auto kind = std::find(kRowInitNames.begin(), kRowInitNames.end(), j["kind"].get<std::string>());
    if (kind == kRowInitNames.end()) return std::nullopt;
    RowInit init;
    init.kind = static_cast<RowInitKind>(kind - kRowInitNames.begin());
    init.scale = j["scale"].get<float>();
    init.seed = j["seed"].get<std::uint64_t>();
    return init;
}

}  // namespace psrun
