#include "psd/shard_state.h"

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "common/coding.h"

namespace psrun::psd {
namespace {

constexpr char kShardMagic[8] = {'P', 'S', 'R', 'N', 'S', 'H', 'R', 'D'};
constexpr std::uint32_t kShardFileVersion = 1;
constexpr std::size_t kMaxBuffers = 4;

std::uint32_t crc_update(std::uint32_t crc, const void* data, std::size_t n) {
    return static_cast<std::uint32_t>(crc32(crc, static_cast<const Bytef*>(data), static_cast<uInt>(n)));
}

}  // namespace

ShardState::ShardState(ShardLayout layout, std::uint32_t shard, std::uint64_t fingerprint)
    : layout_(std::move(layout)), shard_(shard), fingerprint_(fingerprint) {
    slice_ids_ = layout_.slices_of(shard_);
    for (auto id : slice_ids_) {
        local_offsets_.push_back(size_);
        size_ += layout_.slices[id].length;
    }
    buffers_.push_back(std::make_unique<ParamBuffer>());
    buffers_[0]->data.assign(size_, 0.0f);
}

void ShardState::make_optimizers() {
    optimizers_.clear();
    optimizers_.reserve(slice_ids_.size());
    for (auto id : slice_ids_) optimizers_.emplace_back(config_.optimizer, layout_.slices[id].length);
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

void ShardState::apply(const std::vector<std::span<const float>>& grads) {
    if (dry_run_) {
        ++step_;
        return;
    }
    float* dst = writable();
    for (std::size_t k = 0; k < grads.size(); ++k)
        optimizers_[k].apply(std::span<float>(dst + local_offsets_[k], grads[k].size()), grads[k]);
    ++step_;
}

std::size_t ShardState::optimizer_floats() const {
    return size_ * static_cast<std::size_t>(slot_count(config_.optimizer.kind));
}

Result<void> ShardState::save(const std::string& path) const {
    std::string head(kShardMagic, 8);
    put_fixed32(head, kShardFileVersion);
    put_fixed32(head, shard_);
    put_fixed32(head, layout_.num_shards);
    put_fixed64(head, fingerprint_);
    put_fixed64(head, step_);
    put_fixed64(head, optimizers_.empty() ? 0 : optimizers_[0].updates());
    put_fixed64(head, size_);
    const std::string init = wire::encode_init(config_);
    put_fixed32(head, static_cast<std::uint32_t>(init.size()));
    head += init;
    const std::string tmp = path + ".tmp";
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return make_error(ErrorCode::kIo, "cannot write shard file " + tmp);
    std::uint32_t crc = crc_update(0, head.data(), head.size());
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    auto write = [&](const float* data, std::size_t n) {
        crc = crc_update(crc, data, n * sizeof(float));
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(float)));
    };
    write(buffers_[current_]->data.data(), size_);
    for (auto& o : const_cast<std::vector<Optimizer>&>(optimizers_))
        for (auto s : o.slots()) write(s.data(), s.size());
    out.write(reinterpret_cast<const char*>(&crc), 4);
    out.close();
    if (!out || std::rename(tmp.c_str(), path.c_str()) != 0)
        return make_error(ErrorCode::kIo, "cannot write shard file " + path);
    return {};
}

Result<void> ShardState::load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(ErrorCode::kNotFound, "no shard file " + path);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto corrupt = [&](const char* what) {
        return make_error(ErrorCode::kInvalidArgument, "shard file " + path + ": " + what);
    };
    if (bytes.size() < 12 || std::memcmp(bytes.data(), kShardMagic, 8) != 0) return corrupt("not a psrun shard file");
    std::uint32_t stored_crc = 0;
    std::memcpy(&stored_crc, bytes.data() + bytes.size() - 4, 4);
    if (crc_update(0, bytes.data(), bytes.size() - 4) != stored_crc) return corrupt("checksum mismatch (truncated or corrupt)");
    Decoder d(std::string_view(bytes).substr(8, bytes.size() - 12));
    std::uint32_t version = 0, shard = 0, shards = 0, init_size = 0;
    std::uint64_t fingerprint = 0, step = 0, updates = 0, size = 0;
    if (!d.get32(version) || !d.get32(shard) || !d.get32(shards) || !d.get64(fingerprint) || !d.get64(step) ||
        !d.get64(updates) || !d.get64(size) || !d.get32(init_size) || d.remaining() < init_size)
        return corrupt("truncated header");
    if (version != kShardFileVersion || shard != shard_ || shards != layout_.num_shards ||
        fingerprint != fingerprint_ || size != size_)
        return corrupt("written for another model, shard or shard count");
    const std::size_t init_at = bytes.size() - 4 - d.remaining();
    auto config = wire::decode_init(std::string_view(bytes).substr(init_at, init_size));
    if (!config) return corrupt("bad optimizer config");
    const std::size_t data_at = init_at + init_size;
    const std::size_t slots = static_cast<std::size_t>(slot_count(config->optimizer.kind));
    if (bytes.size() - 4 - data_at != size_ * (1 + slots) * sizeof(float)) return corrupt("wrong data size");
    config_ = *config;
    std::memcpy(writable(), bytes.data() + data_at, size_ * sizeof(float));
    make_optimizers();
    std::size_t at = data_at + size_ * sizeof(float);
    for (auto& o : optimizers_) {
        o.set_updates(updates);
        for (auto s : o.slots()) {
            std::memcpy(s.data(), bytes.data() + at, s.size_bytes());
            at += s.size_bytes();
        }
    }
    step_ = step;
    last_step_ = config_.last_step;
    initialized_ = true;
    return {};
}

}  // namespace psrun::psd
