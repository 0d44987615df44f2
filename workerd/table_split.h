// One CSV/TSV table (or TFRecord file of tf.train.Example records, by feature name) feeding
// every input of a model by column (docs/data.md "Recommender tables"), as training, psrun eval
// and psrun predict read it: the same options, the same model-to-reader mapping, so the same
// row hashes to the same ids everywhere.
//   --input-columns NAME=COL,... (repeated), --value-separator C, --bag-weights W=BAG[:how]
//   (repeated), --column-names A,B,..., --delimiter comma|tab|C (workerd/data/column_spec.h)
// Plain functions: they only read their arguments.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/column_spec.h"
#include "workerd/data/model_input.h"
#include "workerd/data/table_reader.h"
#include "workerd/nn/model_description.h"

namespace psrun::worker {

// The table options as given on a command line (empty: not given).
struct TableColumnOptions {
    std::vector<std::string> input_columns;
    std::string value_separator;
    std::vector<std::string> bag_weights;
    std::string column_names;
    std::string delimiter;
    // Whether any of them is given (each needs --input-columns: parse_table_columns says so).
    bool any() const {
        return !input_columns.empty() || !value_separator.empty() || !bag_weights.empty() || !column_names.empty() ||
               !delimiter.empty();
    }
};

// The model's inputs as the column table reader sees them: kind, width, the smallest embedding
// reading an id input (its rows bound the hashed ids), whether the labels feed it.
// `raw_inputs`: the inputs read by tables keyed by raw ids (--raw-ids; TableInput::raw).
[[nodiscard]] std::vector<TableInput> table_inputs(const nn::ModelDescription& model,
                                                   const std::vector<std::string>& raw_inputs = {});

// Parses all five options into a ColumnSpec. Errors (kInvalidArgument, naming the option):
// any of them without --input-columns, and every error of parse_column_spec/parse_table_layout.
[[nodiscard]] Result<ColumnSpec> parse_table_columns(const TableColumnOptions& options);

// Reads the table at `path` for `model` (`targets`: the target columns, empty: "label"),
// checked against the model's inputs (check_column_spec) and shaped for it (conform_to_model).
// A file whose first record is TFRecord-framed is read as Examples (workerd/data/example_table.h).
// The inputs in `raw_inputs` (--raw-ids) get the unreduced hashes of their values.
[[nodiscard]] Result<Table> load_table_split(const std::string& path, const ColumnSpec& spec,
                                             const nn::ModelDescription& model, const std::vector<std::string>& targets,
                                             const std::vector<std::string>& raw_inputs = {});

}  // namespace psrun::worker
