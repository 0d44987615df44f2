#include "workerd/keyed_rows.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <stdexcept>

#include "common/checkpoint_params.h"
#include "common/checkpoint_store.h"
#include "common/row_init.h"
#include "common/tensor_file_stream.h"

namespace psrun::worker {
namespace {

constexpr std::size_t kKeyedEntryDigits = 10;         // id (4 digits), slot (2), last update (4)
constexpr std::uint64_t kKeyedChunkFloats = 1 << 18;  // slot arrays read 1 MiB at a time

Error keyed_invalid(const std::string& message) { return Error{ErrorCode::kInvalidArgument, message}; }

// Digits [at, at + n) of `f`, least significant first, as one integer; false when one is not an
// integer in [0, 2^16) (psd/shard_checkpoint_keyed.cpp writes them so).
bool keyed_digits(std::span<const float> f, std::size_t at, int n, std::uint64_t& out) {
    out = 0;
    for (int d = n - 1; d >= 0; --d) {
        const float x = f[at + static_cast<std::size_t>(d)];
        if (!(x >= 0.0f && x < 65536.0f) || x != static_cast<float>(static_cast<std::uint32_t>(x))) return false;
        out = (out << 16) | static_cast<std::uint64_t>(x);
    }
    return true;
}

// One shard's pieces of the table in one file: entries of its id map and of its value slots.
struct ShardPieces {
    const TensorFileReader* file = nullptr;
    int keys = -1;
    int values = -1;
};

// One row found in a shard's id map: its id, where it is, and its place in the sorted table.
struct FoundRow {
    std::uint64_t id = 0;
    std::uint64_t slot = 0;
    std::uint32_t shard = 0;
    std::size_t row = 0;
};

}  // namespace

KeyedRows::KeyedRows(std::string table, std::uint32_t width, const RowInit& init, std::vector<std::uint64_t> ids,
                     std::vector<float> values)
    : table_(std::move(table)), width_(width), init_(init) {
    if (values.size() != ids.size() * width)
        throw std::invalid_argument("KeyedRows " + table_ + ": " + std::to_string(values.size()) + " values for " +
                                    std::to_string(ids.size()) + " ids of width " + std::to_string(width));
    std::vector<std::size_t> order(ids.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ids[a] < ids[b]; });
    ids_.resize(ids.size());
    values_.resize(values.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        ids_[i] = ids[order[i]];
        if (i > 0 && ids_[i] == ids_[i - 1])
            throw std::invalid_argument("KeyedRows " + table_ + ": id " + std::to_string(ids_[i]) + " given twice");
        std::copy_n(values.data() + order[i] * width, width, values_.data() + i * width);
    }
}

std::optional<std::size_t> KeyedRows::find(std::uint64_t id) const {
    const auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
    if (it == ids_.end() || *it != id) return std::nullopt;
    return static_cast<std::size_t>(it - ids_.begin());
}

std::size_t KeyedRows::gather(std::span<const std::uint64_t> keys, std::span<float> out) const {
    if (out.size() < keys.size() * width_)
        throw std::invalid_argument("KeyedRows::gather: " + std::to_string(out.size()) + " floats for " +
                                    std::to_string(keys.size()) + " rows of " + table_);
    std::size_t found = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
        float* dst = out.data() + i * width_;
        if (const auto row = find(keys[i])) {
            std::memcpy(dst, values_.data() + *row * width_, width_ * sizeof(float));
            ++found;
        } else {  // not a row: its initial values, as psd serves it (psd/row_store.cpp gather)
            fill_row(init_, keys[i], std::span<float>(dst, width_));
        }
    }
    return found;
}

