#include "psd/shard_state.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "common/tensor_file.h"

namespace psrun::psd {
namespace {

constexpr std::uint32_t kShardFileVersion = 4;  // 3: the optimizer config holds the learning-rate decay; 4: and schedule
constexpr std::size_t kMaxBuffers = 4;
// Below this many floats the update runs on the calling thread (waking helpers costs more).
constexpr std::size_t kParallelUpdateFloats = 1 << 16;
// apply() with a mirror: update this many floats, then copy them while they are still in L2.
constexpr std::size_t kMirrorBlockFloats = 1 << 14;

}  // namespace

ShardState::ShardState(ShardLayout layout, std::uint32_t shard, std::vector<TensorSpec> tensors)
    : layout_(std::move(layout)), shard_(shard), tensors_(std::move(tensors)), fingerprint_(tensors_fingerprint(tensors_)) {
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
    for (std::size_t k = 0; k < slice_ids_.size(); ++k)
        optimizers_.emplace_back(state_[k] ? none : config_.optimizer, layout_.slices[slice_ids_[k]].length);
}

void ShardState::init(const wire::InitConfig& config, const std::vector<std::span<const float>>& params) {
    config_ = config;
    float* dst = writable();
    for (std::size_t k = 0; k < params.size(); ++k)
        std::memcpy(dst + local_offsets_[k], params[k].data(), params[k].size_bytes());
    make_optimizers();
    step_ = config.start_step;
    last_step_ = config.last_step;
    initialized_ = true;
    dry_run_ = false;
}

void ShardState::restore(const wire::InitConfig& config) {
    const bool kind_changed = config.optimizer.kind != config_.optimizer.kind || optimizers_.empty();
    const auto updates = optimizers_.empty() ? 0 : optimizers_[0].updates();
    std::vector<std::vector<float>> saved_slots;
    if (!kind_changed)
        for (auto& o : optimizers_)
            for (auto s : o.slots()) saved_slots.emplace_back(s.begin(), s.end());
    config_.optimizer = config.optimizer;
    config_.last_step = config.last_step;
    last_step_ = config.last_step;
    make_optimizers();
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

std::vector<std::span<const float>> ShardState::slot_slices(std::size_t k) const {
    std::vector<std::span<const float>> out;
    if (k >= optimizers_.size()) return out;
    for (auto s : const_cast<Optimizer&>(optimizers_[k]).slots()) out.emplace_back(s.data(), s.size());
    return out;
}

std::uint64_t ShardState::updates(std::size_t k) const {
    return k < optimizers_.size() ? optimizers_[k].updates() : 0;
}

void ShardState::load(const wire::InitConfig& config, const std::vector<std::span<const float>>& params,
                      const std::vector<std::vector<std::vector<float>>>& slots,
                      const std::vector<std::uint64_t>& updates) {
    init(config, params);
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

void ShardState::apply(const std::vector<std::span<const float>>& grads, ThreadTeam* team, std::span<float> mirror) {
    if (dry_run_) {
        ++step_;
        if (!mirror.empty()) copy_params_to(mirror, team);
        return;
    }
    float* dst = writable();
    for (auto& o : optimizers_) o.begin_update();
    const int parts = (team && size_ >= kParallelUpdateFloats) ? team->size() : 1;
    auto update = [&](int part) {
        for (std::size_t k = 0; k < grads.size(); ++k) {
            const auto [begin, end] = part_range(grads[k].size(), part, parts);
            const std::span<float> params(dst + local_offsets_[k], grads[k].size());
            auto step = [&](std::size_t b, std::size_t e) {
                if (state_[k]) subtract_range(params, grads[k], b, e);
                else optimizers_[k].apply_range(params, grads[k], b, e);
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
    ++step_;
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

// The standby shard file is a tensor file (common/tensor_file.h: CRC-32C per tensor) holding
// "meta" (see kMeta*) and "slice<id>/param", "slice<id>/slot<j>" for each own slice. Integers
// are stored as four base-2^16 digits (exact in float32).
Result<void> ShardState::save(const std::string& path) const {
    const auto& params = buffers_[current_]->data;
    if (!wire::all_finite(params.data(), params.size()))
        return make_error(ErrorCode::kInvalidArgument, "refusing to write shard file " + path +
                                                           ": the parameters contain NaN or Inf");
    std::vector<float> meta;
    auto put_u64 = [&](std::uint64_t v) {
        for (int i = 0; i < 4; ++i) meta.push_back(static_cast<float>((v >> (16 * i)) & 0xFFFF));
    };
    meta.push_back(static_cast<float>(kShardFileVersion));
    put_u64(shard_);
    put_u64(layout_.num_shards);
    put_u64(fingerprint_);
    put_u64(step_);
    put_u64(optimizers_.empty() ? 0 : optimizers_[0].updates());
    put_u64(size_);
    const std::string init = wire::encode_init(config_);  // bytes as floats 0..255
    for (char c : init) meta.push_back(static_cast<float>(static_cast<unsigned char>(c)));
    std::vector<TensorView> views{TensorView{"meta", {meta.size()}, meta}};
    for (std::size_t k = 0; k < slice_ids_.size(); ++k) {
        const std::string base = "slice" + std::to_string(slice_ids_[k]);
        views.push_back(TensorView{base + "/param", {layout_.slices[slice_ids_[k]].length}, param_slice(k)});
        auto slots = slot_slices(k);
        for (std::size_t j = 0; j < slots.size(); ++j)
            views.push_back(TensorView{base + "/slot" + std::to_string(j), {slots[j].size()}, slots[j]});
    }
    const std::string tmp = path + ".tmp";
    if (auto ok = write_tensor_file(tmp, views); !ok) return ok;
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        return make_error(ErrorCode::kIo, "cannot write shard file " + path);
    }
    return {};
}

Result<void> ShardState::load(const std::string& path) {
    if (!std::filesystem::exists(path)) return make_error(ErrorCode::kNotFound, "no shard file " + path);
    auto tensors = read_tensor_file(path);
    if (!tensors) return make_error(tensors.error().code, "shard file " + tensors.error().message);
    auto corrupt = [&](const char* what) {
        return make_error(ErrorCode::kInvalidArgument, "shard file " + path + ": " + what);
    };
    const std::size_t init_size = wire::encode_init(wire::InitConfig{}).size();  // the smallest: constant schedule
    if (tensors->empty() || (*tensors)[0].name != "meta" || (*tensors)[0].data.size() < 1 + 6 * 4 + init_size)
        return corrupt("not a psrun shard file");
    const auto& meta = (*tensors)[0].data;
    std::size_t at = 1;
    auto get_u64 = [&] {
        std::uint64_t v = 0;
        for (int i = 0; i < 4; ++i) v |= static_cast<std::uint64_t>(meta[at++]) << (16 * i);
        return v;
    };
    const auto version = meta[0];
    const auto shard = get_u64(), shards = get_u64(), fingerprint = get_u64(), step = get_u64(), updates = get_u64(),
               size = get_u64();
    if (version != static_cast<float>(kShardFileVersion) || shard != shard_ || shards != layout_.num_shards ||
        fingerprint != fingerprint_ || size != size_)
        return corrupt("written for another model, shard or shard count");
    std::string init;
    for (; at < meta.size(); ++at) init.push_back(static_cast<char>(static_cast<unsigned char>(meta[at])));
    auto config = wire::decode_init(init);
    if (!config) return corrupt("bad optimizer config");
    const std::size_t slots = static_cast<std::size_t>(slot_count(config->optimizer.kind));
    std::size_t expected = 1;
    for (std::size_t k = 0; k < slice_ids_.size(); ++k) expected += 1 + (state_[k] ? 0 : slots);
    if (tensors->size() != expected) return corrupt("wrong number of tensors");
    std::size_t next = 1;
    for (std::size_t k = 0; k < slice_ids_.size(); ++k)
        for (std::size_t j = 0; j <= (state_[k] ? 0 : slots); ++j, ++next)
            if ((*tensors)[next].data.size() != layout_.slices[slice_ids_[k]].length) return corrupt("wrong data size");
    config_ = *config;
    float* dst = writable();
    make_optimizers();
    next = 1;
    for (std::size_t k = 0; k < slice_ids_.size(); ++k) {
        const auto& p = (*tensors)[next++].data;
        std::memcpy(dst + local_offsets_[k], p.data(), p.size() * sizeof(float));
        optimizers_[k].set_updates(updates);
        for (auto s : optimizers_[k].slots()) {
            const auto& v = (*tensors)[next++].data;
            std::memcpy(s.data(), v.data(), s.size_bytes());
        }
    }
    step_ = step;
    last_step_ = config_.last_step;
    initialized_ = true;
    return {};
}

}  // namespace psrun::psd
