// Trainer's gradient accumulation (workerd/trainer.h, --accumulate-steps): the micro-batches of
// one update, their gradients summed (and averaged with a mean loss) into grads(), the dense
// tensors' and the sparse tables' gradient rows alike; and, with sparse tables, the drawing of
// the update's micro-batches before the rows are pulled (workerd/step_batches.h).
#include <algorithm>

#include "workerd/trainer.h"

namespace psrun::worker {

void Trainer::load_step_batches() {
    nn::Network& n = *network_;
    const std::int64_t batch = config_.network.batch_size;
    if (config_.accumulate_steps == 1) {
        load_batch();
        sparse_.map_batch([&n](std::size_t input) { return n.input_ids(input); }, batch, n.options().batch_size);
        return;
    }
    // All micro-batches first, their ids mapped together: each local table holds the union of the
    // update's ids, pulled once, and every micro-batch trains on the same rows.
    if (!step_batches_) step_batches_ = std::make_unique<StepBatches>(n, config_.accumulate_steps);
    for (int k = 0; k < config_.accumulate_steps; ++k) {
        load_batch();
        step_batches_->save(n, k);
        if (sparse_.keyed()) sparse_.keep_raw(k, config_.accumulate_steps, batch);  // raw ids beside them
    }
    const std::int64_t examples = batch * config_.accumulate_steps;
    sparse_.map_batch([this](std::size_t input) { return step_batches_->ids(input); }, examples, examples);
}

float Trainer::accumulate(float first_loss) {
    const int n = config_.accumulate_steps;
    if (scratch_.empty()) scratch_.emplace_back(params_.tensors(), params_.tail().size());
    const auto p = params_.all();
    const auto g = grads().all();
    const auto s = scratch_[0].all();
    const auto& tensors = params_.tensors();
    // The first micro-batch's state deltas go into the parameters now: the next micro-batch's
    // moving statistics start from them, as PyTorch's running stats do.
    state_start_.clear();
    for (const auto& t : tensors) {
        if (t.tensor_class != TensorClass::kState) continue;
        state_start_.insert(state_start_.end(), p.begin() + t.offset, p.begin() + t.offset + t.size);
        for (std::size_t i = t.offset; i < t.offset + t.size; ++i) p[i] -= g[i];
    }
    struct Rebind {  // the network writes grads() again afterwards, whatever happens
        Trainer& trainer;
        ~Rebind() { trainer.network_->set_gradient_buffer(trainer.network_grads(trainer.grads())); }
    } rebind{*this};
    network_->set_gradient_buffer(network_grads(scratch_[0]));
    double loss = first_loss;
    // The sparse tables' gradient rows (the union of the micro-batches' ids, the same local rows in both buffers).
    const std::vector<std::span<float>> g_rows = sparse_.grad_rows(grads().tail());
    const std::vector<std::span<float>> s_rows = sparse_.grad_rows(scratch_[0].tail());
    for (int k = 1; k < n; ++k) {
        loss += micro_batch(k);
        for (std::size_t t = 0; t < g_rows.size(); ++t)
            for (std::size_t i = 0; i < g_rows[t].size(); ++i) g_rows[t][i] += s_rows[t][i];
        for (const auto& t : tensors) {
            const auto begin = static_cast<std::int64_t>(t.offset), end = begin + static_cast<std::int64_t>(t.size);
            if (t.tensor_class == TensorClass::kState) {
                for (auto i = begin; i < end; ++i) p[i] -= s[i];
                continue;
            }
#pragma omp parallel for schedule(static) if (end - begin >= (1 << 16))
            for (auto i = begin; i < end; ++i) g[i] += s[i];
        }
    }
    // A mean loss over N x B examples is the mean of the N micro-batches' means; a sum, their sum.
    const bool mean = config_.model->reduction == nn::LossReduction::kMean;
    const float scale = 1.0f / static_cast<float>(n);
    std::size_t saved = 0;
    for (const auto& t : tensors) {
        const auto begin = static_cast<std::int64_t>(t.offset), end = begin + static_cast<std::int64_t>(t.size);
        if (t.tensor_class == TensorClass::kState) {  // the whole delta, sent as one; the parameters back
            for (auto i = begin; i < end; ++i, ++saved) {
                g[i] = state_start_[saved] - p[i];
                p[i] = state_start_[saved];
            }
            continue;
        }
        if (!mean) continue;
#pragma omp parallel for schedule(static) if (end - begin >= (1 << 16))
        for (auto i = begin; i < end; ++i) g[i] *= scale;
    }
    if (mean)
        for (auto rows : g_rows)
            for (float& v : rows) v *= scale;
    return static_cast<float>(mean ? loss / n : loss);
}

}  // namespace psrun::worker
