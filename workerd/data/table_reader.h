// Tabular data for feature, token and regression models (and images kept as rows of pixels):
//  - CSV (workerd/data/csv_reader.h): --inputs names the input columns (default: every column
//    but the targets), --targets the target columns (default: a column named "label").
//    Inputs are numbers (token ids: integers; categorical values, several inputs by column:
//    workerd/data/column_table.h); a class target column of integers is used as
//    is, any other is read as class names, numbered in sorted order (recorded as class names).
//    For an image model whose input values are all integers 0-255 the pixels are kept as uint8
//    and scaled by 1/255 like IDX files; other values are used as written.
//  - .npz (workerd/data/npz_reader.h): --inputs names the input array (default "x"), --targets
//    the target array (default "y"), each with one row per example.
// The whole table is read into memory. Errors (kInvalidArgument) name the file and the line,
// column or array.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/labeled_images.h"

namespace psrun::worker {

enum class TableFormat { kCsv, kNpz };

struct TableColumns {
    std::vector<std::string> inputs;  // empty: the defaults above
    std::vector<std::string> targets;
};

struct Table {
    LabeledImages data;       // shaped for the model (conform_to_model applied)
    std::string description;  // "CSV table F: 150 rows, 4 input columns, target 'species' (3 classes)"
};

[[nodiscard]] Result<Table> load_table(const std::string& path, TableFormat format, const TableColumns& columns,
                                       const ModelInput& model);

// The same from bytes already in memory (`path` names them in messages; fuzzing).
[[nodiscard]] Result<Table> parse_table(const std::vector<std::uint8_t>& bytes, const std::string& path,
                                        TableFormat format, const TableColumns& columns, const ModelInput& model);

}  // namespace psrun::worker
