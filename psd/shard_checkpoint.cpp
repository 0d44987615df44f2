#include "psd/shard_checkpoint.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "common/checkpoint_params.h"
#include "common/tensor_file.h"

namespace psrun::psd {
namespace fs = std::filesystem;
namespace {

constexpr float kDigit = 16777216.0f;  // 2^24: every digit is exact in a float

// One saved piece of a tensor: [offset, offset + length) with its parts.
struct Piece {
    std::uint64_t offset = 0, length = 0;
    const std::vector<float>* param = nullptr;
    std::vector<const std::vector<float>*> slots;
    const std::vector<float>* state = nullptr;
    std::string file;
};

}  // namespace

std::string shard_checkpoint_name(std::uint32_t shard, std::uint32_t num_shards) {
    return "ps-" + std::to_string(shard) + "-of-" + std::to_string(num_shards) + ".tensors";
}

Result<void> save_shard_checkpoint(const ShardState& shard, const std::vector<TensorSpec>& tensors,
                                   std::uint32_t index, const std::string& dir) {
    const auto& ids = shard.slice_ids();
    std::vector<std::vector<float>> states(ids.size());
    std::vector<TensorView> views;
    for (std::size_t k = 0; k < ids.size(); ++k) {
        const Slice& s = shard.layout().slices[ids[k]];
        const std::string base = piece_base_name(tensors.at(s.tensor).name, s.offset, s.length);
        auto param = shard.param_slice(k);
        if (!wire::all_finite(param.data(), param.size()))
            return make_error(ErrorCode::kInvalidArgument,
                              "refusing to checkpoint: parameters of " + base + " contain NaN or Inf");
        views.push_back(TensorView{base + "/param", {s.length}, param});
        auto slots = shard.slot_slices(k);
        for (std::size_t j = 0; j < slots.size(); ++j) {
            if (!wire::all_finite(slots[j].data(), slots[j].size()))
                return make_error(ErrorCode::kInvalidArgument,
                                  "refusing to checkpoint: optimizer slot of " + base + " contains NaN or Inf");
            views.push_back(TensorView{base + "/slot" + std::to_string(j), {s.length}, slots[j]});
        }
        const std::uint64_t u = shard.updates(k);
        states[k] = {static_cast<float>(shard.config().optimizer.kind), static_cast<float>(u & 0xFFFFFF),
                     static_cast<float>((u >> 24) & 0xFFFFFF), static_cast<float>(u >> 48),
                     static_cast<float>(shard.tensors().at(s.tensor).tensor_class)};
        views.push_back(TensorView{base + "/state", {states[k].size()}, states[k]});
    }
    return write_tensor_file(dir + "/" + shard_checkpoint_name(index, shard.layout().num_shards), views);
}

Result<void> load_shard_checkpoint(ShardState& shard, const std::vector<TensorSpec>& tensors,
                                   const wire::InitConfig& config, const std::string& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return make_error(ErrorCode::kNotFound, "checkpoint " + dir + " is not a directory");
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (e.is_regular_file() && name.starts_with("ps-") && name.ends_with(".tensors")) files.push_back(name);
    }
    if (ec) return make_error(ErrorCode::kIo, dir + ": " + ec.message());
    if (files.empty()) return make_error(ErrorCode::kNotFound, "checkpoint " + dir + " holds no psd shard files");
    std::sort(files.begin(), files.end());

    std::vector<std::vector<NamedTensor>> contents;
    std::map<std::string, std::map<std::uint64_t, Piece>> pieces;  // tensor -> offset -> piece
    for (const auto& f : files) {
        auto read = read_tensor_file(dir + "/" + f);
        if (!read) return tl::unexpected(read.error());
        contents.push_back(std::move(*read));
        for (const auto& t : contents.back()) {
            PieceName name;
            if (!parse_piece_name(t.name, name))
                return make_error(ErrorCode::kInvalidArgument, dir + "/" + f + ": unexpected tensor '" + t.name + "'");
            const std::string& part = name.part;
            const std::uint64_t length = name.length;
            auto& p = pieces[name.tensor][name.offset];
            p.offset = name.offset;
            p.length = length;
            p.file = f;
            const bool is_state = part == "state";
            // "state" has 4 floats (kind, update count) or, since tensor classes, 5 (and the class).
            if (is_state ? (t.data.size() != 4 && t.data.size() != 5) : t.data.size() != length)
                return make_error(ErrorCode::kInvalidArgument, dir + "/" + f + ": '" + t.name + "' has the wrong size");
            if (part == "param") p.param = &t.data;
            else if (is_state) p.state = &t.data;
            else if (part.starts_with("slot") && part.size() == 5 && part[4] >= '0' && part[4] <= '1') {
                const std::size_t j = static_cast<std::size_t>(part[4] - '0');
                if (p.slots.size() <= j) p.slots.resize(j + 1, nullptr);
                p.slots[j] = &t.data;
            } else {
                return make_error(ErrorCode::kInvalidArgument, dir + "/" + f + ": unexpected tensor '" + t.name + "'");
            }
        }
    }

