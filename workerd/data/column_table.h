// A CSV/TSV table that feeds several model inputs by column (docs/data.md "Recommender
// tables"): the columns ColumnSpec names for each input (workerd/data/column_spec.h), the
// targets as a one-input table reads them (--targets, default the column "label"). Read once,
// into memory; every categorical value is hashed here, at load, never during a step.
//   float inputs  one number per column; an empty cell reads as 0 (counted)
//   id inputs     each value hashed with its column's name (categorical_hash.h) into the rows
//                 [0, V) of the smallest embedding that reads the input. Without a separator a
//                 cell is one value and an empty cell is the value "" (the column's own
//                 "missing" id). With --value-separator a cell is a bag of values (empty items
//                 skipped) filling its column's width / columns slots in order: fewer values are
//                 padded with the column's missing id, more are truncated to the first ones (the
//                 dropped values and their rows are counted in the description)
//   bag weights   per slot of the bag input: 1 (sum), 1/n (mean, n the values kept) or the
//                 value's own weight (weighted: cells of VALUE:WEIGHT) for a value, 0 for padding
// The primary input (inputs[0]) becomes the split's features or tokens, the others its
// columns (LabeledImages::columns, model order, the label input left out). Errors
// (kInvalidArgument) name the file, the line and the column, or the option.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/column_spec.h"
#include "workerd/data/table_reader.h"

namespace psrun::worker {

// Reads the table at `path` (gzip inflated). `inputs` are the model's inputs, the primary one
// first; `targets` the target columns (empty: "label"); `model` the primary input and target
// kinds. `spec` is checked against `inputs` first (check_column_spec).
[[nodiscard]] Result<Table> load_column_table(const std::string& path, const ColumnSpec& spec,
                                              const std::vector<TableInput>& inputs,
                                              const std::vector<std::string>& targets, const ModelInput& model);

// The same from bytes in memory (`path` names them in messages and, without spec.delimiter,
// chooses the delimiter: a tab for .tsv and .tsv.gz, else a comma; fuzzing). With spec.header
// every line is a row, named by spec.header.
[[nodiscard]] Result<Table> parse_column_table(const std::vector<std::uint8_t>& bytes, const std::string& path,
                                               const ColumnSpec& spec, const std::vector<TableInput>& inputs,
                                               const std::vector<std::string>& targets, const ModelInput& model);

}  // namespace psrun::worker
