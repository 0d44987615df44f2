#include "common/row_delta.h"

#include <algorithm>
#include <filesystem>

#include "common/checkpoint_store.h"

namespace psrun {
namespace fs = std::filesystem;
namespace {

constexpr std::uint64_t kDigit = std::uint64_t{1} << 24;

bool is_digit(float f) {
    return f >= 0.0f && f < static_cast<float>(kDigit) && f == static_cast<float>(static_cast<std::uint64_t>(f));
}

// A number < 2^48 as the two digits the "base" and "rows" parts hold.
std::vector<float> encode_two_digits(std::uint64_t n) {
    return {static_cast<float>(n % kDigit), static_cast<float>(n / kDigit)};
}

Result<std::uint64_t> decode_two_digits(std::span<const float> floats, const std::string& error) {
    if (floats.size() != 2 || !is_digit(floats[0]) || !is_digit(floats[1])) return invalid_argument(error);
    return static_cast<std::uint64_t>(floats[0]) + static_cast<std::uint64_t>(floats[1]) * kDigit;
}

}  // namespace

std::vector<float> encode_row_delta_blocks(std::span<const std::uint64_t> blocks) {
    std::vector<float> out;
    out.reserve(2 * blocks.size());
    for (std::uint64_t b : blocks) {
        out.push_back(static_cast<float>(b % kDigit));
        out.push_back(static_cast<float>(b / kDigit));
    }
    return out;
}

std::vector<float> encode_row_delta_base(std::uint64_t base_step) { return encode_two_digits(base_step); }

Result<std::uint64_t> decode_row_delta_base(std::span<const float> floats, const std::string& where) {
    return decode_two_digits(floats, where + ": the base of a differential piece is not a step");
}

std::vector<float> encode_row_count(std::uint64_t rows) { return encode_two_digits(rows); }

Result<std::uint64_t> decode_row_count(std::span<const float> floats, const std::string& where) {
    return decode_two_digits(floats, where + ": the row count of a piece written by blocks is not a number");
}

Result<std::vector<std::uint64_t>> decode_row_delta_rows(std::span<const float> blocks, std::uint64_t source_rows,
                                                         const std::string& where) {
    if (blocks.size() % 2 != 0) return invalid_argument(where + ": a block list of odd length");
    std::vector<std::uint64_t> rows;
    std::uint64_t next = 0;  // the lowest block the next may be
    for (std::size_t i = 0; i < blocks.size(); i += 2) {
        if (!is_digit(blocks[i]) || !is_digit(blocks[i + 1]))
            return invalid_argument(where + ": a block number is not one");
        const std::uint64_t b =
            static_cast<std::uint64_t>(blocks[i]) + static_cast<std::uint64_t>(blocks[i + 1]) * kDigit;
        if (b < next || b * kRowDeltaBlockRows >= source_rows)
            return invalid_argument(where + ": block " + std::to_string(b) + " is out of order or beyond the " +
                                    std::to_string(source_rows) + " rows of its piece");
        next = b + 1;
        for (std::uint64_t r = b * kRowDeltaBlockRows; r < std::min(source_rows, (b + 1) * kRowDeltaBlockRows); ++r)
            rows.push_back(r);
    }
    return rows;
}

Result<void> for_each_delta_row(const TensorFileReader& file, std::size_t entry, std::span<const std::uint64_t> rows,
                                std::uint64_t width, const std::function<void(std::uint64_t, const float*)>& put) {
    const TensorFileEntry& t = file.tensors().at(entry);
    if (t.shape.size() != 2 || t.shape[0] != rows.size() || t.shape[1] != width)
        return invalid_argument(file.path() + ": '" + t.name + "' does not hold the " + std::to_string(rows.size()) +
                                " rows of width " + std::to_string(width) + " its block list names");
    if (!rows.empty() && !t.finite) return invalid_argument(file.path() + ": '" + t.name + "' holds NaN or Inf");
    constexpr std::uint64_t kChunkFloats = 1 << 18;
    const std::uint64_t per_chunk = std::max<std::uint64_t>(1, kChunkFloats / std::max<std::uint64_t>(width, 1));
    std::vector<float> chunk;
    for (std::uint64_t first = 0; first < rows.size(); first += per_chunk) {
        const std::uint64_t n = std::min<std::uint64_t>(per_chunk, rows.size() - first);
        chunk.resize(n * width);
        PSRUN_TRY(file.read(entry, first * width, chunk));
        for (std::uint64_t i = 0; i < n; ++i) put(rows[first + i], chunk.data() + i * width);
    }
    return {};
}

std::string row_delta_base_dir(const std::string& dir, std::uint64_t base_step) {
    fs::path p(dir);
    if (!p.has_filename()) p = p.parent_path();  // a trailing slash
    return (p.parent_path() / checkpoint_dir_name(static_cast<std::int64_t>(base_step))).string();
}

Result<std::vector<std::uint64_t>> row_delta_bases(const std::string& dir) {
    std::vector<std::uint64_t> bases;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (!e.is_regular_file() || !name.starts_with("ps-") || !name.ends_with(".tensors")) continue;
        PSRUN_TRY_ASSIGN(auto file, TensorFileReader::open(e.path().string(), false));
        for (std::size_t i = 0; i < file.tensors().size(); ++i) {
            const auto& t = file.tensors()[i];
            if (!t.name.ends_with("/base") || t.count != 2) continue;
            std::vector<float> floats(2);
            PSRUN_TRY(file.read(i, 0, floats));
            PSRUN_TRY_ASSIGN(const std::uint64_t base, decode_row_delta_base(floats, file.path()));
            bases.push_back(base);
        }
    }
    if (ec) return make_error(ErrorCode::kIo, dir + ": " + ec.message());
    std::sort(bases.begin(), bases.end());
    bases.erase(std::unique(bases.begin(), bases.end()), bases.end());
    return bases;
}

}  // namespace psrun
