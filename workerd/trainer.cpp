#include "workerd/trainer.h"

#include <algorithm>
#include <chrono>

#include <omp.h>

#include "common/result.h"
#include "workerd/data/memory_source.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/rng.h"

namespace psrun::worker {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
// Room for the second buffer reserved: growing never moves grads_[0], which the models reference.
std::vector<ParameterSet> make_grads(const std::vector<TensorInfo>& tensors) {
    std::vector<ParameterSet> grads;
    grads.reserve(2);
    grads.emplace_back(tensors);
    return grads;
}

const nn::ModelDescription& required(const TrainerConfig& config) {
    if (!config.model) throw std::invalid_argument("TrainerConfig without a model");
    return *config.model;
}

std::unique_ptr<nn::Network> make_network(const nn::ModelDescription& model, nn::NetworkOptions options,
                                          std::span<const float> params, std::span<float> grads) {
    auto created = nn::Network::create(model, options, params, grads);
    if (!created) throw UsageError(created.error().message);
    return std::move(*created);
}

// The network's batch buffers: float or id inputs (the other span is empty), class labels or
// target vectors (as its loss reads them; the other is empty).
BatchView batch_view(nn::Network& network) {
    return {network.input(), network.input_ids(), network.labels(), network.targets()};
}
}  // namespace

Trainer::Trainer(const TrainerConfig& config, const LabeledImages& train, const LabeledImages& test)
    : Trainer(config,
              std::make_unique<MemorySource>(train, static_cast<std::size_t>(config.network.batch_size), config.seed,
                                             config.shard),
              std::make_unique<MemoryEvalSource>(test)) {}

Trainer::Trainer(const TrainerConfig& config, std::unique_ptr<BatchSource> train, std::unique_ptr<EvalSource> test)
    : config_(config),
      train_(std::move(train)),
      test_(std::move(test)),
      params_(model_tensors(required(config))),
      grads_(make_grads(params_.tensors())),
      synthetic_(config.synthetic_compute_ms, config.synthetic_jitter, config.seed,
                 static_cast<std::uint32_t>(config.shard.index)),
      update_(config.optimizer, params_.tensors(), std::max(1, omp_get_max_threads())) {
    config_.network.forward_only = false;
    network_ = make_network(*config_.model, config_.network, params_.all(), grads_[0].all());
    nn::initialize_parameters(*config_.model, config.seed, params_.all());
}

float Trainer::compute_gradients() {
    if (config_.synthetic_compute_ms > 0) {
        synthetic_.run();
        grads().fill(1e-7f);  // real size and shape; small enough that the parameters barely move
        ++local_step_;
        return 0.0f;
    }
    const auto t0 = Clock::now();
    BatchView view = batch_view(*network_);
    train_->next_batch(view);
    data_ms_ += ms_since(t0);
    // A dropout mask per (seed, worker, step): workers never share masks.
    Rng rng(config_.seed ^ (0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(config_.shard.index)),
            local_step_++);
    return network_->train_step(rng.next());
}

void Trainer::swap_gradient_buffers() {
    if (external_grads_.size() == 1) external_grads_.clear();  // one view cannot alternate: own buffers
    if (external_grads_.empty() && grads_.size() < 2) grads_.emplace_back(params_.tensors());
    current_grads_ = 1 - current_grads_;
    network_->set_gradient_buffer(grad_buffer(current_grads_).all());
}

void Trainer::use_gradient_memory(const std::vector<std::span<float>>& buffers) {
    external_grads_.clear();
    for (auto b : buffers) external_grads_.emplace_back(params_.tensors(), b);
    current_grads_ = 0;
    network_->set_gradient_buffer(grad_buffer(0).all());
}

void Trainer::apply_gradients() {
    const auto t0 = Clock::now();
    update_.apply(params_.all(), grads().all());
    ++global_step_;
    update_ms_ += ms_since(t0);
}

EvalMetrics Trainer::evaluate() {
    if (!eval_network_) {
        nn::NetworkOptions options = config_.network;
        options.forward_only = true;
        const auto batch = static_cast<std::size_t>(config_.eval_batch_size);
        options.batch_size = static_cast<std::int64_t>(test_->size() ? std::min(batch, test_->size()) : batch);
        eval_network_ = make_network(*config_.model, options, params_.all(), {});
    }
    nn::Network& m = *eval_network_;
    const std::size_t batch = static_cast<std::size_t>(m.options().batch_size);
    BatchView view = batch_view(m);
    EvalAccumulator sums(config_.model->loss, config_.model->classes);
    test_->rewind();
    while (const std::size_t valid = test_->next(view, batch)) {
        m.forward(false);
        sums.add(m.outputs(), m.labels(), m.targets(), valid);
    }
    return sums.result();
}

}  // namespace psrun::worker
