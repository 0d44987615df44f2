#include "psd/shard_checkpoint.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "common/checkpoint_params.h"
#include "common/tensor_file.h"
#include "psd/shard_checkpoint_rows.h"

namespace psrun::psd {
namespace fs = std::filesystem;
namespace {

// One saved piece of a dense tensor: [offset, offset + length) with its parts (entries of a file).
struct Piece {
    std::uint64_t offset = 0, length = 0;
    std::size_t file = 0;
    int param = -1, state = -1, ema = -1;
    std::vector<int> slots;
};

}  // namespace

std::string shard_checkpoint_name(std::uint32_t shard, std::uint32_t num_shards) {
    return "ps-" + std::to_string(shard) + "-of-" + std::to_string(num_shards) + ".tensors";
}

namespace {

// Every view of the shard's file into `out`. `snapshot` (a writer thread reads them while the
// loop updates the shard): the dense slices are copied into out.copies and the rows read through
// the RowStore's snapshot; else views of the shard itself.
Result<void> collect_views(const ShardState& shard, const std::vector<TensorSpec>& tensors, bool snapshot,
                           const RowBlocks* delta, ShardCheckpointImage::Parts& out) {
    const auto& ids = shard.slice_ids();
    out.states.resize(ids.size());
    auto add = [&](const std::string& name, std::span<const float> data, const std::string& what) -> Result<void> {
        if (!wire::all_finite(data.data(), data.size()))
            return make_error(ErrorCode::kInvalidArgument, "refusing to checkpoint: " + what + " contain NaN or Inf");
        if (snapshot) {
            out.copies.emplace_back(data.begin(), data.end());  // its data never move: views stay valid
            data = out.copies.back();
        }
        out.views.push_back(TensorView{name, {data.size()}, data});
        return {};
    };
    for (std::size_t k = 0; k < ids.size(); ++k) {
        const Slice& s = shard.layout().slices[ids[k]];
        const std::string base = piece_base_name(tensors.at(s.tensor).name, s.offset, s.length);
        PSRUN_TRY(add(base + "/param", shard.param_slice(k), "parameters of " + base));
        const auto slots = shard.slot_slices(k);
        for (std::size_t j = 0; j < slots.size(); ++j)
            PSRUN_TRY(add(base + "/slot" + std::to_string(j), slots[j], "optimizer slots of " + base));
        if (auto ema = shard.average().slice(k); !ema.empty())
            PSRUN_TRY(add(base + "/ema", ema, "moving averages of " + base));
        out.states[k] = piece_state(shard.config().optimizer.kind, shard.updates(k), tensors.at(s.tensor).tensor_class);
        out.views.push_back(TensorView{base + "/state", {out.states[k].size()}, out.states[k]});
    }
    return add_row_pieces(shard, tensors, snapshot, delta, out.views, out.row_states,
                          out.keys);  // views of the rows: no copy
}

}  // namespace

Result<void> save_shard_checkpoint(const ShardState& shard, const std::vector<TensorSpec>& tensors, std::uint32_t index,
                                   const std::string& dir, const RowBlocks* delta) {
    ShardCheckpointImage::Parts parts;
    PSRUN_TRY(collect_views(shard, tensors, false, delta, parts));
    return write_tensor_file(dir + "/" + shard_checkpoint_name(index, shard.layout().num_shards), parts.views);
}

Result<std::unique_ptr<ShardCheckpointImage>> ShardCheckpointImage::take(const ShardState& shard,
                                                                         const std::vector<TensorSpec>& tensors,
                                                                         std::uint32_t index, const std::string& dir,
                                                                         const RowBlocks* delta) {
    std::unique_ptr<ShardCheckpointImage> image(new ShardCheckpointImage());
    image->path_ = dir + "/" + shard_checkpoint_name(index, shard.layout().num_shards);
    PSRUN_TRY(collect_views(shard, tensors, true, delta, image->parts_));
    return image;
}

Result<void> ShardCheckpointImage::write(std::stop_token stop) const {
    std::vector<TensorView> views = parts_.views;
    for (auto& view : views)
        if (view.fill)
            view.fill = [inner = std::move(view.fill), stop](std::uint64_t first,
                                                             std::span<float> out) -> Result<void> {
                if (stop.stop_requested()) return make_error(ErrorCode::kIo, "the checkpoint write was stopped");
                return inner(first, out);
            };
    return write_tensor_file(path_, views);
}

Result<void> load_shard_checkpoint(ShardState& shard, const std::vector<TensorSpec>& tensors,
                                   const wire::InitConfig& config, const std::string& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        return make_error(ErrorCode::kNotFound, "checkpoint " + dir + " is not a directory");
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (e.is_regular_file() && name.starts_with("ps-") && name.ends_with(".tensors")) names.push_back(name);
    }
    if (ec) return make_error(ErrorCode::kIo, dir + ": " + ec.message());
    if (names.empty()) return make_error(ErrorCode::kNotFound, "checkpoint " + dir + " holds no psd shard files");
    std::sort(names.begin(), names.end());

