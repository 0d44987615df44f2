// Any numeric .npy array (bool, uint8-64, int8-64, float32/64; either byte order) read as N rows
// of values, for feature vectors, token ids and target vectors (workerd/data/table_reader.h,
// .npz members): row i is the i-th sub-array along the first axis, flattened. Errors
// (kInvalidArgument) name the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/npy_reader.h"

namespace psrun::worker {

struct NpyRows {
    std::size_t rows = 0;
    std::size_t cols = 0;   // product of the other dimensions (1 for shape (N,))
    bool integral = false;  // the dtype is bool or an integer type
};

// The shape as rows x cols, checked against the bytes the file holds (truncated / trailing).
[[nodiscard]] Result<NpyRows> npy_rows(std::span<const std::uint8_t> bytes, const NpyHeader& h,
                                       const std::string& path);
// All values as float32 (every one finite).
[[nodiscard]] Result<std::vector<float>> npy_as_floats(std::span<const std::uint8_t> bytes, const NpyHeader& h,
                                                       const std::string& path);
// All values as int32: integer dtypes only, every value within int32.
[[nodiscard]] Result<std::vector<std::int32_t>> npy_as_int32(std::span<const std::uint8_t> bytes, const NpyHeader& h,
                                                             const std::string& path);
// All values as raw 64-bit ids (--raw-ids): integer dtypes only, each exactly (a signed value
// sign-extended, so a negative int64 keeps its bits: raw ids are often signed 64-bit hashes).
[[nodiscard]] Result<std::vector<std::uint64_t>> npy_as_raw_ids(std::span<const std::uint8_t> bytes, const NpyHeader& h,
                                                                const std::string& path);

}  // namespace psrun::worker
