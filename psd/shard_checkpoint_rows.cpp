#include "psd/shard_checkpoint_rows.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>

#include "common/checkpoint_params.h"
#include "common/row_delta.h"

namespace psrun::psd {
namespace {

constexpr std::size_t kChunkFloats = 1 << 18;  // re-sharding reads source rows 1 MiB at a time

}  // namespace

std::array<float, 5> piece_state(OptimizerKind kind, std::uint64_t updates, TensorClass tensor_class) {
    return {static_cast<float>(kind), static_cast<float>(updates & 0xFFFFFF),
            static_cast<float>((updates >> 24) & 0xFFFFFF), static_cast<float>(updates >> 48),
            static_cast<float>(tensor_class)};
}

std::uint64_t piece_updates(std::span<const float> state) {
    return static_cast<std::uint64_t>(state[1]) | (static_cast<std::uint64_t>(state[2]) << 24) |
           (static_cast<std::uint64_t>(state[3]) << 48);
}

Result<void> add_row_pieces(const ShardState& shard, const std::vector<TensorSpec>& tensors, bool snapshot,
                            const RowBlocks* plan, std::vector<TensorView>& views,
                            std::vector<std::array<float, 5>>& states, std::vector<std::vector<float>>& keys) {
    const RowStore& rows = shard.rows();
    states.reserve(rows.size());  // the views point into them
    keys.reserve(3 * rows.size());
    for (std::size_t t = 0; t < rows.size(); ++t) {
        const std::string name = tensors.at(rows.table(t).tensor).name;
        const std::string base = row_piece_base_name(name, rows.shard(), rows.num_shards());
        const std::uint64_t width = rows.table(t).width, local_rows = rows.local_rows(t);
        // A piece by blocks: the blocks listed, their rows in order (the last block may be short).
        std::shared_ptr<std::vector<std::uint64_t>> blocks;
        std::uint64_t piece_rows = local_rows;
        if (plan && !rows.table(t).keyed && t < plan->blocks.size()) {
            blocks = std::make_shared<std::vector<std::uint64_t>>();
            piece_rows = 0;
            const auto& bits = plan->blocks[t];
            for (std::uint64_t b = 0; b * kRowDeltaBlockRows < local_rows; ++b)
                if (b / 64 < bits.size() && (bits[b / 64] >> (b % 64) & 1)) {
                    blocks->push_back(b);
                    piece_rows += std::min(kRowDeltaBlockRows, local_rows - b * kRowDeltaBlockRows);
                }
            if (!plan->base_step && piece_rows == local_rows) blocks.reset();  // whole: as plain as it is
        }
        const std::vector<std::uint64_t> shape{piece_rows, width};
        // A vocabulary table is read as materialize() would leave it (RowStore::read()), piece by
        // piece, so that a forked writer creates no row; a keyed table's arrays are read as they are.
        auto add = [&](RowStore::Part part, std::span<const float> data, const std::string& suffix,
                       const std::string& what) -> Result<void> {
            if (rows.table(t).keyed && !snapshot) {
                if (!wire::all_finite(data.data(), data.size()))
                    return make_error(ErrorCode::kInvalidArgument,
                                      "refusing to checkpoint: " + what + " contain NaN or Inf");
                views.push_back(TensorView{base + suffix, shape, data});
                return {};
            }
            // Read piece by piece: a vocabulary table as materialize() would leave it, or from
            // the snapshot (keyed tables too).
            TensorView view{base + suffix, shape, {}};
            auto cursor = snapshot ? std::make_shared<RowStore::SnapshotCursor>() : nullptr;
            auto read = [&rows, t, part, cursor](std::uint64_t first, std::span<float> out) {
                if (cursor) rows.read_snapshot(t, part, first, out, *cursor);
                else rows.read(t, part, first, out);
            };
            view.fill = [read, what, blocks, width, local_rows](std::uint64_t first,
                                                                std::span<float> out) -> Result<void> {
                if (!blocks) read(first, out);
                for (std::uint64_t at = first, end = first + out.size(); blocks && at < end;) {
                    // Row c of the piece: row c % 16 of its (c / 16)-th block; up to that block's end.
                    const std::uint64_t c = at / width, block = (*blocks)[c / kRowDeltaBlockRows];
                    const std::uint64_t row0 = block * kRowDeltaBlockRows;
                    const std::uint64_t block_end =
                        (c - c % kRowDeltaBlockRows + std::min(kRowDeltaBlockRows, local_rows - row0)) * width;
                    const std::uint64_t to = std::min(end, block_end);
                    read((row0 + c % kRowDeltaBlockRows) * width + at % width,
                         std::span<float>(out.data() + (at - first), to - at));
                    at = to;
                }
                if (!wire::all_finite(out.data(), out.size()))
                    return make_error(ErrorCode::kInvalidArgument,
                                      "refusing to checkpoint: " + what + " contain NaN or Inf");
                return {};
            };
            views.push_back(std::move(view));
            return {};
        };
        if (auto ok = add(RowStore::Part::kValues, rows.values(t), "/param", "rows of " + base); !ok) return ok;
        const auto slots = rows.slots(t);
        for (std::size_t j = 0; j < slots.size(); ++j) {
            const auto part = j == 0 ? RowStore::Part::kSlot0 : RowStore::Part::kSlot1;
            if (auto ok = add(part, slots[j], "/slot" + std::to_string(j), "optimizer slots of " + base); !ok)
                return ok;
        }
        if (const auto ema = rows.average(t); !ema.empty())
            if (auto ok = add(RowStore::Part::kAverage, ema, "/ema", "moving averages of " + base); !ok) return ok;
        states.push_back(piece_state(rows.config().kind, rows.updates(t), TensorClass::kTrainable));
        views.push_back(TensorView{base + "/state", {5}, states.back()});
        if (blocks) {
            keys.push_back(encode_row_delta_blocks(*blocks));
            views.push_back(TensorView{base + "/blocks", {blocks->size(), 2}, keys.back()});
            if (plan->base_step) {
                keys.push_back(encode_row_delta_base(*plan->base_step));
                views.push_back(TensorView{base + "/base", {2}, keys.back()});
            } else {
                keys.push_back(encode_row_count(local_rows));
                views.push_back(TensorView{base + "/rows", {2}, keys.back()});
            }
        }
        if (rows.table(t).keyed) {  // its id map (empty where a small table placed whole elsewhere has no slot)
            const RowIndex* index = rows.index(t);
            if (snapshot && index) {
                // Its rows now: the snapshot begins before the store changes (ShardCheckpointImage).
                TensorView view{base + "/keys", {index->rows(), kKeyedEntryFloats}, {}};
                view.fill = [&rows, t, base, cursor = std::make_shared<RowStore::SnapshotCursor>()](
                                std::uint64_t first, std::span<float> out) -> Result<void> {
                    if (!rows.read_snapshot_keys(t, first, out, *cursor))
                        return make_error(ErrorCode::kIo, "the id map of " + base + " changed size during the write");
                    return {};
                };
                views.push_back(std::move(view));
                continue;
            }
            auto entries = index ? index->entries() : std::vector<RowIndex::Entry>{};
            // In slot order, as a snapshot writes them (a restore orders them by last update).
            std::sort(entries.begin(), entries.end(),
                      [](const RowIndex::Entry& a, const RowIndex::Entry& b) { return a.slot < b.slot; });
            keys.push_back(encode_keyed_entries(entries));
            views.push_back(TensorView{base + "/keys", {entries.size(), kKeyedEntryFloats}, keys.back()});
        }
    }
    return {};
}

Result<bool> index_row_piece(const TensorFileEntry& t, std::size_t file, std::size_t entry, const std::string& where,
                             RowPieces& pieces) {
    RowPieceName name;
    if (!parse_row_piece_name(t.name, name)) return false;
    auto& p = pieces[name.tensor][name.shards][name.shard];
    p.file = file;
    const int e = static_cast<int>(entry);
    if (name.part == "param") p.param = e;
    else if (name.part == "keys") p.keys = e;
    else if (name.part == "ema") p.ema = e;
    else if (name.part == "state" && t.count == 5) p.state = e;
    else if (name.part == "blocks") p.blocks = e;
    else if (name.part == "base" && t.count == 2) p.base = e;
    else if (name.part == "rows" && t.count == 2) p.rows = e;
    else if (name.part.starts_with("slot") && name.part.size() == 5 && name.part[4] >= '0' && name.part[4] <= '1') {
        const std::size_t j = static_cast<std::size_t>(name.part[4] - '0');
        if (p.slots.size() <= j) p.slots.resize(j + 1, -1);
        p.slots[j] = e;
    } else {
        return invalid_argument(where + ": unexpected tensor '" + t.name + "'");
    }
    return true;
}

Result<RowRestorePlan> plan_row_restore(const ShardState& shard, const std::vector<TensorSpec>& tensors,
                                        const wire::InitConfig& config, const std::string& dir,
                                        const std::vector<std::string>& names, std::vector<TensorFileReader>& files,
                                        const RowPieces& pieces) {
    const RowStore& rows = shard.rows();
    const std::uint32_t target_shards = rows.num_shards(), target = rows.shard();
    const std::size_t want_slots = static_cast<std::size_t>(slot_count(config.optimizer.kind));
    RowRestorePlan plan;
    for (std::size_t t = 0; t < rows.size(); ++t) {
        const RowTable& table = rows.table(t);
        const std::string name = tensors.at(table.tensor).name;
        const auto it = pieces.find(name);
        if (it == pieces.end())
            return invalid_argument("checkpoint " + dir + " does not hold the sparse table '" + name + "'");
        if (it->second.size() != 1)
            return invalid_argument("checkpoint " + dir + " holds '" + name + "' from several shard counts");
        const auto& [source_shards, by_shard] = *it->second.begin();
        RowRestorePlan::Table out;
        out.source_shards = source_shards;
        out.pieces.assign(source_shards, nullptr);
        out.listed.resize(source_shards);
        if (by_shard.size() != source_shards)
            return invalid_argument("checkpoint " + dir + " holds " + std::to_string(by_shard.size()) + " of the " +
                                    std::to_string(source_shards) + " parts of the sparse table '" + name + "'");
        // How the checkpoint placed the table (spread, or whole on one shard), from its pieces' rows.
        std::vector<std::uint64_t> piece_rows(source_shards, 0), stored_rows(source_shards, 0);
        for (const auto& [s, piece] : by_shard) {
            const std::string where =
                dir + "/" + names[piece.file] + ": the piece " + row_piece_base_name(name, s, source_shards);
            if (piece.param < 0 || piece.state < 0) return invalid_argument(where + " is incomplete");
            const auto& shape = files[piece.file].tensors()[static_cast<std::size_t>(piece.param)].shape;
            if (shape.size() != 2 || shape[1] != table.width)
                return invalid_argument(where + " does not fit the table's rows of " + std::to_string(table.width) +
                                        ": written for another model");
            stored_rows[s] = piece_rows[s] = shape[0];
            if (!piece.by_blocks()) continue;
            if (piece.rows < 0 || table.keyed)
                return invalid_argument(where + " lists blocks of rows but " +
                                        (table.keyed ? "its table is keyed by raw ids" : "holds no row count"));
            std::vector<float> count(2);
            PSRUN_TRY(files[piece.file].read(static_cast<std::size_t>(piece.rows), 0, count));
            PSRUN_TRY_ASSIGN(piece_rows[s], decode_row_count(count, where));
        }
        const auto source = placement_from_pieces(table, piece_rows);
        if (!source)
            return invalid_argument("checkpoint " + dir + ": the " + std::to_string(source_shards) + " pieces of '" +
                                    name + "' do not hold the table's " + std::to_string(table.num_rows) +
                                    " rows, spread or whole on one shard: written for another model");
        out.source = *source;
        const bool here = table.rows_on(target, target_shards) > 0;
        // The pieces this shard reads: those holding rows it keeps, or (holding none of the table) one
        // for the update count. (source_shards captured by copy: clang 14, the fuzz build's
        // compiler, cannot capture a structured binding by reference.)
        auto needed = [&, source_shards = source_shards](std::uint32_t s) {
            if (source->rows_on(s, source_shards) == 0) return false;
            if (!here) return s == (source->whole() ? source->home : 0u);
            if (table.keyed || table.whole() || source->whole()) return true;
            const std::uint32_t g = std::gcd(source_shards, target_shards);
            return s % g == target % g;
        };
        bool slots = true;
        bool average = config.optimizer.ema_decay > 0.0f;  // loaded only when every needed piece has one
        for (const auto& [s, piece] : by_shard) {
            const std::string where = dir + "/" + names[piece.file];
            const std::string base = row_piece_base_name(name, s, source_shards);
            const std::vector<std::uint64_t> shape{stored_rows[s], table.width};
            if (table.keyed) {  // ids anywhere: every piece is read, its id map must be whole
                const auto* keys =
                    piece.keys >= 0 ? &files[piece.file].tensors()[static_cast<std::size_t>(piece.keys)] : nullptr;
                if (!keys || keys->shape.size() != 2 || keys->shape[1] != kKeyedEntryFloats ||
                    keys->shape[0] > shape[0])
                    return invalid_argument(where + ": the id map of the keyed table piece " + base +
                                            " is missing or misshaped");
            }
            if (!needed(s)) continue;  // no row of this piece lives on this shard
            PSRUN_TRY(files[piece.file].verify());
            const auto& entries = files[piece.file].tensors();
            std::vector<float> state(5);
            PSRUN_TRY(files[piece.file].read(static_cast<std::size_t>(piece.state), 0, state));
            if (state[4] != static_cast<float>(TensorClass::kTrainable))
                return invalid_argument(where + ": " + base + " is not a trainable table");
            if (!entries[static_cast<std::size_t>(piece.param)].finite)
                return invalid_argument("checkpoint " + dir + ": '" + name + "' holds NaN or Inf");
            const bool same_kind =
                state[0] == static_cast<float>(config.optimizer.kind) && piece.slots.size() == want_slots;
            for (int e : piece.slots)
                if (same_kind && (e < 0 || entries[static_cast<std::size_t>(e)].shape != shape))
                    return invalid_argument(where + ": an optimizer slot of " + base + " is missing or misshaped");
            slots = slots && same_kind;
            if (piece.ema >= 0 && entries[static_cast<std::size_t>(piece.ema)].shape != shape)
                return invalid_argument(where + ": the moving average of " + base + " is misshaped");
            if (piece.ema >= 0 && !entries[static_cast<std::size_t>(piece.ema)].finite)
                return invalid_argument(where + ": the moving average of " + base + " holds NaN or Inf");
            average = average && piece.ema >= 0;
            if (piece.by_blocks()) {  // its block list names exactly the rows it stores
                std::vector<float> blocks(entries[static_cast<std::size_t>(piece.blocks)].count);
                PSRUN_TRY(files[piece.file].read(static_cast<std::size_t>(piece.blocks), 0, blocks));
                PSRUN_TRY_ASSIGN(auto listed, decode_row_delta_rows(blocks, piece_rows[s], where));
                if (listed.size() != stored_rows[s])
                    return invalid_argument(where + ": " + base + " holds " + std::to_string(stored_rows[s]) +
                                            " rows, its blocks name " + std::to_string(listed.size()));
                out.listed[s] = std::move(listed);
                out.lazy = true;
            }
            out.updates = std::max(out.updates, piece_updates(state));
            out.pieces[s] = &piece;
        }
        if (!slots)
            spdlog::warn("checkpoint {}: '{}' was saved with another optimizer kind: its slots start fresh", dir, name);
        out.slots = slots;
        if (config.optimizer.ema_decay > 0.0f && !average)
            spdlog::warn("checkpoint {}: '{}' has no saved moving average: it restarts from the rows", dir, name);
        out.average = average;
        if (!slots) out.updates = 0;  // as for dense slices: another optimizer starts its count afresh
        plan.tables.push_back(std::move(out));
    }
    return plan;
}

Result<void> load_rows(ShardState& shard, const wire::InitConfig& config, const std::vector<TensorFileReader>& files,
                       const RowRestorePlan& plan) {
    RowStore& rows = shard.rows();
    std::vector<bool> lazy;
    for (const auto& tp : plan.tables) lazy.push_back(tp.lazy);
    rows.allocate(config.optimizer, &lazy);
    const std::uint32_t target_shards = rows.num_shards(), target = rows.shard();
    std::vector<float> chunk;
    for (std::size_t t = 0; t < rows.size(); ++t) {
        const auto& tp = plan.tables[t];
        const std::size_t width = rows.table(t).width;
        if (rows.table(t).keyed) {
            if (auto ok = load_keyed_rows(rows, t, tp, files); !ok) return ok;
            rows.set_updates(t, tp.updates);
            rows.start_average(t, tp.average);
            continue;
        }
        const RowTable& target_table = rows.table(t);
        if (rows.local_rows(t) == 0) {  // a small table placed whole on another shard
            rows.set_updates(t, tp.updates);
            rows.start_average(t, tp.average);
            continue;
        }
        auto destinations = rows.slots(t);
        destinations.insert(destinations.begin(), rows.values(t));  // param, then slots
        if (!tp.slots) destinations.resize(1);
        if (tp.average) destinations.push_back(rows.average(t));  // then the average
        for (std::uint32_t s = 0; s < tp.source_shards; ++s) {
            const RowPiece* piece = tp.pieces[s];
            if (!piece) continue;
            const auto& file = files[piece->file];
            std::vector<int> parts{piece->param};
            if (tp.slots) parts.insert(parts.end(), piece->slots.begin(), piece->slots.end());
            if (tp.average) parts.push_back(piece->ema);  // destinations.back()
            const std::uint64_t source_rows = tp.source.rows_on(s, tp.source_shards);
            if (piece->by_blocks()) {  // the rows it lists (plan_row_restore() checked them)
                PSRUN_TRY(load_listed_rows(rows, t, tp, s, file, parts, destinations));
                continue;
            }
            for (std::size_t j = 0; j < parts.size(); ++j) {
                const auto e = static_cast<std::size_t>(parts[j]);
                if (tp.source_shards == target_shards && tp.source == target_table && !tp.lazy) {  // this shard's part
                    if (auto ok = file.read(e, 0, destinations[j]); !ok) return ok;
                    continue;
                }
                const std::uint64_t per_chunk = std::max<std::uint64_t>(1, kChunkFloats / width);
                chunk.resize(per_chunk * width);
                for (std::uint64_t first = 0; first < source_rows; first += per_chunk) {
                    const std::uint64_t n = std::min(per_chunk, source_rows - first);
                    if (auto ok = file.read(e, first * width, std::span<float>(chunk.data(), n * width)); !ok)
                        return ok;
                    for (std::uint64_t i = 0; i < n; ++i) {
                        const std::uint64_t row = tp.source.global_row(first + i, s, tp.source_shards);
                        if (target_table.owner(row, target_shards) != target) continue;
                        const std::uint64_t local = target_table.local_row(row, target_shards);
                        std::memcpy(destinations[j].data() + local * width, chunk.data() + i * width,
                                    width * sizeof(float));
                        if (tp.lazy) rows.mark_created(t, local);
                    }
                }
            }
        }
        if (tp.lazy && !tp.slots) rows.reset_slots(t);  // the rows filled: fresh slots (Adagrad's accumulator)
        rows.set_updates(t, tp.updates);
        rows.start_average(t, tp.average);
    }
    return {};
}

Result<void> load_listed_rows(RowStore& rows, std::size_t t, const RowRestorePlan::Table& tp, std::uint32_t s,
                              const TensorFileReader& file, std::span<const int> parts,
                              std::span<const std::span<float>> destinations) {
    const RowTable& table = rows.table(t);
    const std::uint32_t target_shards = rows.num_shards(), target = rows.shard();
    const std::uint64_t width = table.width;
    const auto& listed = tp.listed.at(s);
    for (std::size_t j = 0; j < parts.size(); ++j)
        PSRUN_TRY(for_each_delta_row(
            file, static_cast<std::size_t>(parts[j]), listed, width, [&](std::uint64_t row, const float* values) {
                const std::uint64_t global = tp.source.global_row(row, s, tp.source_shards);
                if (table.owner(global, target_shards) != target) return;
                const std::uint64_t local = table.local_row(global, target_shards);
                std::memcpy(destinations[j].data() + local * width, values, width * sizeof(float));
                rows.mark_created(t, local);
            }));
    return {};
}

}  // namespace psrun::psd
