#include "workerd/data/categorical_hash.h"

#include <charconv>

#include <xxhash.h>

namespace psrun::worker {
namespace {

std::string_view strip_spaces(std::string_view value) {
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    return value;
}

// The canonical decimal text of `value` written into `buffer` when `value` (trimmed) is a decimal
// integer within int64; empty otherwise (the value is hashed as written).
std::string_view canonical_integer(std::string_view value, char (&buffer)[24]) {
    std::string_view digits = value;
    if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) digits.remove_prefix(1);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) return {};
    const std::string_view number = value.front() == '+' ? value.substr(1) : value;
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
    if (ec != std::errc() || end != number.data() + number.size()) return {};  // beyond int64
    const auto [out, ec2] = std::to_chars(buffer, buffer + sizeof buffer, v);
    return std::string_view(buffer, static_cast<std::size_t>(out - buffer));
}

}  // namespace

std::string canonical_value(std::string_view value) {
    value = strip_spaces(value);
    char buffer[24];
    const std::string_view integer = canonical_integer(value, buffer);
    return std::string(integer.empty() ? value : integer);
}

std::uint64_t column_seed(std::string_view key) { return XXH3_64bits(key.data(), key.size()); }

std::uint64_t seeded_hash(std::uint64_t seed, std::string_view value) {
    value = strip_spaces(value);
    char buffer[24];
    const std::string_view integer = canonical_integer(value, buffer);
    const std::string_view text = integer.empty() ? value : integer;
    return XXH3_64bits_withSeed(text.data(), text.size(), seed);
}

std::uint64_t categorical_hash(std::string_view key, std::string_view value) {
    return seeded_hash(column_seed(key), value);
}

std::int32_t hash_bucket(std::uint64_t hash, std::int64_t rows) {
    return static_cast<std::int32_t>(hash % static_cast<std::uint64_t>(rows));
}

}  // namespace psrun::worker