    const auto& ids = shard.slice_ids();
    const std::size_t trainable_slots = static_cast<std::size_t>(slot_count(config.optimizer.kind));
    std::vector<std::vector<float>> params(ids.size());
    std::vector<std::vector<std::vector<float>>> slots(ids.size());
    std::vector<std::uint64_t> updates(ids.size(), 0);
    bool kind_changed = false;
    for (std::size_t k = 0; k < ids.size(); ++k) {
        const Slice& s = shard.layout().slices[ids[k]];
        const TensorSpec& spec = tensors.at(s.tensor);
        const std::size_t want_slots = spec.state() ? 0 : trainable_slots;
        params[k].assign(s.length, 0.0f);
        slots[k].assign(want_slots, std::vector<float>(s.length, 0.0f));
        std::uint64_t covered = 0;
        bool first = true;
        for (const auto& [offset, p] : pieces[spec.name]) {
            if (p.offset + p.length > spec.elements())
                return make_error(ErrorCode::kInvalidArgument, dir + "/" + p.file + ": piece of '" + spec.name +
                                                                   "' beyond its size: written for another model");
            const std::uint64_t lo = std::max(s.offset, p.offset), hi = std::min(s.offset + s.length, p.offset + p.length);
            if (lo >= hi) continue;
            if (!p.param || !p.state)
                return make_error(ErrorCode::kInvalidArgument, dir + "/" + p.file + ": piece of '" + spec.name + "' is incomplete");
            const auto& st = *p.state;
            const auto saved_class = st.size() == 5 ? st[4] : static_cast<float>(TensorClass::kTrainable);
            if (saved_class != static_cast<float>(spec.tensor_class))
                return make_error(ErrorCode::kInvalidArgument,
                                  dir + "/" + p.file + ": '" + spec.name + "' was saved as a " +
                                      (saved_class == static_cast<float>(TensorClass::kState) ? "state" : "trainable") +
                                      " tensor, the model has it as " + std::string(to_string(spec.tensor_class)) +
                                      ": written for another model");
            if (first) {
                kind_changed = kind_changed || st[0] != static_cast<float>(config.optimizer.kind);
                updates[k] = static_cast<std::uint64_t>(st[1]) | (static_cast<std::uint64_t>(st[2]) << 24) |
                             (static_cast<std::uint64_t>(st[3]) << 48);
                first = false;
            }
            std::copy_n(p.param->begin() + (lo - p.offset), hi - lo, params[k].begin() + (lo - s.offset));
            if (st[0] == static_cast<float>(config.optimizer.kind) && p.slots.size() == want_slots)
                for (std::size_t j = 0; j < want_slots; ++j)
                    if (p.slots[j])
                        std::copy_n(p.slots[j]->begin() + (lo - p.offset), hi - lo, slots[k][j].begin() + (lo - s.offset));
            covered += hi - lo;
        }
        if (covered != s.length)
            return make_error(ErrorCode::kInvalidArgument, "checkpoint " + dir + " does not hold all of '" + spec.name +
                                                               "' [" + std::to_string(s.offset) + ", " +
                                                               std::to_string(s.offset + s.length) + ")");
        if (!wire::all_finite(params[k].data(), params[k].size()))
            return make_error(ErrorCode::kInvalidArgument, "checkpoint " + dir + ": '" + spec.name + "' holds NaN or Inf");
    }
    if (kind_changed) {
        spdlog::warn("checkpoint {} was saved with another optimizer kind: optimizer slots start fresh", dir);
        for (auto& s : slots) s.clear();
        std::fill(updates.begin(), updates.end(), 0);
    }
    std::vector<std::span<const float>> spans(params.begin(), params.end());
    shard.load(config, spans, slots, updates);
    return {};
}

}  // namespace psrun::psd
