// FNV-1a, 64 bits: the project's one stable hash of names and small records (dropout streams,
// initial-value streams, the image-folder split, the tensor list's fingerprint, run ids). The same
// value on every build, compiler and host, so that what it keys is reproducible; not a defence
// against chosen inputs (never key a hash table of untrusted ids with it).
#pragma once

#include <cstdint>
#include <string_view>

namespace psrun {

class Fnv1a {
  public:
    // psd's shard-state fingerprints and the run ids derived from psd endpoints were first written
    // with this offset basis (FNV's with its last digit lost); they keep it, so that files and
    // locks written by earlier builds still match. Everything else starts from FNV's own.
    static constexpr std::uint64_t kLegacyOffset = 1469598103934665603ull;

    constexpr Fnv1a() = default;
    constexpr explicit Fnv1a(std::uint64_t offset) : h_(offset) {}

    // One byte, then the string's bytes, then a 64-bit value as 8 bytes, least significant first.
    constexpr Fnv1a& add_byte(unsigned char c) {
        h_ = (h_ ^ c) * kPrime;
        return *this;
    }
    constexpr Fnv1a& add(std::string_view s) {
        for (const char c : s) add_byte(static_cast<unsigned char>(c));
        return *this;
    }
    constexpr Fnv1a& add_u64(std::uint64_t v) {
        for (int i = 0; i < 8; ++i) add_byte(static_cast<unsigned char>(v >> (8 * i)));
        return *this;
    }
    constexpr std::uint64_t value() const { return h_; }

  private:
    static constexpr std::uint64_t kOffset = 0xcbf29ce484222325ull;
    static constexpr std::uint64_t kPrime = 0x100000001b3ull;
    std::uint64_t h_ = kOffset;
};

// The hash of one string.
constexpr std::uint64_t fnv1a_64(std::string_view s) { return Fnv1a().add(s).value(); }

// The published test vectors (draft-eastlake-fnv): the empty string and "a".
static_assert(fnv1a_64("") == 0xcbf29ce484222325ull && fnv1a_64("a") == 0xaf63dc4c8601ec8cull);

}  // namespace psrun
