// AES-128-GMAC (NIST SP 800-38D: GCM with no plaintext, everything as associated data) of one
// contiguous byte range, the primitive under common/message_auth.h. Two implementations of the
// same function: Intel's ipsec-mb library where the build found it (AVX-512/AVX2 GHASH, ~28 GB/s
// on one Zen 5 core) and OpenSSL's libcrypto (~9.7 GB/s there), which is also the reference the
// tests hold the first to.
//
// Thread safety: a GmacKey is immutable after construction; tag() may run on many threads at once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace psrun {

using GmacTag = std::array<std::uint8_t, 16>;
using GmacNonce = std::array<std::uint8_t, 12>;

class GmacKey {
  public:
    enum class Backend { kFastest, kOpenSsl };
    explicit GmacKey(const std::array<std::uint8_t, 16>& key, Backend backend = Backend::kFastest);
    ~GmacKey();
    GmacKey(GmacKey&&) noexcept;
    GmacKey& operator=(GmacKey&&) noexcept;

    // The tag of `size` bytes at `data` under this key and `nonce` (never reuse a nonce with a key).
    // Throws std::runtime_error if libcrypto fails (it does not for valid input).
    GmacTag tag(const GmacNonce& nonce, const void* data, std::size_t size) const;
    // "ipsec-mb <arch>" or "openssl", for logs and benchmarks.
    const char* backend_name() const;

  private:
    struct Accelerated;  // ipsec-mb's expanded key (64-byte aligned)
    std::array<std::uint8_t, 16> key_{};
    std::unique_ptr<Accelerated> fast_;  // null: OpenSSL
};

// Whether this build has the ipsec-mb implementation.
bool gmac_accelerated();

}  // namespace psrun
