// Little-endian fixed-width encoding helpers for wire frames and files (leveldb style).
// Put* append to a std::string; Get* read from a cursor and fail (return false) instead of
// reading past the end. The host is assumed little-endian (checked at compile time).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace psrun {

static_assert(std::endian::native == std::endian::little, "psrun's wire format assumes a little-endian host");

inline void put_fixed8(std::string& out, std::uint8_t v) { out.push_back(static_cast<char>(v)); }
inline void put_fixed16(std::string& out, std::uint16_t v) { out.append(reinterpret_cast<const char*>(&v), 2); }
inline void put_fixed32(std::string& out, std::uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
inline void put_fixed64(std::string& out, std::uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
inline void put_float(std::string& out, float v) { put_fixed32(out, std::bit_cast<std::uint32_t>(v)); }
// A string prefixed by its 16-bit length; longer strings are truncated to 65535 bytes.
inline void put_string16(std::string& out, std::string_view s) {
    const auto n = static_cast<std::uint16_t>(s.size() > 0xFFFF ? 0xFFFF : s.size());
    put_fixed16(out, n);
    out.append(s.data(), n);
}

// Reads fixed-width fields from a byte range. Every getter returns false once the range is
// exhausted, leaving the output untouched; the reader is then "failed" for good.
class Decoder {
  public:
    explicit Decoder(std::string_view bytes) : data_(bytes) {}

    bool get8(std::uint8_t& v) { return get(&v, 1); }
    bool get16(std::uint16_t& v) { return get(&v, 2); }
    bool get32(std::uint32_t& v) { return get(&v, 4); }
    bool get64(std::uint64_t& v) { return get(&v, 8); }
    bool get_float(float& v) {
        std::uint32_t bits = 0;
        if (!get32(bits)) return false;
        v = std::bit_cast<float>(bits);
        return true;
    }
    bool get_string16(std::string& s) {
        std::uint16_t n = 0;
        if (!get16(n) || remaining() < n) return fail();
        s.assign(data_.data() + pos_, n);
        pos_ += n;
        return true;
    }
    std::size_t remaining() const { return ok_ ? data_.size() - pos_ : 0; }
    bool ok() const { return ok_; }

  private:
    bool get(void* dst, std::size_t n) {
        if (!ok_ || data_.size() - pos_ < n) return fail();
        std::memcpy(dst, data_.data() + pos_, n);
        pos_ += n;
        return true;
    }
    bool fail() {
        ok_ = false;
        return false;
    }
    std::string_view data_;
    std::size_t pos_ = 0;
    bool ok_ = true;
};

}  // namespace psrun