    // Index every file from its tensor headers (no data read yet), then verify the files this shard needs.
    std::vector<TensorFileReader> files;
    std::map<std::string, std::map<std::uint64_t, Piece>> pieces;  // dense tensor -> offset -> piece
    RowPieces row_pieces;
    for (std::size_t f = 0; f < names.size(); ++f) {
        PSRUN_TRY_ASSIGN(auto reader, TensorFileReader::open(dir + "/" + names[f], false));
        files.push_back(std::move(reader));
        const auto& entries = files.back().tensors();
        for (std::size_t e = 0; e < entries.size(); ++e) {
            const auto& t = entries[e];
            const std::string where = dir + "/" + names[f];
            PSRUN_TRY_ASSIGN(const bool row_piece, index_row_piece(t, f, e, where, row_pieces));
            if (row_piece) continue;
            PieceName name;
            if (!parse_piece_name(t.name, name))
                return invalid_argument(where + ": unexpected tensor '" + t.name + "'");
            auto& p = pieces[name.tensor][name.offset];
            p.offset = name.offset;
            p.length = name.length;
            p.file = f;
            const bool is_state = name.part == "state";
            // "state" has 4 floats (kind, update count) or, since tensor classes, 5 (and the class).
            if (is_state ? (t.count != 4 && t.count != 5) : t.count != name.length)
                return invalid_argument(where + ": '" + t.name + "' has the wrong size");
            if (name.part == "param") p.param = static_cast<int>(e);
            else if (name.part == "ema") p.ema = static_cast<int>(e);
            else if (is_state) p.state = static_cast<int>(e);
            else if (name.part.starts_with("slot") && name.part.size() == 5 && name.part[4] >= '0' &&
                     name.part[4] <= '1') {
                const std::size_t j = static_cast<std::size_t>(name.part[4] - '0');
                if (p.slots.size() <= j) p.slots.resize(j + 1, -1);
                p.slots[j] = static_cast<int>(e);
            } else {
                return invalid_argument(where + ": unexpected tensor '" + t.name + "'");
            }
        }
    }

    // Differential pieces: their bases' pieces are planned and loaded, then their own rows laid over.
    PSRUN_TRY_ASSIGN(const RowDeltas row_deltas, resolve_row_deltas(dir, names, files, row_pieces));

