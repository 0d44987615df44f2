#include "bench/gemm/gemm_backends.h"

#include <libxsmm.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <oneapi/dnnl/dnnl.hpp>
#include <stdexcept>
#include <type_traits>
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
        const dt in = g.bf16 ? dt::bf16 : dt::f32;
        const dnnl::memory::desc a({g.m, g.k}, in, g.a_trans ? tag::ba : tag::ab);
        const dnnl::memory::desc b({g.k, g.n}, in, g.b_trans ? tag::ba : tag::ab);
        const dnnl::memory::desc c({g.m, g.n}, dt::f32, tag::ab);
        const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine_);
        primitive_ = dnnl::matmul(pd);
        args_ = {{DNNL_ARG_SRC, dnnl::memory(a, engine_, const_cast<void*>(g.a))},
                 {DNNL_ARG_WEIGHTS, dnnl::memory(b, engine_, const_cast<void*>(g.b))},
                 {DNNL_ARG_DST, dnnl::memory(c, engine_, g.c)}};
    }
    dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream_{engine_};
    dnnl::matmul primitive_;
    std::unordered_map<int, dnnl::memory> args_;
};

// out[m][k] = in[k][m] for in [K x M]: row-major op(A) from A stored transposed. In tiles of 8
// rows: power-of-two strides map a taller tile's rows to one L1 set.
template <class T>
void transpose(const T* in, std::int64_t k_count, std::int64_t m_count, T* out) {
    constexpr std::int64_t kTile = 8;
    const std::int64_t m_tiles = (m_count + kTile - 1) / kTile;
#pragma omp parallel for schedule(static)
    for (std::int64_t mt = 0; mt < m_tiles; ++mt) {
        const std::int64_t m0 = mt * kTile, m1 = std::min(m_count, m0 + kTile);
        for (std::int64_t k0 = 0; k0 < k_count; k0 += kTile) {
            const std::int64_t k1 = std::min(k_count, k0 + kTile);
            for (std::int64_t k = k0; k < k1; ++k)
                for (std::int64_t m = m0; m < m1; ++m) out[m * k_count + k] = in[k * m_count + m];
        }
    }
}

// libxsmm is column-major: row-major C[M x N] is column-major C'[N x M] = B' A' with B' = op(B)^T
// ([N x K], libxsmm's "A") and A' = op(A)^T ([K x M] column-major: op(A) row-major, libxsmm's
// "B"). Blocks: kBm of N, kBn of M, kBk of K; each output block is one batch-reduce call over the
// K blocks. Sizes must divide. B' is packed into column-major blocks [N/kBm][K/kBk][kBk][kBm],
// in bf16 as VNNI pairs along K (the bf16 kernels' layout): a pair is one 32-bit word. (Read in
// place where B is stored [K x N], lda = N, the f32 kernels ran at 0.39-0.70 of the peak against
// 0.82-0.89 from blocks: a strided A costs more than the copy.)
template <bool kBf16>
class LibxsmmBackend final : public GemmBackend {
    using Element = std::conditional_t<kBf16, std::uint16_t, float>;
    using Word = std::conditional_t<kBf16, std::uint32_t, float>;  // a VNNI pair, or one float
    using Kernel =
        std::conditional_t<kBf16, libxsmm_bsmmfunction_reducebatch_addr, libxsmm_smmfunction_reducebatch_addr>;
    using Pointer = std::conditional_t<kBf16, const libxsmm_bfloat16*, const float*>;
    static constexpr std::int64_t kPack = kBf16 ? 2 : 1;  // elements of K per word

