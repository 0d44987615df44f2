#include "workerd/nn/network.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "workerd/nn/buffer_lifetimes.h"
#include "workerd/nn/loss.h"
#include "workerd/nn/network_plan.h"

namespace psrun::nn {

using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

const char* to_string(Precision precision) { return precision == Precision::kBf16 ? "bf16" : "f32"; }

bool engine_bf16_supported() {
    const auto isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

dnnl::memory::format_tag plain_tag(int ndims) {
    using Tag = dnnl::memory::format_tag;
    switch (ndims) {
        case 1: return Tag::a;
        case 2: return Tag::ab;
        case 3: return Tag::abc;
        case 4: return Tag::abcd;
        case 5: return Tag::abcde;
        case 6: return Tag::abcdef;
        default: throw std::runtime_error("unsupported tensor rank " + std::to_string(ndims));
    }
}

dnnl::memory::desc plain_desc(const dnnl::memory::dims& dims, dnnl::memory::data_type type) {
    if (dims.empty()) return dnnl::memory::desc({1}, type, dnnl::memory::format_tag::a);
    return dnnl::memory::desc(dims, type, plain_tag(static_cast<int>(dims.size())));
}

void KernelBuilder::forward(const dnnl::primitive& p, std::unordered_map<int, dnnl::memory> args) {
    const dnnl::stream stream = context().stream;
    forward([p, stream, args]() { p.execute(stream, args); });
}

void KernelBuilder::backward(const dnnl::primitive& p, std::unordered_map<int, dnnl::memory> args) {
    const dnnl::stream stream = context().stream;
    backward([p, stream, args]() { p.execute(stream, args); });
}

namespace {

dnnl::memory convert_with(KernelBuilder& b, const dnnl::memory& m, const dnnl::memory::desc& want, bool forward) {
    if (m.get_desc() == want) return m;
    dnnl::memory out = b.scratch(want, !forward);
    dnnl::reorder r(m, out);
    auto op = [r, stream = b.context().stream, m, out]() mutable {
        r.execute(stream, {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, out}});
    };
    if (forward) b.forward(op);
    else b.backward(op);
    return out;
}

}  // namespace

dnnl::memory forward_convert(KernelBuilder& b, const dnnl::memory& m, const dnnl::memory::desc& want) {
    return convert_with(b, m, want, true);
}

dnnl::memory backward_convert(KernelBuilder& b, const dnnl::memory& m, const dnnl::memory::desc& want) {
    return convert_with(b, m, want, false);
}

void add_relu_backward(KernelBuilder& b, const dnnl::memory& dst, const dnnl::memory& diff) {
    using dnnl::algorithm;
    const auto desc = dst.get_desc();
    dnnl::eltwise_forward::primitive_desc hint(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, algorithm::eltwise_relu_use_dst_for_bwd, desc,
                                    0.0f, 0.0f),
        b.context().engine);
    dnnl::eltwise_backward::primitive_desc pd(
        dnnl::eltwise_backward::desc(algorithm::eltwise_relu_use_dst_for_bwd, diff.get_desc(), desc, 0.0f, 0.0f),
        b.context().engine, hint);
    b.backward(dnnl::eltwise_backward(pd), {{DNNL_ARG_DST, dst}, {DNNL_ARG_DIFF_DST, diff}, {DNNL_ARG_DIFF_SRC, diff}});
    b.note("relu bwd", pd);
}

Network::Network(const ModelDescription& model, const NetworkOptions& options) : model_(model), options_(options) {}

Network::~Network() = default;

Result<std::unique_ptr<Network>> Network::create(const ModelDescription& model, const NetworkOptions& options,
                                                 std::span<const float> params, std::span<float> grads) {
    if (options.precision == Precision::kBf16 && !engine_bf16_supported())
        return make_error(
            ErrorCode::kUnsupported,
            "bf16 needs native CPU support (AVX512-BF16 or AMX), which oneDNN does not find here; use f32");
    if (options.batch_size < 1) return make_error(ErrorCode::kInvalidArgument, "batch size must be >= 1");
    const auto count = static_cast<std::size_t>(model.parameter_count);
    if (params.size() != count || (!options.forward_only && grads.size() != count))
        return make_error(ErrorCode::kInvalidArgument,
                          "model " + model.name + " has " + std::to_string(count) + " parameters; got buffers of " +
                              std::to_string(params.size()) + " and " + std::to_string(grads.size()) + " floats");
    if (model.nodes.empty()) return make_error(ErrorCode::kInvalidArgument, "model " + model.name + " has no layers");
    if (!(options.label_smoothing >= 0.0f && options.label_smoothing < 1.0f))
        return make_error(ErrorCode::kInvalidArgument, "label smoothing must be in [0, 1)");
    if (options.label_smoothing > 0.0f && model.loss != LossKind::kSoftmaxCrossEntropy)
        return make_error(
            ErrorCode::kInvalidArgument,
            "label smoothing applies to softmax cross-entropy; model " + model.name + "'s loss is " +
                to_string(model.loss) +
                (model.loss == LossKind::kGraph ? " (set its softmax_cross_entropy_loss's \"label_smoothing\")" : ""));
    const char* env = std::getenv("PSRUN_PLAN_BUFFERS");
    const bool plan = options.plan_buffers && !(env != nullptr && std::string(env) == "0");
    std::unique_ptr<Network> net(new Network(model, options));
    auto ok = net->build(params, grads, plan);
    if (!ok && net->plan_->plan_failed) {  // a view outlived its planned buffer: one buffer each
        net.reset(new Network(model, options));
        net->plan_failed_ = true;
        ok = net->build(params, grads, false);
    }
    if (!ok) return tl::unexpected(ok.error());
    return net;
}

