#include "common/checkpoint_params.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "common/checkpoint_store.h"
#include "common/row_delta.h"
#include "common/row_init.h"
#include "common/tensor_file.h"
#include "common/tensor_file_stream.h"

namespace psrun {
namespace {

Error invalid(const std::string& message) { return Error{ErrorCode::kInvalidArgument, message}; }

// A sparse table's "<table>@<s>%<K>/<part>" piece in one of the open shard files.
struct RowPieceRef {
    std::size_t file = 0;   // index into the open readers
    std::size_t entry = 0;  // index into that file's tensors
    RowPieceName piece;
};

// Where one piece's rows are read from: the piece itself, whole (plainly, or by blocks: the rows
// its blocks omit hold their initial values), or for a differential piece (common/row_delta.h)
// its base's piece, then the delta's rows laid over them.
struct RowSource {
    const TensorFileReader* file = nullptr;  // the whole piece's
    std::size_t entry = 0;
    long listed = -1;                         // by blocks: its "blocks" entry in `file`
    std::uint64_t rows = 0;                   // by blocks: the source shard's rows
    const TensorFileReader* delta = nullptr;  // the differential piece's file, or null
    std::size_t delta_entry = 0, blocks_entry = 0;
};

// Finds entry `name` of `file`, or -1.
long find_entry(const TensorFileReader& file, const std::string& name) {
    for (std::size_t e = 0; e < file.tensors().size(); ++e)
        if (file.tensors()[e].name == name) return static_cast<long>(e);
    return -1;
}

// Entry `entry` of `file`, a whole piece named `piece` (no "/<part>"): plain, or by blocks.
Result<RowSource> whole_source(const TensorFileReader& file, std::size_t entry, const std::string& piece) {
    RowSource source{&file, entry};
    const long blocks = find_entry(file, piece + "/blocks");
    if (blocks < 0) return source;
    const long rows = find_entry(file, piece + "/rows");
    if (rows < 0 || file.tensors()[static_cast<std::size_t>(rows)].count != 2)
        return tl::unexpected(
            invalid(file.path() + ": the piece " + piece + " lists blocks but names neither a base nor its rows"));
    std::vector<float> floats(2);
    PSRUN_TRY(file.read(static_cast<std::size_t>(rows), 0, floats));
    PSRUN_TRY_ASSIGN(source.rows, decode_row_count(floats, file.path()));
    source.listed = blocks;
    return source;
}

// The source of `ref`; a base file it needs is opened (verified) into `bases`.
Result<RowSource> row_source(const std::vector<TensorFileReader>& files, const RowPieceRef& ref, const std::string& dir,
                             std::vector<std::unique_ptr<TensorFileReader>>& bases) {
    const TensorFileReader& file = files[ref.file];
    const std::string piece = row_piece_base_name(ref.piece.tensor, ref.piece.shard, ref.piece.shards);
    const long blocks = find_entry(file, piece + "/blocks"), base = find_entry(file, piece + "/base");
    if (blocks < 0 || base < 0) return whole_source(file, ref.entry, piece);
    if (file.tensors()[static_cast<std::size_t>(base)].count != 2)
        return tl::unexpected(invalid(file.path() + ": the differential piece " + piece + " names no base"));
    std::vector<float> floats(2);
    PSRUN_TRY(file.read(static_cast<std::size_t>(base), 0, floats));
    PSRUN_TRY_ASSIGN(const std::uint64_t base_step, decode_row_delta_base(floats, file.path()));
    const std::string base_path =
        row_delta_base_dir(dir, base_step) + "/" + std::filesystem::path(file.path()).filename().string();
    PSRUN_TRY_ASSIGN(auto opened, TensorFileReader::open(base_path));
    bases.push_back(std::make_unique<TensorFileReader>(std::move(opened)));
    const long entry = find_entry(*bases.back(), file.tensors()[ref.entry].name);
    if (entry < 0 || find_entry(*bases.back(), piece + "/base") >= 0)
        return tl::unexpected(
            invalid(base_path + ": the base of " + file.path() + " does not hold " + piece + " whole"));
    PSRUN_TRY_ASSIGN(RowSource source, whole_source(*bases.back(), static_cast<std::size_t>(entry), piece));
    source.delta = &file;
    source.delta_entry = ref.entry;
    source.blocks_entry = static_cast<std::size_t>(blocks);
    return source;
}

// Every piece of one [rows, width] table read into `dst`, its dense values, in chunks (a large
// table is never held twice in memory). The placement comes from all pieces together
// (placement_from_pieces): spread, piece s holds rows s, s + K, ...; whole, one piece holds every
// row and the others none. A piece of any other size is refused, so no row is left at zero.
// A piece by blocks gives the rows it omits their initial values from `init` (the manifest's),
// a differential piece is read as its base's piece with its own rows laid over.
// REQUIRES: `refs` holds each shard s < K of one K exactly once (checked by the caller).
Result<void> read_row_table(const std::vector<TensorFileReader>& files, const std::vector<RowPieceRef>& refs,
                            const TensorSpec& spec, const std::optional<RowInit>& init, const std::string& dir,
                            float* dst) {
    if (spec.shape.size() != 2)
        return tl::unexpected(invalid("checkpoint " + dir + ": '" + spec.name +
                                      "' is a sparse table in the checkpoint but not a [rows, width] tensor here"));
    const std::uint64_t width = spec.shape[1];
    const std::uint32_t shards = refs.front().piece.shards;
    std::vector<std::uint64_t> piece_rows(shards, 0);
    std::vector<std::unique_ptr<TensorFileReader>> bases;
    std::vector<RowSource> sources;
    std::string sizes;
    for (const auto& ref : refs) {
        PSRUN_TRY_ASSIGN(const RowSource source, row_source(files, ref, dir, bases));
        sources.push_back(source);
        const TensorFileEntry& t = sources.back().file->tensors()[sources.back().entry];
        if (t.count % width != 0)
            return tl::unexpected(invalid(sources.back().file->path() + ": rows piece '" + t.name + "' holds " +
                                          std::to_string(t.count) + " floats, not whole rows of width " +
                                          std::to_string(width) + " ('" + spec.name + "' in this model)"));
        piece_rows[ref.piece.shard] = source.listed >= 0 ? source.rows : t.count / width;
        if (source.listed >= 0 && !init)
            return tl::unexpected(invalid("checkpoint " + dir + " omits rows of sparse table '" + spec.name +
                                          "' no step created, and its manifest records no initializer for them"));
    }
    for (std::uint32_t s = 0; s < shards; ++s) sizes += (s ? ", " : "") + std::to_string(piece_rows[s]);
    const auto table = placement_from_pieces(RowTable{0, spec.shape[0], static_cast<std::uint32_t>(width)}, piece_rows);
    if (!table)
        return tl::unexpected(invalid("checkpoint " + dir + ": the pieces of sparse table '" + spec.name + "' hold " +
                                      sizes + " rows on its " + std::to_string(shards) +
                                      " shards, which is neither spread nor whole "
                                      "on one shard for a table of " +
                                      std::to_string(spec.shape[0]) +
                                      " rows: the "
                                      "checkpoint is damaged or of another model"));
    std::vector<float> chunk;
    constexpr std::uint64_t kChunkRows = 1 << 14;
    for (std::size_t r = 0; r < refs.size(); ++r) {
        const RowPieceRef& ref = refs[r];
        const RowSource& source = sources[r];
        const TensorFileReader& file = *source.file;
        const TensorFileEntry& t = file.tensors()[source.entry];
        const std::uint64_t rows = piece_rows[ref.piece.shard];
        auto put = [&](std::uint64_t row, const float* values) {
            std::copy_n(values, width, dst + table->global_row(row, ref.piece.shard, shards) * width);
        };
        // Lays the rows `blocks_entry` of `in` lists (from its entry `entry`) over those read so far.
        auto lay = [&](const TensorFileReader& in, std::size_t blocks_entry, std::size_t entry) -> Result<void> {
            std::vector<float> blocks(in.tensors()[blocks_entry].count);
            PSRUN_TRY(in.read(blocks_entry, 0, blocks));
            PSRUN_TRY_ASSIGN(const auto local, decode_row_delta_rows(blocks, rows, in.path()));
            return for_each_delta_row(in, entry, local, width, put);
        };
        if (source.listed >= 0) {  // by blocks: every row's initial values, then the rows it lists
            for (std::uint64_t i = 0; i < rows; ++i) {
                const std::uint64_t row = table->global_row(i, ref.piece.shard, shards);
                fill_row(*init, row, std::span<float>(dst + row * width, width));
            }
            PSRUN_TRY(lay(file, static_cast<std::size_t>(source.listed), source.entry));
        } else {
            if (rows > 0 && !t.finite)
                return tl::unexpected(invalid(file.path() + ": '" + t.name + "' holds NaN or Inf"));
            for (std::uint64_t first = 0; first < rows; first += kChunkRows) {
                const std::uint64_t n = std::min(kChunkRows, rows - first);
                chunk.resize(n * width);
                if (auto ok = file.read(source.entry, first * width, chunk); !ok) return ok;
                for (std::uint64_t i = 0; i < n; ++i) put(first + i, chunk.data() + i * width);
            }
        }
        if (source.delta) PSRUN_TRY(lay(*source.delta, source.blocks_entry, source.delta_entry));
    }
    return {};
}

// The initializer `manifest` records for rows tensor `name` ("layout" "tensors": describe_layout()).
std::optional<RowInit> recorded_row_init(const nlohmann::json& manifest, const std::string& name) {
    const auto layout = manifest.find("layout");
    if (layout == manifest.end() || !layout->is_object() || !layout->contains("tensors") ||
        !(*layout)["tensors"].is_array())
        return std::nullopt;
    for (const auto& t : (*layout)["tensors"])
        if (t.is_object() && t.contains("name") && t["name"] == name && t.contains("row_init"))
            return row_init_from_json(t["row_init"]);
    return std::nullopt;
}

}  // namespace

std::string piece_base_name(const std::string& tensor, std::uint64_t offset, std::uint64_t length) {
    return tensor + "@" + std::to_string(offset) + "+" + std::to_string(length);
}

bool parse_piece_name(const std::string& name, PieceName& out) {
    const auto slash = name.rfind('/');
    if (slash == std::string::npos) return false;
    const auto at = name.rfind('@', slash);
    if (at == std::string::npos || at == 0) return false;
    const auto plus = name.find('+', at);
    if (plus == std::string::npos || plus > slash) return false;
    const std::string off = name.substr(at + 1, plus - at - 1);
    const std::string len = name.substr(plus + 1, slash - plus - 1);
    auto digits = [](const std::string& s) {
        return !s.empty() && s.size() <= 19 &&
               std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (!digits(off) || !digits(len)) return false;
    out.tensor = name.substr(0, at);
    out.offset = std::stoull(off);
    out.length = std::stoull(len);
    out.part = name.substr(slash + 1);
    return out.length > 0;
}

std::string row_piece_base_name(const std::string& tensor, std::uint32_t shard, std::uint32_t shards) {
    return tensor + "@" + std::to_string(shard) + "%" + std::to_string(shards);
}

bool parse_row_piece_name(const std::string& name, RowPieceName& out) {
    const auto slash = name.rfind('/');
    if (slash == std::string::npos) return false;
    const auto at = name.rfind('@', slash);
    if (at == std::string::npos || at == 0) return false;
    const auto pct = name.find('%', at);
    if (pct == std::string::npos || pct > slash) return false;
    const std::string a = name.substr(at + 1, pct - at - 1), b = name.substr(pct + 1, slash - pct - 1);
    auto digits = [](const std::string& s) {
        return !s.empty() && s.size() <= 9 &&
               std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (!digits(a) || !digits(b)) return false;
    out.tensor = name.substr(0, at);
    out.shard = static_cast<std::uint32_t>(std::stoul(a));
    out.shards = static_cast<std::uint32_t>(std::stoul(b));
    out.part = name.substr(slash + 1);
    return out.shard < out.shards;
}

Result<CheckpointParameters> load_checkpoint_parameters(const std::string& dir, const std::vector<TensorSpec>& tensors,
                                                        CheckpointValues values) {
    // The sparse tables' rows are averaged too (psd/row_store.h): "<table>@<s>%<K>/ema" pieces.
    const std::string dense_part = values == CheckpointValues::kAverage ? "ema" : "param";
    bool any_dense_piece = false;
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
        return make_error(ErrorCode::kNotFound, "checkpoint " + dir + " is not a directory");
    PSRUN_TRY_ASSIGN(auto manifest, CheckpointStore::read_manifest(CheckpointInfo{0, dir}));
    CheckpointParameters out;
    const auto step = manifest.find("step");
    if (step == manifest.end() || !step->is_number_integer())
        return make_error(ErrorCode::kInvalidArgument, dir + "/manifest.json: no integer \"step\"");
    out.step = step->get<std::int64_t>();

    std::map<std::string, std::size_t> index;       // tensor name -> position in `tensors`
    std::vector<std::size_t> base(tensors.size());  // flat offset of each dense tensor
    std::size_t total = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        index[tensors[i].name] = i;
        base[i] = total;
        if (!tensors[i].rows()) total += tensors[i].elements();
    }
    out.values.assign(total, 0.0f);
    std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> covered(tensors.size());
    // A sparse table read into a dense tensor: source shard count -> the shards whose rows were read.
    std::vector<std::map<std::uint32_t, std::vector<std::uint32_t>>> row_shards(tensors.size());
    std::vector<bool> row_params(tensors.size(), false);               // a sparse table's "param" pieces seen
    std::vector<std::vector<RowPieceRef>> row_pieces(tensors.size());  // read once all are known
    std::vector<TensorFileReader> files;                               // kept open for those reads

    for (const auto& f : manifest["files"]) {
        if (!f.is_string()) return make_error(ErrorCode::kInvalidArgument, dir + "/manifest.json: bad \"files\" entry");
        const std::string name = f.get<std::string>();
        if (!name.starts_with("ps-") || !name.ends_with(".tensors")) continue;  // not a psd shard file
        const std::string path = dir + "/" + name;
        PSRUN_TRY_ASSIGN(auto opened,
                         TensorFileReader::open(path));  // streamed: a sparse table's rows are only scanned
        files.push_back(std::move(opened));
        const TensorFileReader* file = &files.back();
        ++out.shards;
        for (std::size_t e = 0; e < file->tensors().size(); ++e) {
            const TensorFileEntry& t = file->tensors()[e];
            PieceName piece;
            RowPieceName row_piece;
            if (parse_row_piece_name(t.name, row_piece)) {
                // ("blocks", "base", "rows": a piece by blocks, read with its "param": row_source())
                if (row_piece.part != "param" && row_piece.part != dense_part && row_piece.part != "keys") continue;
                const auto it = index.find(row_piece.tensor);
                if (it == index.end())
                    return tl::unexpected(
                        invalid(path + ": table '" + row_piece.tensor + "' is not part of this model"));
                const std::size_t k = it->second;
                if (tensors[k].rows()) continue;  // kept sparse by the caller: not in the dense buffer
                if (row_piece.part == "keys")     // its rows are by slot, not by row id
                    return tl::unexpected(invalid(path + ": '" + row_piece.tensor +
                                                  "' is a table keyed by raw ids, which "
                                                  "cannot be read as a dense tensor"));
                if (row_piece.part == "param") row_params[k] = true;
                if (row_piece.part != dense_part) continue;
                any_dense_piece = true;
                row_pieces[k].push_back(RowPieceRef{files.size() - 1, e, row_piece});
                row_shards[k][row_piece.shards].push_back(row_piece.shard);
                continue;
            }
            if (!parse_piece_name(t.name, piece))
                return tl::unexpected(invalid(path + ": unexpected tensor '" + t.name + "'"));
            if (piece.part != dense_part) continue;
            any_dense_piece = true;
            const auto it = index.find(piece.tensor);
            if (it == index.end())
                return tl::unexpected(invalid(path + ": tensor '" + piece.tensor + "' is not part of this model"));
            const std::size_t k = it->second;
            if (tensors[k].rows())
                return tl::unexpected(invalid(path + ": '" + piece.tensor + "' is a sparse table in this model, the " +
                                              "checkpoint holds it as a dense tensor"));
            if (piece.offset + piece.length > tensors[k].elements() || t.count != piece.length)
                return tl::unexpected(invalid(path + ": piece '" + t.name + "' does not fit tensor '" + piece.tensor +
                                              "' of " + std::to_string(tensors[k].elements()) + " floats"));
            if (!t.finite) return tl::unexpected(invalid(path + ": '" + t.name + "' holds NaN or Inf"));
            const std::span<float> dst(out.values.data() + base[k] + piece.offset, piece.length);
            PSRUN_TRY(file->read(e, 0, dst));
            covered[k].emplace_back(piece.offset, piece.length);
        }
    }
    if (out.shards == 0)
        return make_error(ErrorCode::kInvalidArgument, "checkpoint " + dir + " lists no psd shard file");
    if (values == CheckpointValues::kAverage && !any_dense_piece)
        return make_error(ErrorCode::kNotFound, "checkpoint " + dir +
                                                    " holds no moving average of the weights: the run "
                                                    "was trained without --ema-decay (drop --ema, or train with it)");
    for (std::size_t k = 0; k < tensors.size(); ++k) {
        if (tensors[k].rows()) continue;
        if (values == CheckpointValues::kAverage && row_shards[k].empty() && row_params[k])
            return make_error(ErrorCode::kNotFound,
                              "checkpoint " + dir + " holds no moving average of the rows of sparse table '" +
                                  tensors[k].name + "' (written before psd averaged them; drop --ema)");
        if (!row_shards[k].empty()) {  // a sparse table: every source shard's rows, once
            auto [shards, seen] = *row_shards[k].begin();
            std::sort(seen.begin(), seen.end());
            const bool complete = row_shards[k].size() == 1 && seen.size() == shards &&
                                  std::adjacent_find(seen.begin(), seen.end()) == seen.end();
            if (!complete)
                return tl::unexpected(invalid("checkpoint " + dir + " does not hold all rows of sparse table '" +
                                              tensors[k].name + "': " + std::to_string(seen.size()) + " pieces for " +
                                              std::to_string(shards) + " shards"));
            if (!covered[k].empty())
                return tl::unexpected(
                    invalid("checkpoint " + dir + " holds '" + tensors[k].name + "' both as rows and dense"));
            PSRUN_TRY(read_row_table(files, row_pieces[k], tensors[k], recorded_row_init(manifest, tensors[k].name),
                                     dir, out.values.data() + base[k]));
            continue;
        }
        auto& pieces = covered[k];
        std::sort(pieces.begin(), pieces.end());
        std::uint64_t next = 0;
        for (const auto& [offset, length] : pieces) {
            if (offset < next)
                return tl::unexpected(invalid("checkpoint " + dir + ": pieces of '" + tensors[k].name +
                                              "' overlap at " + std::to_string(offset)));
            if (offset > next) break;
            next = offset + length;
        }
        if (next != tensors[k].elements())
            return tl::unexpected(invalid("checkpoint " + dir + " does not hold all of '" + tensors[k].name +
                                          "': floats [" + std::to_string(next) + ", ...) are missing"));
    }
    return out;
}

}  // namespace psrun
