#include "workerd/trainer.h"

#include <algorithm>
#include <chrono>

#include <omp.h>

#include "workerd/rng.h"

namespace psrun::worker {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
// Room for the second buffer reserved: growing never moves grads_[0], which the models reference.
std::vector<ParameterSet> make_grads(const ModelShape& shape) {
    std::vector<ParameterSet> grads;
    grads.reserve(2);
    grads.emplace_back(shape);
    return grads;
}
}  // namespace

Trainer::Trainer(const TrainerConfig& config, const LabeledImages& train, const LabeledImages& test)
    : config_(config),
      train_(train),
      test_(test),
      params_(config.model.shape),
      grads_(make_grads(config.model.shape)),
      sampler_(train.size(), config.seed, config.shard),
      model_(std::make_unique<Model>(config.model, params_, grads_[0])),
      batch_indices_(static_cast<std::size_t>(config.model.batch_size)) {
    params_.init_tutorial(config.seed);
    const std::size_t chunks = static_cast<std::size_t>(std::max(1, omp_get_max_threads()));
    const std::size_t total = params_.size();
    for (std::size_t c = 0; c <= chunks; ++c) {
        chunk_begin_.push_back(std::min(total, (total * c / chunks + 15) / 16 * 16));
    }
    for (std::size_t c = 0; c < chunks; ++c) {
        optimizers_.emplace_back(config.optimizer, chunk_begin_[c + 1] - chunk_begin_[c]);
    }
}

float Trainer::compute_gradients() {
    const auto t0 = Clock::now();
    sampler_.next_batch(batch_indices_);
    fill_batch(train_, batch_indices_, model_->input(), model_->labels());
    data_ms_ += ms_since(t0);
    // A dropout mask per (seed, worker, step): workers never share masks.
    Rng rng(config_.seed ^ (0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(config_.shard.index)),
            local_step_++);
    return model_->train_step(rng.next());
}

void Trainer::swap_gradient_buffers() {
    if (external_grads_.size() == 1) external_grads_.clear();  // one view cannot alternate: own buffers
    if (external_grads_.empty() && grads_.size() < 2) grads_.emplace_back(config_.model.shape);
    current_grads_ = 1 - current_grads_;
    model_->set_gradient_buffer(grad_buffer(current_grads_));
}

void Trainer::use_gradient_memory(const std::vector<std::span<float>>& buffers) {
    external_grads_.clear();
    for (auto b : buffers) external_grads_.emplace_back(config_.model.shape, b);
    current_grads_ = 0;
    model_->set_gradient_buffer(grad_buffer(0));
}

void Trainer::apply_gradients() {
    const auto t0 = Clock::now();
    const auto p = params_.all();
    const auto g = grads().all();
    const int chunks = static_cast<int>(optimizers_.size());
#pragma omp parallel for num_threads(chunks) schedule(static, 1)
    for (int c = 0; c < chunks; ++c) {
        const std::size_t begin = chunk_begin_[static_cast<std::size_t>(c)];
        const std::size_t size = chunk_begin_[static_cast<std::size_t>(c) + 1] - begin;
        optimizers_[static_cast<std::size_t>(c)].apply(p.subspan(begin, size),
                                                        g.subspan(begin, size));
    }
    ++global_step_;
    update_ms_ += ms_since(t0);
}

double Trainer::evaluate() {
    if (!eval_model_) {
        ModelConfig mc = config_.model;
        mc.forward_only = true;
        mc.batch_size = static_cast<int>(
            std::min<std::size_t>(static_cast<std::size_t>(config_.eval_batch_size), test_.size()));
        eval_model_ = std::make_unique<Model>(mc, params_, grads_[0]);  // never writes grads
    }
    Model& m = *eval_model_;
    const std::size_t batch = static_cast<std::size_t>(m.config().batch_size);
    std::vector<std::uint32_t> indices(batch);
    std::size_t correct = 0;
    for (std::size_t start = 0; start < test_.size(); start += batch) {
        const std::size_t valid = std::min(batch, test_.size() - start);
        // The last partial batch repeats example 0 in the unused slots; they are not counted.
        for (std::size_t i = 0; i < batch; ++i) {
            indices[i] = static_cast<std::uint32_t>(i < valid ? start + i : 0);
        }
        fill_batch(test_, indices, m.input(), m.labels());
        m.forward(false);
        const auto pred = m.predictions();
        const auto labels = m.labels();
        for (std::size_t i = 0; i < valid; ++i) correct += pred[i] == labels[i] ? 1 : 0;
    }
    return static_cast<double>(correct) / static_cast<double>(test_.size());
}

}  // namespace psrun::worker
