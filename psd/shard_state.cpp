#include "psd/shard_state.h"

#include "psd/torn_guard.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

namespace psrun::psd {
namespace {

constexpr std::size_t kMaxBuffers = 4;
// Below this many floats the update runs on the calling thread (waking helpers costs more).
constexpr std::size_t kParallelUpdateFloats = 1 << 16;
// apply() with a mirror: update this many floats, then copy them while they are still in L2.
constexpr std::size_t kMirrorBlockFloats = 1 << 14;

}  // namespace

ShardState::ShardState(ShardLayout layout, std::uint32_t shard, std::vector<TensorSpec> tensors)
    : layout_(std::move(layout)),
      shard_(shard),
      tensors_(std::move(tensors)),
      fingerprint_(tensors_fingerprint(tensors_)),
      rows_(layout_, shard_, tensors_) {
    slice_ids_ = layout_.slices_of(shard_);
    for (auto id : slice_ids_) {
        local_offsets_.push_back(size_);
        size_ += layout_.slices[id].length;
        state_.push_back(tensors_.at(layout_.slices[id].tensor).state());
    }
    buffers_.push_back(std::make_unique<ParamBuffer>());
    buffers_[0]->data.assign(size_, 0.0f);
}

void ShardState::make_optimizers() {
    optimizers_.clear();
    optimizers_.reserve(slice_ids_.size());
    // A state slice's optimizer is never applied: plain SGD keeps no slots and counts its updates.
    const OptimizerConfig none{.kind = OptimizerKind::kSgd, .learning_rate = 1.0f};
    for (std::size_t k = 0; k < slice_ids_.size(); ++k) {
        const TensorSpec& t = tensors_[layout_.slices[slice_ids_[k]].tensor];
        // Trainable: the tensor's own learning-rate multiplier and weight decay (--param-group).
        optimizers_.emplace_back(state_[k] ? none : config_.optimizer.for_tensor(t.name, t.shape.size()),
                                 layout_.slices[slice_ids_[k]].length);
    }
}

void ShardState::init(const wire::InitConfig& config, const std::vector<std::span<const float>>& params) {
    const TornGuard guard(torn_);
    rows_.init(config.optimizer);
    set_dense(config, params);
}

void ShardState::set_dense(const wire::InitConfig& config, const std::vector<std::span<const float>>& params) {
    config_ = config;
    float* dst = writable();
    for (std::size_t k = 0; k < params.size(); ++k)
        std::memcpy(dst + local_offsets_[k], params[k].data(), params[k].size_bytes());
    make_optimizers();
    average_.reset(config.optimizer.ema_decay, param_slices());
    step_ = config.start_step;
    last_step_ = config.last_step;
    initialized_ = true;
    dry_run_ = false;
}

void ShardState::restore(const wire::InitConfig& config) {
    const TornGuard guard(torn_);
    const bool kind_changed = config.optimizer.kind != config_.optimizer.kind || optimizers_.empty();
    const auto updates = optimizers_.empty() ? 0 : optimizers_[0].updates();
    std::vector<std::vector<float>> saved_slots;
    if (!kind_changed)
        for (auto& o : optimizers_)
            for (auto s : o.slots()) saved_slots.emplace_back(s.begin(), s.end());
    config_.optimizer = config.optimizer;
    config_.last_step = config.last_step;
    last_step_ = config.last_step;
    rows_.restore(config.optimizer);
    make_optimizers();
    average_.retune(config.optimizer.ema_decay, param_slices());
    if (!kind_changed) {
        std::size_t next = 0;
        for (auto& o : optimizers_) {
            o.set_updates(updates);
            for (auto s : o.slots()) std::memcpy(s.data(), saved_slots[next++].data(), s.size_bytes());
        }
    }
}

std::span<const float> ShardState::param_slice(std::size_t k) const {
    return {buffers_[current_]->data.data() + local_offsets_[k], layout_.slices[slice_ids_[k]].length};
}

std::vector<std::span<const float>> ShardState::param_slices() const {
    std::vector<std::span<const float>> out;
    for (std::size_t k = 0; k < slice_ids_.size(); ++k) out.push_back(param_slice(k));
    return out;
}

std::vector<std::span<const float>> ShardState::slot_slices(std::size_t k) const {
    std::vector<std::span<const float>> out;
    if (k >= optimizers_.size()) return out;
    for (auto s : const_cast<Optimizer&>(optimizers_[k]).slots()) out.emplace_back(s.data(), s.size());
    return out;
}

std::uint64_t ShardState::updates(std::size_t k) const { return k < optimizers_.size() ? optimizers_[k].updates() : 0; }

void ShardState::load(const wire::InitConfig& config, const std::vector<std::span<const float>>& params,
                      const std::vector<std::vector<std::vector<float>>>& slots,
                      const std::vector<std::uint64_t>& updates, std::vector<std::vector<float>> average) {
    const TornGuard guard(torn_);
    set_dense(config, params);
    if (!average.empty() && average_.enabled()) average_.set(config.optimizer.ema_decay, std::move(average));
    for (std::size_t k = 0; k < optimizers_.size(); ++k) {
        auto dst = optimizers_[k].slots();
        if (k < slots.size() && slots[k].size() == dst.size())
            for (std::size_t j = 0; j < dst.size(); ++j)
                std::memcpy(dst[j].data(), slots[k][j].data(), dst[j].size_bytes());
        if (k < updates.size()) optimizers_[k].set_updates(updates[k]);
    }
}

float* ShardState::writable() {
    ++version_;
    if (buffers_[current_]->holds.load(std::memory_order_acquire) == 0) return buffers_[current_]->data.data();
    std::size_t target = buffers_.size();
    while (target == buffers_.size()) {
        for (std::size_t i = 0; i < buffers_.size(); ++i)
            if (i != current_ && buffers_[i]->holds.load(std::memory_order_acquire) == 0) target = i;
        if (target == buffers_.size() && buffers_.size() < kMaxBuffers) {
            buffers_.push_back(std::make_unique<ParamBuffer>());
            buffers_.back()->data.resize(size_);
            target = buffers_.size() - 1;
        }
        if (target == buffers_.size()) std::this_thread::yield();  // all held: ZeroMQ frees them soon
    }
    std::memcpy(buffers_[target]->data.data(), buffers_[current_]->data.data(), size_ * sizeof(float));
    current_ = target;
    return buffers_[current_]->data.data();
}

void ShardState::apply(const std::vector<std::span<const float>>& grads, ThreadTeam* team, std::span<float> mirror,
                       std::span<const RowSlice> rows) {
    const TornGuard guard(torn_);
    if (dry_run_) {
        ++step_;
        if (!mirror.empty()) copy_params_to(mirror, team);
        return;
    }
    float* dst = writable();
    for (auto& o : optimizers_) o.begin_update();
    const int parts = (team && size_ >= kParallelUpdateFloats) ? team->size() : 1;
    const bool lamb = config_.optimizer.kind == OptimizerKind::kLamb;
    if (lamb) {  // LAMB's phase 1 (common/lamb.h): m, v and each slice's norms, then its trust ratio
        auto moments = [&](int part) {
            for (std::size_t k = 0; k < grads.size(); ++k) {
                if (state_[k]) continue;
                const auto [begin, end] = lamb_block_range(grads[k].size(), part, parts);
                optimizers_[k].lamb_moments({dst + local_offsets_[k], grads[k].size()}, grads[k], begin, end,
                                            optimizers_[k].config().weight_decay > 0.0f);
            }
        };
        if (parts == 1) moments(0);
        else team->run(moments);
        for (std::size_t k = 0; k < grads.size(); ++k)
            if (!state_[k]) optimizers_[k].lamb_finish();
    }
    auto update = [&](int part) {
        for (std::size_t k = 0; k < grads.size(); ++k) {
            const auto [begin, end] = part_range(grads[k].size(), part, parts);
            const std::span<float> params(dst + local_offsets_[k], grads[k].size());
            const bool decay = optimizers_[k].config().weight_decay > 0.0f;  // resolved by for_tensor()
            auto step = [&](std::size_t b, std::size_t e) {
                if (state_[k]) subtract_range(params, grads[k], b, e);
                else if (lamb) optimizers_[k].lamb_step(params, b, e, decay);  // phase 2
                else optimizers_[k].apply_range(params, grads[k], b, e, decay);
                average_.update_range(k, params, b, e);
            };
            if (mirror.empty()) {
                step(begin, end);
                continue;
            }
            float* out = mirror.data() + layout_.slices[slice_ids_[k]].flat_offset;
            for (std::size_t b = begin; b < end; b += kMirrorBlockFloats) {
                const std::size_t e = std::min(end, b + kMirrorBlockFloats);
                step(b, e);
                std::memcpy(out + b, params.data() + b, (e - b) * sizeof(float));
            }
        }
    };
    if (parts == 1) update(0);
    else team->run(update);
    average_.finish_update();
    update_rows(rows);
    ++step_;
}

void ShardState::apply_rows(std::span<const RowSlice> rows) {
    if (rows.empty() || dry_run_) return;
    const TornGuard guard(torn_);
    update_rows(rows);
}

void ShardState::update_rows(std::span<const RowSlice> rows) {
    rows_.begin_update();
    for (const auto& r : rows) {
        if (rows_.table(r.table).keyed) rows_.apply(r.table, r.keys, r.values);
        else rows_.apply(r.table, r.ids, r.values);
    }
}

void ShardState::copy_params_to(std::span<float> full, ThreadTeam* team) const {
    const float* src = buffers_[current_]->data.data();
    const int parts = (team && size_ >= kParallelUpdateFloats) ? team->size() : 1;
    auto copy = [&](int part) {
        for (std::size_t k = 0; k < slice_ids_.size(); ++k) {
            const std::size_t length = layout_.slices[slice_ids_[k]].length;
            const auto [begin, end] = part_range(length, part, parts);
            std::memcpy(full.data() + layout_.slices[slice_ids_[k]].flat_offset + begin,
                        src + local_offsets_[k] + begin, (end - begin) * sizeof(float));
        }
    };
    if (parts == 1) copy(0);
    else team->run(copy);
}

std::size_t ShardState::optimizer_floats() const {
    std::size_t n = 0;
    for (std::size_t k = 0; k < slice_ids_.size(); ++k)
        if (!state_[k]) n += layout_.slices[slice_ids_[k]].length;
    return n * static_cast<std::size_t>(slot_count(config_.optimizer.kind));
}

}  // namespace psrun::psd