    const auto& ids = shard.slice_ids();
    const std::size_t trainable_slots = static_cast<std::size_t>(slot_count(config.optimizer.kind));
    std::vector<std::vector<float>> params(ids.size());
    std::vector<std::vector<std::vector<float>>> slots(ids.size());
    std::vector<std::uint64_t> updates(ids.size(), 0);
    // The moving average (--ema-decay): loaded only when every piece of every own slice has one.
    const bool want_average = config.optimizer.ema_decay > 0.0f;
    bool has_average = want_average;
    std::vector<std::vector<float>> average(want_average ? ids.size() : 0);
    bool kind_changed = false;
    auto verified = [&](std::size_t f) -> Result<void> { return files[f].verify(); };  // CRCs, once per file
    auto read = [&](std::size_t f, int e, std::uint64_t first, std::span<float> out) -> Result<void> {
        if (auto ok = verified(f); !ok) return ok;
        return files[f].read(static_cast<std::size_t>(e), first, out);
    };
    for (std::size_t k = 0; k < ids.size(); ++k) {
        const Slice& s = shard.layout().slices[ids[k]];
        const TensorSpec& spec = tensors.at(s.tensor);
        const std::size_t want_slots = spec.state() ? 0 : trainable_slots;
        params[k].assign(s.length, 0.0f);
        slots[k].assign(want_slots, std::vector<float>(s.length, 0.0f));
        if (want_average) average[k].assign(s.length, 0.0f);
        std::uint64_t covered = 0;
        bool first = true;
        if (row_pieces.contains(spec.name))
            return make_error(ErrorCode::kInvalidArgument,
                              "checkpoint " + dir + " holds '" + spec.name +
                                  "' as a sparse table, the model has it as a dense tensor");
        for (const auto& [offset, p] : pieces[spec.name]) {
            const std::string where = dir + "/" + names[p.file];
            if (p.offset + p.length > spec.elements())
                return make_error(ErrorCode::kInvalidArgument,
                                  where + ": piece of '" + spec.name + "' beyond its size: written for another model");
            const std::uint64_t lo = std::max(s.offset, p.offset),
                                hi = std::min(s.offset + s.length, p.offset + p.length);
            if (lo >= hi) continue;
            if (p.param < 0 || p.state < 0)
                return make_error(ErrorCode::kInvalidArgument, where + ": piece of '" + spec.name + "' is incomplete");
            std::vector<float> st(files[p.file].tensors()[static_cast<std::size_t>(p.state)].count);
            PSRUN_TRY(read(p.file, p.state, 0, st));
            const auto saved_class = st.size() == 5 ? st[4] : static_cast<float>(TensorClass::kTrainable);
            if (saved_class != static_cast<float>(spec.tensor_class))
                return make_error(ErrorCode::kInvalidArgument,
                                  where + ": '" + spec.name + "' was saved as a " +
                                      (saved_class == static_cast<float>(TensorClass::kState) ? "state" : "trainable") +
                                      " tensor, the model has it as " + std::string(to_string(spec.tensor_class)) +
                                      ": written for another model");
            if (first) {
                kind_changed = kind_changed || st[0] != static_cast<float>(config.optimizer.kind);
                updates[k] = piece_updates(st);
                first = false;
            }
            if (!files[p.file].tensors()[static_cast<std::size_t>(p.param)].finite)
                return make_error(ErrorCode::kInvalidArgument,
                                  "checkpoint " + dir + ": '" + spec.name + "' holds NaN or Inf");
            const std::span<float> dst(params[k].data() + (lo - s.offset), hi - lo);
            PSRUN_TRY(read(p.file, p.param, lo - p.offset, dst));
            has_average = has_average && p.ema >= 0;
            if (has_average)
                PSRUN_TRY(
                    read(p.file, p.ema, lo - p.offset, std::span<float>(average[k].data() + (lo - s.offset), hi - lo)));
            if (st[0] == static_cast<float>(config.optimizer.kind) && p.slots.size() == want_slots)
                for (std::size_t j = 0; j < want_slots; ++j)
                    if (p.slots[j] >= 0)
                        PSRUN_TRY(read(p.file, p.slots[j], lo - p.offset,
                                       std::span<float>(slots[k][j].data() + (lo - s.offset), hi - lo)));
            covered += hi - lo;
        }
        if (covered != s.length)
            return make_error(ErrorCode::kInvalidArgument, "checkpoint " + dir + " does not hold all of '" + spec.name +
                                                               "' [" + std::to_string(s.offset) + ", " +
                                                               std::to_string(s.offset + s.length) + ")");
    }
    // The sparse tables: every check (and the CRC of every file read) before the shard changes.
    for (std::size_t t = 0; t < shard.rows().size(); ++t) {
        const auto& name = tensors.at(shard.rows().table(t).tensor).name;
        if (pieces.contains(name))
            return make_error(
                ErrorCode::kInvalidArgument,
                "checkpoint " + dir + " holds '" + name + "' as a dense tensor, the model has it as a sparse table");
    }
    PSRUN_TRY_ASSIGN(auto plan, plan_row_restore(shard, tensors, config, dir, names, files, row_pieces));
    if (kind_changed) {
        spdlog::warn("checkpoint {} was saved with another optimizer kind: optimizer slots start fresh", dir);
        for (auto& s : slots) s.clear();
        std::fill(updates.begin(), updates.end(), 0);
    }
    auto loaded = load_rows(shard, config, files, plan);
    if (loaded) loaded = load_row_deltas(shard, tensors, files, plan, row_deltas);
    if (auto ok = std::move(loaded); !ok) {
        shard.invalidate();  // a read failed after every check passed (the files changed meanwhile)
        return ok;
    }
    if (want_average && !has_average) {
        spdlog::warn("checkpoint {} holds no moving average of every slice: the average restarts from its parameters",
                     dir);
        average.clear();
    }
    std::vector<std::span<const float>> spans(params.begin(), params.end());
    shard.load(config, spans, slots, updates, std::move(average));
    return {};
}

}  // namespace psrun::psd
