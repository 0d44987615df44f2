#include "bench/gemm/gemm_backends.h"

#include <libxsmm.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

namespace psrun::bench {

std::uint16_t to_bf16(float x) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
    return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

namespace {

class OnednnBackend final : public GemmBackend {
  public:
    std::string name() const override { return "onednn"; }
    bool prepare(const Gemm& g, std::string& why) override {
        try {
            create(g);
        } catch (const dnnl::error& e) {  // e.g. no bf16 matmul below AVX512 in oneDNN 2.6
            why = std::string("oneDNN: ") + e.what();
            return false;
        }
        return true;
    }
    void run() override {
        primitive_.execute(stream_, args_);
        stream_.wait();
    }

  private:
    void create(const Gemm& g) {
        using tag = dnnl::memory::format_tag;
        using dt = dnnl::memory::data_type;
        const dnnl::memory::desc a({g.m, g.k}, dt::bf16, g.a_trans ? tag::ba : tag::ab);
        const dnnl::memory::desc b({g.k, g.n}, dt::bf16, g.b_trans ? tag::ba : tag::ab);
        const dnnl::memory::desc c({g.m, g.n}, dt::f32, tag::ab);
        const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine_);
        primitive_ = dnnl::matmul(pd);
        args_ = {{DNNL_ARG_SRC, dnnl::memory(a, engine_, const_cast<std::uint16_t*>(g.a))},
                 {DNNL_ARG_WEIGHTS, dnnl::memory(b, engine_, const_cast<std::uint16_t*>(g.b))},
                 {DNNL_ARG_DST, dnnl::memory(c, engine_, g.c)}};
    }
    dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream_{engine_};
    dnnl::matmul primitive_;
    std::unordered_map<int, dnnl::memory> args_;
};

// libxsmm is column-major: row-major C[M x N] is column-major C'[N x M] = B' A' with B' = op(B)^T
// ([N x K], libxsmm's "A", which bf16 kernels take in VNNI pairs along K) and A' = op(A)^T
// ([K x M] column-major: op(A) row-major, libxsmm's "B"). Blocks: kBm of N, kBn of M, kBk of K;
// each output block is one batch-reduce call over the K blocks. Sizes must divide.
class LibxsmmBackend final : public GemmBackend {
  public:
    explicit LibxsmmBackend(bool prepacked) : prepacked_(prepacked) {}
    std::string name() const override { return prepacked_ ? "libxsmm_prepacked" : "libxsmm"; }
    bool prepare(const Gemm& g, std::string& why) override {
        if (g.n % kBm || g.m % kBn || g.k % kBk || g.k / kBk > kMaxBlocks) {
            why = "sizes are not multiples of the blocks (or K is above 65536)";
            return false;
        }
        g_ = g;
        const libxsmm_blasint lda = kBm, ldb = static_cast<libxsmm_blasint>(g.k),
                              ldc = static_cast<libxsmm_blasint>(g.n);
        const float alpha = 1.0f, beta = 0.0f;
        const int flags = LIBXSMM_GEMM_FLAG_VNNI_A, prefetch = LIBXSMM_PREFETCH_NONE;
        kernel_ =
            libxsmm_bsmmdispatch_reducebatch_addr(kBm, kBn, kBk, &lda, &ldb, &ldc, &alpha, &beta, &flags, &prefetch);
        if (!kernel_) {
            why = std::string("libxsmm generated no bf16 kernel for target ") + libxsmm_get_target_arch();
            return false;
        }
        packed_b_.resize(static_cast<std::size_t>(g.n * g.k / 2));
        if (g.a_trans) row_a_.resize(static_cast<std::size_t>(g.m * g.k));
        if (prepacked_) pack();
        return true;
    }
    void run() override {
        if (!prepacked_) pack();
        const std::uint16_t* a = g_.a_trans ? row_a_.data() : g_.a;
        const std::int64_t kb_count = g_.k / kBk, nb_count = g_.n / kBm, mb_count = g_.m / kBn;
#pragma omp parallel for collapse(2) schedule(static)
        for (std::int64_t mb = 0; mb < mb_count; ++mb)
            for (std::int64_t nb = 0; nb < nb_count; ++nb) {
                const libxsmm_bfloat16* as[kMaxBlocks];
                const libxsmm_bfloat16* bs[kMaxBlocks];
                for (std::int64_t kb = 0; kb < kb_count; ++kb) {
                    as[kb] = reinterpret_cast<const libxsmm_bfloat16*>(packed_b_.data() +
                                                                       (nb * kb_count + kb) * kBk * kBm / 2);
                    bs[kb] = a + mb * kBn * g_.k + kb * kBk;
                }
                const unsigned long long count = static_cast<unsigned long long>(kb_count);
                kernel_(as, bs, g_.c + mb * kBn * g_.n + nb * kBm, &count);
            }
    }

