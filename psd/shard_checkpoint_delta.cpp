// Restoring differential row pieces (common/row_delta.h; psd/shard_checkpoint_rows.h): each is
// read as its base checkpoint's piece, then its changed rows laid over.
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/checkpoint_params.h"
#include "common/checkpoint_store.h"
#include "common/row_delta.h"
#include "psd/shard_checkpoint_rows.h"

namespace psrun::psd {

Result<RowDeltas> resolve_row_deltas(const std::string& dir, std::vector<std::string>& names,
                                     std::vector<TensorFileReader>& files, RowPieces& pieces) {
    RowDeltas deltas;
    std::map<std::string, std::size_t> opened;  // a base file's name (as in `names`) -> its index
    for (auto& [tensor, by_count] : pieces)
        for (auto& [shards, by_shard] : by_count)
            for (auto& [s, piece] : by_shard) {
                if (piece.blocks < 0 || piece.by_blocks()) continue;  // whole (plainly or by blocks)
                const std::string where = dir + "/" + names[piece.file];
                const std::string base_name = row_piece_base_name(tensor, s, shards);
                if (!files[piece.file].verified()) PSRUN_TRY(files[piece.file].verify());  // before the shard changes
                std::vector<float> floats(2);
                PSRUN_TRY(files[piece.file].read(static_cast<std::size_t>(piece.base), 0, floats));
                PSRUN_TRY_ASSIGN(const std::uint64_t step, decode_row_delta_base(floats, where));
                const std::string name = "../" + checkpoint_dir_name(static_cast<std::int64_t>(step)) + "/" +
                                         std::filesystem::path(names[piece.file]).filename().string();
                auto it = opened.find(name);
                if (it == opened.end()) {
                    auto reader = TensorFileReader::open(dir + "/" + name, false);
                    if (!reader)
                        return make_error(reader.error().code,
                                          where + " builds on " + name + ": " + reader.error().message);
                    files.push_back(std::move(*reader));
                    names.push_back(name);
                    it = opened.emplace(name, files.size() - 1).first;
                }
                RowPieces in_base;
                const auto& entries = files[it->second].tensors();
                for (std::size_t e = 0; e < entries.size(); ++e)
                    PSRUN_TRY(index_row_piece(entries[e], it->second, e, dir + "/" + name, in_base));
                const RowPiece* whole = nullptr;
                if (auto t = in_base.find(tensor); t != in_base.end())
                    if (auto k = t->second.find(shards); k != t->second.end())
                        if (auto p = k->second.find(s); p != k->second.end()) whole = &p->second;
                if (!whole || (whole->blocks >= 0 && !whole->by_blocks()))
                    return invalid_argument(dir + "/" + name + ", the base of " + where + ", does not hold " +
                                            base_name + " whole");
                deltas[tensor][s] = piece;
                piece = *whole;
            }
    return deltas;
}

Result<void> load_row_deltas(ShardState& shard, const std::vector<TensorSpec>& tensors,
                             std::vector<TensorFileReader>& files, const RowRestorePlan& plan,
                             const RowDeltas& deltas) {
    RowStore& rows = shard.rows();
    const std::uint32_t target_shards = rows.num_shards(), target = rows.shard();
    for (std::size_t t = 0; t < rows.size(); ++t) {
        const RowTable& table = rows.table(t);
        const auto it = deltas.find(tensors.at(table.tensor).name);
        if (it == deltas.end() || table.keyed) continue;
        const auto& tp = plan.tables[t];
        const std::size_t width = table.width;
        std::vector<std::span<float>> destinations{rows.values(t)};
        if (tp.slots)
            for (auto slot : rows.slots(t)) destinations.push_back(slot);
        std::uint64_t updates = 0;
        for (const auto& [s, piece] : it->second) {
            if (s >= tp.source_shards || !tp.pieces[s]) continue;  // no row of it lives here
            const auto& file = files[piece.file];
            const std::string where =
                file.path() + ": " + row_piece_base_name(tensors.at(table.tensor).name, s, tp.source_shards);
            if (piece.state < 0 || piece.param < 0) return invalid_argument(where + " is incomplete");
            std::vector<float> state(5);
            PSRUN_TRY(file.read(static_cast<std::size_t>(piece.state), 0, state));
            updates = std::max(updates, piece_updates(state));
            std::vector<float> blocks(file.tensors()[static_cast<std::size_t>(piece.blocks)].count);
            PSRUN_TRY(file.read(static_cast<std::size_t>(piece.blocks), 0, blocks));
            PSRUN_TRY_ASSIGN(const auto local,
                             decode_row_delta_rows(blocks, tp.source.rows_on(s, tp.source_shards), where));
            std::vector<int> parts{piece.param};
            if (tp.slots) {
                if (piece.slots.size() + 1 != destinations.size())
                    return invalid_argument(where + " does not hold the optimizer slots of its base");
                parts.insert(parts.end(), piece.slots.begin(), piece.slots.end());
            }
            for (std::size_t j = 0; j < parts.size(); ++j) {
                if (parts[j] < 0) return invalid_argument(where + " lacks a part");
                PSRUN_TRY(for_each_delta_row(
                    file, static_cast<std::size_t>(parts[j]), local, width,
                    [&, s = s](std::uint64_t row, const float* values) {
                        const std::uint64_t global = tp.source.global_row(row, s, tp.source_shards);
                        if (table.owner(global, target_shards) != target) return;
                        const std::uint64_t at = table.local_row(global, target_shards);
                        std::memcpy(destinations[j].data() + at * width, values, width * sizeof(float));
                        if (tp.lazy) rows.mark_created(t, at);  // on a base by blocks: maybe a row it omits
                    }));
            }
        }
        if (tp.lazy && !tp.slots) rows.reset_slots(t);  // the rows filled: fresh slots (Adagrad's accumulator)
        if (tp.slots && updates > 0) rows.set_updates(t, updates);
    }
    return {};
}

}  // namespace psrun::psd
