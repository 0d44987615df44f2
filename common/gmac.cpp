#include "common/gmac.h"

#include <openssl/evp.h>

#include <algorithm>
#include <stdexcept>

#ifdef PSRUN_HAVE_IPSEC_MB
#include <intel-ipsec-mb.h>
#endif

namespace psrun {
namespace {

GmacTag openssl_gmac(const std::array<std::uint8_t, 16>& key, const GmacNonce& nonce, const void* data,
                     std::size_t size) {
    struct Ctx {
        EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
        ~Ctx() { EVP_CIPHER_CTX_free(ctx); }
    };
    thread_local Ctx cipher;
    EVP_CIPHER_CTX* ctx = cipher.ctx;
    int out = 0;
    bool ok = ctx != nullptr && EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, key.data(), nonce.data()) == 1;
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t left = size; ok && left > 0;) {
        const int n = static_cast<int>(std::min<std::size_t>(left, 1u << 30));
        ok = EVP_EncryptUpdate(ctx, nullptr, &out, p, n) == 1;
        p += n;
        left -= static_cast<std::size_t>(n);
    }
    GmacTag tag{};
    ok = ok && EVP_EncryptFinal_ex(ctx, nullptr, &out) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(tag.size()), tag.data()) == 1;
    if (!ok) throw std::runtime_error("libcrypto failed to compute an AES-GCM tag");
    return tag;
}

#ifdef PSRUN_HAVE_IPSEC_MB
// One manager for the process: its function table picks the best code for this CPU. The GMAC
// functions it points to keep their state in the caller's contexts, so concurrent calls are safe.
struct Manager {
    IMB_MGR* mgr = alloc_mb_mgr(0);
    IMB_ARCH arch = IMB_ARCH_NONE;
    Manager() {
        if (mgr != nullptr) init_mb_mgr_auto(mgr, &arch);
    }
    ~Manager() { free_mb_mgr(mgr); }
    bool usable() const { return mgr != nullptr && arch >= IMB_ARCH_SSE; }
};
const Manager& manager() {
    static const Manager m;
    return m;
}
#endif

}  // namespace

#ifdef PSRUN_HAVE_IPSEC_MB
struct GmacKey::Accelerated {
    alignas(64) gcm_key_data key;
};
bool gmac_accelerated() { return manager().usable(); }
#else
struct GmacKey::Accelerated {};
bool gmac_accelerated() { return false; }
#endif

GmacKey::GmacKey(const std::array<std::uint8_t, 16>& key, Backend backend) : key_(key) {
#ifdef PSRUN_HAVE_IPSEC_MB
    if (backend == Backend::kFastest && gmac_accelerated()) {
        fast_ = std::make_unique<Accelerated>();
        IMB_AES128_GCM_PRE(manager().mgr, key_.data(), &fast_->key);
    }
#else
    (void)backend;
#endif
}

GmacKey::~GmacKey() = default;
GmacKey::GmacKey(GmacKey&&) noexcept = default;
GmacKey& GmacKey::operator=(GmacKey&&) noexcept = default;

GmacTag GmacKey::tag(const GmacNonce& nonce, const void* data, std::size_t size) const {
#ifdef PSRUN_HAVE_IPSEC_MB
    if (fast_) {
        IMB_MGR* mgr = manager().mgr;
        gcm_context_data ctx;
        GmacTag tag{};
        IMB_AES128_GMAC_INIT(mgr, &fast_->key, &ctx, nonce.data(), nonce.size());
        IMB_AES128_GMAC_UPDATE(mgr, &fast_->key, &ctx, static_cast<const std::uint8_t*>(data), size);
        IMB_AES128_GMAC_FINALIZE(mgr, &fast_->key, &ctx, tag.data(), tag.size());
        return tag;
    }
#endif
    return openssl_gmac(key_, nonce, data, size);
}

const char* GmacKey::backend_name() const {
#ifdef PSRUN_HAVE_IPSEC_MB
    if (fast_) {
        switch (manager().arch) {
            case IMB_ARCH_AVX512: return "ipsec-mb avx512";
            case IMB_ARCH_AVX2: return "ipsec-mb avx2";
            case IMB_ARCH_AVX: return "ipsec-mb avx";
            default: return "ipsec-mb sse";
        }
    }
#endif
    return "openssl";
}

}  // namespace psrun