  private:
    static constexpr std::int64_t kBm = 64, kBn = 32, kBk = 64, kMaxBlocks = 1024;
    // op(B)^T into VNNI blocks [N/kBm][K/kBk][kBk/2][kBm][2]; op(A) row-major. Each block is
    // read along the stored rows (the inner loop runs over contiguous elements).
    void pack() {
        const std::int64_t kb_count = g_.k / kBk;
#pragma omp parallel for collapse(2) schedule(static)
        for (std::int64_t nb = 0; nb < g_.n / kBm; ++nb)
            for (std::int64_t kb = 0; kb < kb_count; ++kb) {
                // A VNNI pair (rows kk and kk + 1 of one column) is one 32-bit word.
                std::uint32_t* block = packed_b_.data() + (nb * kb_count + kb) * kBk * kBm / 2;
                if (g_.b_trans) {  // stored [N x K]: a pair is two adjacent elements of a stored row
                    for (std::int64_t nn = 0; nn < kBm; ++nn) {
                        const std::uint16_t* row = g_.b + (nb * kBm + nn) * g_.k + kb * kBk;
                        for (std::int64_t p = 0; p < kBk / 2; ++p)
                            block[p * kBm + nn] = row[2 * p] | static_cast<std::uint32_t>(row[2 * p + 1]) << 16;
                    }
                } else {  // stored [K x N]: a pair is the same element of two stored rows
                    for (std::int64_t p = 0; p < kBk / 2; ++p) {
                        const std::uint16_t* r0 = g_.b + (kb * kBk + 2 * p) * g_.n + nb * kBm;
                        const std::uint16_t* r1 = r0 + g_.n;
                        for (std::int64_t nn = 0; nn < kBm; ++nn)
                            block[p * kBm + nn] = r0[nn] | static_cast<std::uint32_t>(r1[nn]) << 16;
                    }
                }
            }
        if (!g_.a_trans) return;
        // Stored [K x M]: transposed in tiles of kTile x kTile.
        constexpr std::int64_t kTile = 8;  // 8 rows: power-of-two strides map them to one L1 set
        const std::int64_t m_tiles = (g_.m + kTile - 1) / kTile;
#pragma omp parallel for schedule(static)
        for (std::int64_t mt = 0; mt < m_tiles; ++mt) {
            const std::int64_t m0 = mt * kTile, m1 = std::min(g_.m, m0 + kTile);
            for (std::int64_t k0 = 0; k0 < g_.k; k0 += kTile) {
                const std::int64_t k1 = std::min(g_.k, k0 + kTile);
                for (std::int64_t k = k0; k < k1; ++k)
                    for (std::int64_t m = m0; m < m1; ++m)
                        row_a_[static_cast<std::size_t>(m * g_.k + k)] = g_.a[k * g_.m + m];
            }
        }
    }
    bool prepacked_;
    Gemm g_;
    libxsmm_bsmmfunction_reducebatch_addr kernel_ = nullptr;
    std::vector<std::uint32_t> packed_b_;  // VNNI pairs
    std::vector<std::uint16_t> row_a_;
};

}  // namespace

std::unique_ptr<GemmBackend> make_onednn_backend() { return std::make_unique<OnednnBackend>(); }
std::unique_ptr<GemmBackend> make_libxsmm_backend(bool prepacked) {
    libxsmm_init();
    return std::make_unique<LibxsmmBackend>(prepacked);
}

std::string libxsmm_target() {
    libxsmm_init();
    return libxsmm_get_target_arch();
}

}  // namespace psrun::bench
