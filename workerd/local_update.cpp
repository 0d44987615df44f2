#include "workerd/local_update.h"

#include <algorithm>

namespace psrun::worker {

LocalUpdate::LocalUpdate(const OptimizerConfig& config, const std::vector<TensorInfo>& tensors, int chunks)
    : chunks_(std::max(1, chunks)) {
    if (config.kind == OptimizerKind::kLamb) {
        for (const auto& t : tensors) {
            LambTensor lt{t.offset, t.size, t.tensor_class == TensorClass::kState, false, std::nullopt};
            if (!lt.state) {
                lt.optimizer.emplace(config.for_tensor(t.name, t.shape.size()), t.size);
                lt.decay = lt.optimizer->config().weight_decay > 0.0f;  // resolved by for_tensor()
            }
            for (std::size_t b = 0; b < t.size; b += kLambBlockFloats)
                lamb_blocks_.push_back({lamb_tensors_.size(), b, std::min(t.size, b + kLambBlockFloats)});
            lamb_tensors_.push_back(std::move(lt));
        }
        return;
    }
    const std::size_t n = static_cast<std::size_t>(chunks_);
    const std::size_t total = tensors.empty() ? 0 : tensors.back().offset + tensors.back().size;
    for (std::size_t c = 0; c <= n; ++c) chunk_begin_.push_back(std::min(total, (total * c / n + 15) / 16 * 16));
    chunk_begin_.back() = total;
    runs_.resize(n);
    for (std::size_t c = 0; c < n; ++c) {
        const std::size_t lo = chunk_begin_[c], hi = chunk_begin_[c + 1];
        optimizers_.emplace_back(config, hi - lo);
        for (const auto& t : tensors) {
            const std::size_t b = std::max(lo, t.offset), e = std::min(hi, t.offset + t.size);
            if (b >= e) continue;
            const bool state = t.tensor_class == TensorClass::kState;
            OptimizerConfig tensor = config.for_tensor(t.name, t.shape.size());
            auto& runs = runs_[c];
            const auto same = [&](const Run& r) {
                return r.state == state && r.tensor.weight_decay == tensor.weight_decay &&
                       r.tensor.lr_multiplier == tensor.lr_multiplier && r.end == b - lo;
            };
            if (!runs.empty() && same(runs.back())) runs.back().end = e - lo;
            else runs.push_back(Run{b - lo, e - lo, state, std::move(tensor)});
        }
    }
}

void LocalUpdate::apply(std::span<float> params, std::span<const float> grads) {
    if (optimizers_.empty()) return apply_lamb(params, grads);  // kLamb (chunks_ >= 1 otherwise)
    const int chunks = static_cast<int>(optimizers_.size());
#pragma omp parallel for num_threads(chunks) schedule(static, 1)
    for (int c = 0; c < chunks; ++c) {
        const auto i = static_cast<std::size_t>(c);
        const std::size_t begin = chunk_begin_[i], size = chunk_begin_[i + 1] - begin;
        const auto p = params.subspan(begin, size);
        const auto g = grads.subspan(begin, size);
        auto& optimizer = optimizers_[i];
        optimizer.begin_update();
        for (const auto& run : runs_[i]) {
            if (run.state) subtract_range(p, g, run.begin, run.end);
            else optimizer.apply_range(p, g, run.begin, run.end, run.tensor);
        }
    }
}

// Phase 1 over every trainable block, each tensor's trust ratio, phase 2 over every block (state
// tensors: params -= grads there). Blocks start on kLambBlockFloats edges of their tensor.
void LocalUpdate::apply_lamb(std::span<float> params, std::span<const float> grads) {
    for (auto& t : lamb_tensors_)
        if (!t.state) t.optimizer->begin_update();
    const int blocks = static_cast<int>(lamb_blocks_.size());
#pragma omp parallel for num_threads(chunks_) schedule(static)
    for (int i = 0; i < blocks; ++i) {
        const LambBlock& b = lamb_blocks_[static_cast<std::size_t>(i)];
        auto& t = lamb_tensors_[b.tensor];
        if (!t.state)
            t.optimizer->lamb_moments(params.subspan(t.offset, t.size), grads.subspan(t.offset, t.size), b.begin, b.end,
                                      t.decay);
    }
    for (auto& t : lamb_tensors_)
        if (!t.state) t.optimizer->lamb_finish();
#pragma omp parallel for num_threads(chunks_) schedule(static)
    for (int i = 0; i < blocks; ++i) {
        const LambBlock& b = lamb_blocks_[static_cast<std::size_t>(i)];
        auto& t = lamb_tensors_[b.tensor];
        const auto p = params.subspan(t.offset, t.size);
        if (t.state) subtract_range(p, grads.subspan(t.offset, t.size), b.begin, b.end);
        else t.optimizer->lamb_step(p, b.begin, b.end, t.decay);
    }
}

}  // namespace psrun::worker