  public:
    explicit LibxsmmBackend(bool prepacked) : prepacked_(prepacked) {}
    std::string name() const override { return prepacked_ ? "libxsmm_prepacked" : "libxsmm"; }
    bool prepare(const Gemm& g, std::string& why) override {
        if (g.bf16 != kBf16) throw std::logic_error("a libxsmm backend made for the other precision");
        if (g.n % kBm || g.m % kBn || g.k % kBk || g.k / kBk > kMaxBlocks) {
            why = "sizes are not multiples of the blocks (or K is above 65536)";
            return false;
        }
        g_ = g;
        const libxsmm_blasint lda = kBm, ldb = static_cast<libxsmm_blasint>(g.k),
                              ldc = static_cast<libxsmm_blasint>(g.n);
        const float alpha = 1.0f, beta = 0.0f;
        const int flags = kBf16 ? LIBXSMM_GEMM_FLAG_VNNI_A : LIBXSMM_GEMM_FLAG_NONE;
        const int prefetch = LIBXSMM_PREFETCH_NONE;
        if constexpr (kBf16)
            kernel_ = libxsmm_bsmmdispatch_reducebatch_addr(kBm, kBn, kBk, &lda, &ldb, &ldc, &alpha, &beta, &flags,
                                                            &prefetch);
        else
            kernel_ =
                libxsmm_smmdispatch_reducebatch_addr(kBm, kBn, kBk, &lda, &ldb, &ldc, &alpha, &beta, &flags, &prefetch);
        if (!kernel_) {
            why = std::string("libxsmm generated no ") + (kBf16 ? "bf16" : "f32") + " kernel for target " +
                  libxsmm_get_target_arch();
            return false;
        }
        packed_b_.resize(static_cast<std::size_t>(g.n * g.k / kPack));
        if (g.a_trans) row_a_.resize(static_cast<std::size_t>(g.m * g.k));
        if (prepacked_) pack();
        return true;
    }
    void run() override {
        if (!prepacked_) pack();
        const Element* a = g_.a_trans ? row_a_.data() : static_cast<const Element*>(g_.a);
        const std::int64_t kb_count = g_.k / kBk, nb_count = g_.n / kBm, mb_count = g_.m / kBn;
#pragma omp parallel for collapse(2) schedule(static)
        for (std::int64_t mb = 0; mb < mb_count; ++mb)
            for (std::int64_t nb = 0; nb < nb_count; ++nb) {
                Pointer as[kMaxBlocks];
                Pointer bs[kMaxBlocks];
                for (std::int64_t kb = 0; kb < kb_count; ++kb) {
                    as[kb] = reinterpret_cast<Pointer>(packed_b_.data() + (nb * kb_count + kb) * kBk * kBm / kPack);
                    bs[kb] = reinterpret_cast<Pointer>(a + mb * kBn * g_.k + kb * kBk);
                }
                const unsigned long long count = static_cast<unsigned long long>(kb_count);
                kernel_(as, bs, g_.c + mb * kBn * g_.n + nb * kBm, &count);
            }
    }

  private:
    static constexpr std::int64_t kBm = 64, kBn = 32, kBk = 64, kMaxBlocks = 1024;
    // A word of op(B)^T: `first` and (bf16) the element `stride` after it, the next along K.
    static Word word(const Element* first, std::int64_t stride) {
        if constexpr (kBf16) return first[0] | static_cast<std::uint32_t>(first[stride]) << 16;
        else return first[0];
    }
    void pack() {
        const std::int64_t kb_count = g_.k / kBk;
        const auto* b = static_cast<const Element*>(g_.b);
#pragma omp parallel for collapse(2) schedule(static)
        for (std::int64_t nb = 0; nb < g_.n / kBm; ++nb)
            for (std::int64_t kb = 0; kb < kb_count; ++kb) {
                Word* block = packed_b_.data() + (nb * kb_count + kb) * kBk * kBm / kPack;
                // Each loop reads along the stored rows (its inner loop over contiguous elements).
                if (g_.b_trans) {  // stored [N x K]: a word is kPack adjacent elements of a stored row
                    for (std::int64_t nn = 0; nn < kBm; ++nn) {
                        const Element* row = b + (nb * kBm + nn) * g_.k + kb * kBk;
                        for (std::int64_t p = 0; p < kBk / kPack; ++p) block[p * kBm + nn] = word(row + kPack * p, 1);
                    }
                } else {  // stored [K x N]: a word is the same element of kPack stored rows
                    for (std::int64_t p = 0; p < kBk / kPack; ++p) {
                        const Element* row = b + (kb * kBk + kPack * p) * g_.n + nb * kBm;
                        if constexpr (kBf16) {
                            for (std::int64_t nn = 0; nn < kBm; ++nn) block[p * kBm + nn] = word(row + nn, g_.n);
                        } else {
                            std::copy_n(row, kBm, block + p * kBm);
                        }
                    }
                }
            }
        if (g_.a_trans) transpose(static_cast<const Element*>(g_.a), g_.k, g_.m, row_a_.data());
    }
    bool prepacked_;
    Gemm g_;
    Kernel kernel_ = nullptr;
    std::vector<Word> packed_b_;
    std::vector<Element> row_a_;
};

}  // namespace

std::unique_ptr<GemmBackend> make_onednn_backend() { return std::make_unique<OnednnBackend>(); }
std::unique_ptr<GemmBackend> make_libxsmm_backend(bool bf16, bool prepacked) {
    libxsmm_init();
    if (bf16) return std::make_unique<LibxsmmBackend<true>>(prepacked);
    return std::make_unique<LibxsmmBackend<false>>(prepacked);
}

std::string libxsmm_target() {
    libxsmm_init();
    return libxsmm_get_target_arch();
}

}  // namespace psrun::bench
