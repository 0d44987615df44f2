#include "workerd/nn/network.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <stdexcept>

#include "workerd/nn/activation_layer.h"
#include "workerd/nn/conv2d_layer.h"
#include "workerd/nn/conv_relu_blocked_pool_layer.h"
#include "workerd/nn/conv_relu_pool_layer.h"
#include "workerd/nn/dense_layer.h"
#include "workerd/nn/dropout_layer.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/nn/pool_layer.h"

namespace psrun::nn {

using dnnl::memory;
using Clock = std::chrono::steady_clock;

namespace {

// The layer for specs[i..]: how many specs it covers is decided here (the pattern matcher).
// With hand kernels, conv2d+relu+max_pool 2x2/2 is one Layer on a hand-written kernel where
// its matches() allows (the CPU, the shapes, the precision, the position), the fully fused one
// first; everything else is oneDNN primitives, conv2d/dense + relu fused as a post-op.
std::unique_ptr<Layer> make_layer(std::span<const LayerSpec> specs, int index,
                                  const LayerContext& ctx, std::size_t offset, bool hand_kernels) {
    const LayerSpec& s = specs[static_cast<std::size_t>(index)];
    if (hand_kernels) {
        const auto three = specs.subspan(static_cast<std::size_t>(index),
                                         std::min<std::size_t>(3, specs.size() - static_cast<std::size_t>(index)));
        if (FusedConvReluPoolLayer::matches(specs, index, ctx))
            return std::make_unique<FusedConvReluPoolLayer>(three, index, ctx, offset);
        if (ConvReluBlockedPoolLayer::matches(specs, index, ctx))
            return std::make_unique<ConvReluBlockedPoolLayer>(three, index, ctx, offset);
    }
    const bool relu_next = static_cast<std::size_t>(index) + 1 < specs.size() &&
                           specs[static_cast<std::size_t>(index) + 1].kind == LayerKind::kRelu;
    const auto one = specs.subspan(static_cast<std::size_t>(index), 1);
    const auto two = specs.subspan(static_cast<std::size_t>(index), relu_next ? 2 : 1);
    switch (s.kind) {
        case LayerKind::kConv2d: return std::make_unique<Conv2dLayer>(two, index, ctx, offset);
        case LayerKind::kDense: {
            const bool ends = static_cast<std::size_t>(index) + two.size() == specs.size();
            // The logits stay f32 in bf16 mode (the loss is computed in f32 anyway).
            const auto out = ends ? memory::data_type::f32 : ctx.activation_type();
            return std::make_unique<DenseLayer>(two, index, ctx, offset, out);
        }
        case LayerKind::kMaxPool:
        case LayerKind::kAvgPool: return std::make_unique<PoolLayer>(one, index, ctx, offset);
        case LayerKind::kRelu:
        case LayerKind::kTanh:
        case LayerKind::kSigmoid: return std::make_unique<ActivationLayer>(one, index, ctx, offset);
        case LayerKind::kDropout: {
            const auto before = std::count_if(specs.begin(), specs.begin() + index,
                                              [](const LayerSpec& l) { return l.kind == LayerKind::kDropout; });
            return std::make_unique<DropoutLayer>(one, index, ctx, offset, static_cast<int>(before));
        }
    }
    return nullptr;
}

std::string describe_layer(const LayerSpec& s, int index, const NetworkOptions& o) {
    std::ostringstream out;
    out << "layer " << index << " (" << kind_name(s.kind) << " \"" << s.name << "\"): input "
        << s.input.to_string() << ", output " << s.output.to_string() << ", batch " << o.batch_size
        << ", " << to_string(o.precision);
    return out.str();
}

}  // namespace

Network::Network(const ModelDescription& model, const NetworkOptions& options)
    : model_(model), options_(options) {}

Network::~Network() = default;

Result<std::unique_ptr<Network>> Network::create(const ModelDescription& model,
                                                 const NetworkOptions& options,
                                                 std::span<const float> params,
                                                 std::span<float> grads) {
    if (options.precision == Precision::kBf16 && !engine_bf16_supported())
        return make_error(ErrorCode::kUnsupported,
                          "bf16 needs native CPU support (AVX512-BF16 or AMX), which oneDNN does not find here; use f32");
    if (options.batch_size < 1)
        return make_error(ErrorCode::kInvalidArgument, "batch size must be >= 1");
    const auto count = static_cast<std::size_t>(model.parameter_count);
    if (params.size() != count || (!options.forward_only && grads.size() != count))
        return make_error(ErrorCode::kInvalidArgument,
                          "model " + model.name + " has " + std::to_string(count) +
                              " parameters; got buffers of " + std::to_string(params.size()) + " and " +
                              std::to_string(grads.size()) + " floats");
    if (model.layers.empty())
        return make_error(ErrorCode::kInvalidArgument, "model " + model.name + " has no layers");
    std::unique_ptr<Network> net(new Network(model, options));
    if (auto ok = net->build(params, grads); !ok) return tl::unexpected(ok.error());
    return net;
}

Result<void> Network::build(std::span<const float> params, std::span<float> grads) {
    const auto n = options_.batch_size;
    const auto& in = model_.input;
    input_.assign(static_cast<std::size_t>(n * in.elements()), 0.0f);
    labels_.assign(static_cast<std::size_t>(n), 0);
    input_memory_ = memory({activation_dims(in, n), memory::data_type::f32, memory::format_tag::nchw},
                           engine_, input_.data());
    const LayerContext ctx{engine_, stream_, n, options_.precision, !options_.forward_only};
    const auto offsets = layer_param_offsets(model_);
    const std::span<const LayerSpec> specs(model_.layers);
    memory src = input_memory_, diff_src;
    for (int i = 0; i < static_cast<int>(specs.size());) {
        const auto& s = specs[static_cast<std::size_t>(i)];
        try {
            auto layer = make_layer(specs, i, ctx, offsets[static_cast<std::size_t>(i)], options_.hand_kernels);
            layer->setup(src, diff_src, params, grads);
            src = layer->dst();
            diff_src = layer->diff_dst();
            i += layer->spec_count();
            times_.push_back(LayerTime{layer->first_index(), layer->kind_label(), 0, 0});
            layers_.push_back(std::move(layer));
        } catch (const dnnl::error& e) {
            return make_error(ErrorCode::kUnsupported,
                              describe_layer(s, i, options_) + ": oneDNN cannot build it (" + e.what() +
                                  ", status " + std::to_string(static_cast<int>(e.status)) + ")");
        } catch (const std::exception& e) {
            return make_error(ErrorCode::kUnsupported,
                              describe_layer(s, i, options_) + ": cannot build it: " + e.what());
        }
    }
    try {
        loss_ = std::make_unique<SoftmaxLoss>(engine_, stream_, src, diff_src, model_.reduction);
    } catch (const std::exception& e) {
        return make_error(ErrorCode::kUnsupported, "model " + model_.name + ": the loss on the output " +
                                                       model_.layers.back().output.to_string() +
                                                       " cannot be built: " + e.what());
    }
    times_.push_back(LayerTime{static_cast<int>(model_.layers.size()), "loss", 0, 0});
    return {};
}

void Network::run_forward(bool training) {
    for (std::size_t i = 0; i < layers_.size(); ++i) {
        if (!profiling_) {
            layers_[i]->forward(training);
            continue;
        }
        const auto t0 = Clock::now();
        layers_[i]->forward(training);
        stream_.wait();
        times_[i].forward_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    }
    stream_.wait();
}

float Network::train_step(std::uint64_t seed) {
    for (auto& l : layers_) l->set_step_seed(seed);
    run_forward(true);
    const auto t0 = Clock::now();
    const float loss = loss_->forward(labels_, true);
    stream_.wait();
    if (profiling_) times_.back().forward_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    for (std::size_t i = layers_.size(); i-- > 0;) {
        const auto t1 = Clock::now();
        layers_[i]->backward();
        if (profiling_) {
            stream_.wait();
            times_[i].backward_ms += std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
        }
    }
    stream_.wait();
    return loss;
}

float Network::forward(bool training, std::uint64_t seed) {
    for (auto& l : layers_) l->set_step_seed(seed);
    run_forward(training);
    const float loss = loss_->forward(labels_, false);
    stream_.wait();
    return loss;
}

void Network::set_gradient_buffer(std::span<float> grads) {
    if (grads.size() != static_cast<std::size_t>(model_.parameter_count))
        throw std::invalid_argument("set_gradient_buffer: " + std::to_string(grads.size()) + " floats for " +
                                    std::to_string(model_.parameter_count) + " parameters");
    for (auto& l : layers_) l->set_gradient_buffer(grads);
}

void Network::reset_layer_times() {
    for (auto& t : times_) t.forward_ms = t.backward_ms = 0;
}

std::vector<std::string> Network::implementations() const {
    std::vector<std::string> out;
    for (const auto& l : layers_)
        for (const auto& impl : l->implementations())
            out.push_back(std::to_string(l->first_index()) + " " + l->kind_label() + " " + impl);
    return out;
}

}  // namespace psrun::nn