Result<KeyedRows> KeyedRows::load(const std::string& dir, const TensorSpec& spec, bool average) {
    if (!spec.keyed() || spec.shape.size() != 2)
        return make_error(ErrorCode::kInvalidArgument, "KeyedRows::load: " + spec.name + " is not a keyed table");
    PSRUN_TRY_ASSIGN(auto manifest, CheckpointStore::read_manifest(CheckpointInfo{0, dir}));
    const std::string part = average ? "ema" : "param";
    const RowTable table{0, spec.shape[0], spec.shape[1], true};
    const std::size_t width = spec.shape[1];
    std::vector<TensorFileReader> files;
    std::map<std::uint32_t, std::map<std::uint32_t, ShardPieces>> by_count;  // shards K -> shard -> its pieces
    for (const auto& f : manifest["files"]) {
        if (!f.is_string()) return tl::unexpected(keyed_invalid(dir + "/manifest.json: bad \"files\" entry"));
        const std::string name = f.get<std::string>();
        if (!name.starts_with("ps-") || !name.ends_with(".tensors")) continue;
        PSRUN_TRY_ASSIGN(auto file, TensorFileReader::open(dir + "/" + name));
        files.push_back(std::move(file));
    }
    for (const auto& file : files)
        for (std::size_t e = 0; e < file.tensors().size(); ++e) {
            RowPieceName piece;
            if (!parse_row_piece_name(file.tensors()[e].name, piece) || piece.tensor != spec.name) continue;
            if (piece.part != "keys" && piece.part != part) continue;
            ShardPieces& p = by_count[piece.shards][piece.shard];
            if (p.file != nullptr && p.file != &file)
                return tl::unexpected(keyed_invalid(file.path() + ": shard " + std::to_string(piece.shard) +
                                                    " of table " + spec.name + " is in two files"));
            p.file = &file;
            (piece.part == "keys" ? p.keys : p.values) = static_cast<int>(e);
        }
    if (by_count.empty())
        return make_error(ErrorCode::kNotFound, "checkpoint " + dir + " holds no rows of the keyed table " + spec.name);
    if (by_count.size() > 1)
        return tl::unexpected(
            keyed_invalid("checkpoint " + dir + ": the pieces of keyed table " + spec.name + " name two shard counts"));
    const std::uint32_t shards = by_count.begin()->first;
    const auto& pieces = by_count.begin()->second;
    // Each shard's slots: ceil(capacity / K), or all of them on one shard for a small table placed whole.
    std::vector<std::uint64_t> piece_rows(shards, 0);
    for (const auto& [s, p] : pieces)
        if (s < shards && p.values >= 0)
            piece_rows[s] = p.file->tensors()[static_cast<std::size_t>(p.values)].count / width;
    const RowTable source = placement_from_pieces(table, piece_rows).value_or(table);  // misfits are named below
    std::vector<FoundRow> found;
    for (std::uint32_t s = 0; s < shards; ++s) {
        const auto it = pieces.find(s);
        const std::uint64_t slots = source.rows_on(s, shards);
        const std::string where = "checkpoint " + dir + ", keyed table " + spec.name + " shard " + std::to_string(s) +
                                  " of " + std::to_string(shards);
        if (it == pieces.end() || it->second.keys < 0)
            return tl::unexpected(keyed_invalid(where + ": no id map (\"keys\")"));
        if (it->second.values < 0) {
            if (average)
                return make_error(ErrorCode::kNotFound, where +
                                                            ": no moving average of its rows (trained without "
                                                            "--ema-decay: drop --ema)");
            return tl::unexpected(keyed_invalid(where + ": no rows (\"param\")"));
        }
        const TensorFileReader& file = *it->second.file;
        const TensorFileEntry& keys = file.tensors()[static_cast<std::size_t>(it->second.keys)];
        const TensorFileEntry& values = file.tensors()[static_cast<std::size_t>(it->second.values)];
        if (keys.count % kKeyedEntryDigits != 0 || values.count != slots * width)
            return tl::unexpected(keyed_invalid(where + ": its id map or rows are misshaped (" + file.path() + ")"));
        if (!values.finite) return tl::unexpected(keyed_invalid(where + ": its rows hold NaN or Inf"));
        std::vector<float> digits(keys.count);
        PSRUN_TRY(file.read(static_cast<std::size_t>(it->second.keys), 0, digits));
        for (std::size_t at = 0; at < digits.size(); at += kKeyedEntryDigits) {
            FoundRow row;
            row.shard = s;
            if (!keyed_digits(digits, at, 4, row.id) || !keyed_digits(digits, at + 4, 2, row.slot) || row.slot >= slots)
                return tl::unexpected(keyed_invalid(where + ": entry " + std::to_string(at / kKeyedEntryDigits) +
                                                    " of its id map is damaged (" + file.path() + ")"));
            found.push_back(row);
        }
    }
    std::sort(found.begin(), found.end(), [](const FoundRow& a, const FoundRow& b) { return a.id < b.id; });
    KeyedRows out;
    out.table_ = spec.name;
    out.width_ = static_cast<std::uint32_t>(width);
    out.init_ = spec.row_init;
    out.ids_.resize(found.size());
    for (std::size_t i = 0; i < found.size(); ++i) {
        if (i > 0 && found[i].id == found[i - 1].id)
            return tl::unexpected(keyed_invalid("checkpoint " + dir + ": id " + std::to_string(found[i].id) +
                                                " of keyed table " + spec.name + " is a row of two shards"));
        found[i].row = i;
        out.ids_[i] = found[i].id;
    }
    out.values_.resize(found.size() * width);
    // Per shard, by slot: its value array read in chunks, each row copied to its place.
    std::sort(found.begin(), found.end(), [](const FoundRow& a, const FoundRow& b) {
        return a.shard != b.shard ? a.shard < b.shard : a.slot < b.slot;
    });
    const std::uint64_t per_chunk = std::max<std::uint64_t>(1, kKeyedChunkFloats / width);
    std::vector<float> chunk;
    for (std::size_t i = 0; i < found.size();) {
        const ShardPieces& p = pieces.at(found[i].shard);
        const std::uint64_t first = found[i].slot,
                            n = std::min(per_chunk, source.rows_on(found[i].shard, shards) - first);
        chunk.resize(n * width);
        PSRUN_TRY(p.file->read(static_cast<std::size_t>(p.values), first * width, chunk));
        const std::uint32_t shard = found[i].shard;
        for (; i < found.size() && found[i].shard == shard && found[i].slot < first + n; ++i)
            std::copy_n(chunk.data() + (found[i].slot - first) * width, width,
                        out.values_.data() + found[i].row * width);
    }
    return out;
}

}  // namespace psrun::worker
