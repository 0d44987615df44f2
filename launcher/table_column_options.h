// The recommender-table options of `psrun eval` and `psrun predict` (docs/data.md "Recommender
// tables"): --input-columns, --value-separator, --bag-weights, --column-names, --delimiter, as
// training takes them, so a model trained from a table reads its test or new rows the same way.
#pragma once

#include <CLI/CLI.hpp>

#include "workerd/table_split.h"

namespace psrun::launcher {

// Adds the five options to `cmd`, filling `o` (which must outlive the parse). `data_option`
// names the option giving the table ("--test-data", "--data") in the help texts.
void add_table_column_options(CLI::App& cmd, worker::TableColumnOptions& o, const std::string& data_option);

}  // namespace psrun::launcher
