#include "workerd/model.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <stdexcept>

#include "workerd/model_impl.h"
#include "workerd/rng.h"

namespace psrun::worker {

namespace {

using Clock = std::chrono::steady_clock;

// Element access for activations stored as f32 or bf16.
template <class T>
float load(const T* p, std::size_t i) {
    if constexpr (std::is_same_v<T, float>) {
        return p[i];
    } else {
        return bf16_to_f32(p[i]);
    }
}
template <class T>
void store(T* p, std::size_t i, float v) {
    if constexpr (std::is_same_v<T, float>) {
        p[i] = v;
    } else {
        p[i] = f32_to_bf16(v);
    }
}

// Calls fn(T*) with the memory's buffer typed as float or bf16 (uint16_t).
template <class Fn>
void with_typed(const memory& m, Fn&& fn) {
    if (m.get_desc().data_type() == Dt::bf16) {
        fn(static_cast<std::uint16_t*>(m.get_data_handle()));
    } else {
        fn(static_cast<float*>(m.get_data_handle()));
    }
}

}  // namespace

Result<Precision> parse_precision(const std::string& name) {
    if (name == "f32") return Precision::kF32;
    if (name == "bf16") {
        if (!bf16_supported()) {
            return make_error(ErrorCode::kUnsupported,
                              "bf16 needs native CPU support (AVX512-BF16 or AMX), which "
                              "oneDNN does not find here; use f32");
        }
        return Precision::kBf16;
    }
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown precision '" + name + "': use f32 or bf16");
}

bool bf16_supported() {
    const auto isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

const char* layer_name(Layer layer) {
    static constexpr const char* kNames[] = {"input", "conv1",   "pool1", "conv2", "pool2",
                                             "fc1",   "dropout", "fc2",   "loss"};
    return kNames[static_cast<int>(layer)];
}

void Model::Impl::run(const std::vector<Op>& ops, bool backward) {
    if (!profiling) {
        for (const auto& op : ops) op.run();
        return;
    }
    for (const auto& op : ops) {
        const auto t0 = Clock::now();
        op.run();
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        auto& t = times[static_cast<std::size_t>(op.layer)];
        (backward ? t.backward_ms : t.forward_ms) += ms;
    }
}

// Inverted dropout in place on fc1's output: keep with probability keep_prob, scale by 1/keep.
void Model::Impl::run_dropout() {
    if (!training) return;
    const std::size_t count = static_cast<std::size_t>(cfg.batch_size) *
                              static_cast<std::size_t>(cfg.shape.fc1_units);
    const float scale = 1.0f / cfg.keep_prob;
    // Threshold on 32-bit uniforms: keep iff u < keep * 2^32.
    const auto threshold = static_cast<std::uint64_t>(double(cfg.keep_prob) * 4294967296.0);
    // Counter-based SplitMix64 (output j mixes base + (j+1) * gamma): no loop-carried state, so
    // the loop vectorises and splits across threads with the same mask. 64 random bits give the masks of two units.
    const std::uint64_t base = Rng(dropout_seed, 0x64726f70ull).next();
    with_typed(fc1_dst, [&](auto* p) {
        const std::size_t pairs = (count + 1) / 2;
#pragma omp parallel for schedule(static)
        for (std::size_t j = 0; j < pairs; ++j) {
            std::uint64_t r = base + (j + 1) * 0x9E3779B97F4A7C15ull;
            r = (r ^ (r >> 30)) * 0xBF58476D1CE4E5B9ull;
            r = (r ^ (r >> 27)) * 0x94D049BB133111EBull;
            r ^= r >> 31;
            const float m0 = (r & 0xffffffffull) < threshold ? scale : 0.0f;
            const float m1 = (r >> 32) < threshold ? scale : 0.0f;
            store(p, 2 * j, load(p, 2 * j) * m0);
            if (2 * j + 1 < count) store(p, 2 * j + 1, load(p, 2 * j + 1) * m1);
        }
    });
}

// d(fc1 pre-activation) = d(dropout output) * scale where the dropout output is > 0 (kept and
// ReLU active), else 0.
void Model::Impl::run_dropout_backward() {
    const std::size_t count = static_cast<std::size_t>(cfg.batch_size) *
                              static_cast<std::size_t>(cfg.shape.fc1_units);
    const float scale = 1.0f / cfg.keep_prob;
    with_typed(fc1_dst, [&](auto* y) {
        using T = std::remove_pointer_t<decltype(y)>;
        T* d = static_cast<T*>(d_fc1_dst.get_data_handle());
#pragma omp parallel for schedule(static)
        for (std::size_t i = 0; i < count; ++i) {
            store(d, i, load(y, i) > 0.0f ? load(d, i) * scale : 0.0f);
        }
    });
}

// Softmax cross-entropy, mean over the batch; arg-max predictions; d(loss)/d(logits) when a
// backward pass follows.
void Model::Impl::run_loss() {
    const int n = cfg.batch_size, z = cfg.shape.classes;
    const float* lg = static_cast<const float*>(logits.get_data_handle());
    double total = 0;
    with_typed(dlogits, [&](auto* dl) {
        for (int b = 0; b < n; ++b) {
            const float* row = lg + static_cast<std::size_t>(b) * z;
            int best = 0;
            for (int j = 1; j < z; ++j) best = row[j] > row[best] ? j : best;
            const float mx = row[best];
            double sum = 0;
            for (int j = 0; j < z; ++j) sum += std::exp(double(row[j] - mx));
            const int label = labels[static_cast<std::size_t>(b)];
            total += std::log(sum) - double(row[label] - mx);
            predictions[static_cast<std::size_t>(b)] = best;
            if (backward_pass) {
                for (int j = 0; j < z; ++j) {
                    const double p = std::exp(double(row[j] - mx)) / sum;
                    store(dl, static_cast<std::size_t>(b) * z + j,
                          static_cast<float>((p - (j == label ? 1.0 : 0.0)) / n));
                }
            }
        }
    });
    loss = static_cast<float>(total / n);
}

Model::Model(const ModelConfig& config, const ParameterSet& params, ParameterSet& grads)
    : impl_(std::make_unique<Impl>(config, params, grads)) {}

Model::~Model() = default;

const ModelConfig& Model::config() const { return impl_->cfg; }
std::span<float> Model::input() { return impl_->input; }
std::span<std::int32_t> Model::labels() { return impl_->labels; }
std::span<const std::int32_t> Model::predictions() const { return impl_->predictions; }

float Model::train_step(std::uint64_t dropout_seed) {
    auto& m = *impl_;
    assert(!m.cfg.forward_only);
    m.training = true;
    m.backward_pass = true;
    m.dropout_seed = dropout_seed;
    m.run(m.fwd_ops, false);
    m.run(m.bwd_ops, true);
    m.strm.wait();
    return m.loss;
}

float Model::forward(bool training, std::uint64_t dropout_seed) {
    auto& m = *impl_;
    m.training = training;
    m.backward_pass = false;
    m.dropout_seed = dropout_seed;
    m.run(m.fwd_ops, false);
    m.strm.wait();
    return m.loss;
}

void Model::set_gradient_buffer(ParameterSet& grads) {
    assert(grads.size() == impl_->grads.size());
    for (auto& [mem, index] : impl_->grad_memories) mem.set_data_handle(grads.tensor(index).data());
}

void Model::set_profiling(bool on) { impl_->profiling = on; }
const std::array<LayerTime, static_cast<int>(Layer::kCount)>& Model::layer_times() const {
    return impl_->times;
}
void Model::reset_layer_times() { impl_->times = {}; }

std::vector<float> Model::activation(Layer layer) const {
    auto& m = *impl_;
    const auto it = m.layer_outputs.find(static_cast<int>(layer));
    if (it == m.layer_outputs.end()) {
        throw std::logic_error(std::string("no stored output for layer ") + layer_name(layer));
    }
    const memory& src = it->second;
    const auto dims = src.get_desc().dims();
    const Tag tag = dims.size() == 4 ? Tag::nchw : Tag::nc;
    std::size_t count = 1;
    for (auto d : dims) count *= static_cast<std::size_t>(d);
    std::vector<float> out(count);
    memory dst(m.md(dims, Dt::f32, tag), m.eng, out.data());
    dnnl::reorder(src, dst).execute(m.strm, const_cast<memory&>(src), dst);
    m.strm.wait();
    return out;
}

std::vector<std::string> Model::implementations() const {
    std::vector<std::string> out;
    if (impl_->conv1_pool) out.push_back("conv1+relu+pool1: psrun fused avx512f");
    if (impl_->pool2) out.push_back("pool2: psrun avx512f");
    for (const auto& [name, pd] : impl_->pds) out.push_back(name + ": " + pd.impl_info_str());
    return out;
}

bool Model::first_layer_fused() const { return impl_->conv1_pool != nullptr; }

}  // namespace psrun::worker