// A graph loss's label input is fed from the data's labels (int) or targets (float).
std::span<std::int32_t> Network::labels() {
    if (model_.loss == LossKind::kGraph)
        return model_.label_input < 0 ? std::span<std::int32_t>(spare_labels_)
                                      : input_ids(static_cast<std::size_t>(model_.label_input));
    return loss_->labels();
}
std::span<float> Network::targets() {
    if (model_.loss == LossKind::kGraph)
        return model_.label_input < 0 ? std::span<float>() : input(static_cast<std::size_t>(model_.label_input));
    return loss_->targets();
}
std::span<const float> Network::outputs() const { return loss_->outputs(); }
std::span<const std::int32_t> Network::predictions() const { return loss_->predictions(); }
std::span<const float> Network::head_outputs(std::size_t k) const { return loss_->head_outputs(k); }
void Network::probabilities(std::span<float> out) const { loss_->probabilities(out); }

void Network::run_forward() {
    for (std::size_t i = 0; i < plan_->kernels.size(); ++i) {
        const auto& k = plan_->kernels[i];
        const auto t0 = Clock::now();
        for (const auto& op : k.fwd) op();
        if (!plan_->poison_after.empty()) {
            stream_.wait();
            poison_step(*plan_, forward_step(static_cast<int>(i)));
        }
        if (profiling_) {
            stream_.wait();
            times_[i].forward_ms += ms_since(t0);
        }
    }
    stream_.wait();
}

void Network::run_backward() {
    for (const auto& [offset, size] : plan_->dead_grads) std::memset(plan_->grads + offset, 0, size * sizeof(float));
    for (std::size_t i = plan_->kernels.size(); i-- > 0;) {
        const auto& k = plan_->kernels[i];
        if (!plan_->poison_after.empty()) {  // after this kernel's backward step, run or not
            stream_.wait();
            poison_step(*plan_, backward_step(*plan_, static_cast<int>(i)) - 1);
        }
        if (!k.backward) continue;
        const auto t0 = Clock::now();
        for (const auto& op : k.bwd_pre) op();
        for (const auto& op : k.bwd) op();
        for (const auto& op : k.bwd_post) op();
        if (profiling_) {
            stream_.wait();
            times_[i].backward_ms += ms_since(t0);
        }
    }
    stream_.wait();
    poison_step(*plan_, backward_step(*plan_, 0));
}

float Network::train_step(std::uint64_t seed) {
    if (options_.forward_only) throw std::logic_error("train_step on a forward-only network");
    step_.seed = seed;
    step_.training = true;
    run_forward();
    const auto t0 = Clock::now();
    const float loss = loss_->forward(true);
    if (profiling_) times_.back().forward_ms += ms_since(t0);
    poison_step(*plan_, static_cast<int>(plan_->kernels.size()));  // the loss's step
    run_backward();
    return loss;
}

float Network::forward(bool training, std::uint64_t seed) {
    step_.seed = seed;
    step_.training = training;
    run_forward();
    return loss_->forward(false);
}

void Network::backward_from(std::span<const float> output_grad) {
    if (options_.forward_only) throw std::logic_error("backward_from on a forward-only network");
    loss_->set_gradient(output_grad);
    run_backward();
}

void Network::set_gradient_buffer(std::span<float> grads) {
    if (grads.size() != static_cast<std::size_t>(model_.parameter_count))
        throw std::invalid_argument("set_gradient_buffer: " + std::to_string(grads.size()) + " floats for " +
                                    std::to_string(model_.parameter_count) + " parameters");
    plan_->grads = grads.data();
    for (auto& [m, offset] : plan_->grad_memories) m.set_data_handle(grads.data() + offset);
}

void Network::reset_layer_times() {
    for (auto& t : times_) t.forward_ms = t.backward_ms = 0;
}

std::vector<std::string> Network::implementations() const {
    std::vector<std::string> out;
    for (const auto& k : plan_->kernels)
        for (const auto& impl : k.impls) out.push_back(std::to_string(k.first_node) + " " + k.label + " " + impl);
    return out;
}

MemoryUse Network::memory_use() const {
    MemoryUse use;
    use.planned = plan_->arena != nullptr;
    use.plan_failed = plan_failed_;
    use.unplanned_bytes =
        plan_->buffers.total_bytes() + plan_->unplanned_bytes + plan_->in_place_bytes + plan_->shared_grad_bytes;
    use.planned_bytes = use.planned ? plan_->buffers.arena_bytes() + plan_->unplanned_bytes : use.unplanned_bytes;
    use.lower_bound = use.planned ? plan_->buffers.peak_live_bytes() + plan_->unplanned_bytes : use.unplanned_bytes;
    use.in_place_bytes = plan_->in_place_bytes;
    use.shared_gradient_bytes = plan_->shared_grad_bytes;
    use.gradients_in_writer_format = plan_->lessons.grad_descs.size();
    for (const auto& k : plan_->kernels)
        for (std::size_t i = 0; i < k.inputs.size(); ++i)
            if (use.planned && k.reads_through_conversion(i)) ++use.read_as_converted;
    return use;
}

std::vector<std::string> Network::kernel_labels() const {
    std::vector<std::string> out;
    for (const auto& k : plan_->kernels) out.push_back(k.label);
    return out;
}

}  // namespace psrun::nn
