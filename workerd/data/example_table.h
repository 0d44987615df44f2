// TFRecord files of tf.train.Example records feeding several model inputs by feature name
// (docs/data.md "Recommender tables", TFRecord): the same ColumnSpec as a CSV table, naming
// features instead of columns, read once into memory with the same hashing (column_table.h):
//   id inputs     bytes_list values hashed as CSV strings, int64_list values as CSV integers
//                 (canonical decimal, so int64 7 and the string "7" of the same feature are one
//                 id), seeded by the feature's name; each feature fills width / features slots,
//                 padded with its missing id (an absent or empty feature: all padding) or
//                 truncated (counted), as a bag cell is; float_list refused
//   float inputs  float_list or int64_list values; a feature fills width / features slots and
//                 holds exactly that many values, or none (absent: zeros, counted as empty)
//   targets       features (default "label") of one value each (a vector model: width /
//                 features each): int64_list or bytes_list class labels, numbers for vectors
//   bag weights   sum or mean as for CSV; weighted (VALUE:WEIGHT cells) is CSV only
// Each Example becomes one row of the CSV reader (parse_column_table), so both forms share one
// definition of every value. With spec.targets_optional, a first record with none of the target
// features makes the targets absent (0s, TableTargets::absent) for every record.
// --value-separator, --column-names and --delimiter are CSV options
// and are refused here. Errors (kInvalidArgument) name the file, the record and the feature.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/column_spec.h"
#include "workerd/data/table_reader.h"

namespace psrun::worker {

// Reads the serialized Examples `records` (TFRecord framing removed; `path` names them in
// messages). `inputs`, `targets` and `model` as for parse_column_table.
[[nodiscard]] Result<Table> parse_example_table(const std::vector<std::vector<std::uint8_t>>& records,
                                                const std::string& path, const ColumnSpec& spec,
                                                const std::vector<TableInput>& inputs,
                                                const std::vector<std::string>& targets, const ModelInput& model);

// Reads `path`, a CSV/TSV table or a TFRecord file of Examples (gzip allowed; told apart by its
// first record's framing, as the one-input readers do), by the spec.
[[nodiscard]] Result<Table> load_table_or_examples(const std::string& path, const ColumnSpec& spec,
                                                   const std::vector<TableInput>& inputs,
                                                   const std::vector<std::string>& targets, const ModelInput& model);

}  // namespace psrun::worker
