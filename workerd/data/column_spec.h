// Which columns of a CSV/TSV table feed which inputs of a model (docs/data.md "Recommender
// tables"), from the training options:
//   --input-columns NAME=COL[,COL...]   (repeated) the columns of the model input NAME: a float
//                                       input reads one number per column; an int (id) input
//                                       hashes each value of its columns (categorical_hash.h)
//   --value-separator C                 cells of id inputs hold several values separated by C
//                                       (multi-valued fields: "tag1|tag7"); each column then
//                                       fills width / columns slots of its input (a bag)
//   --bag-weights W=BAG[:sum|mean|weighted]  (repeated) the float input W gets, per slot of
//                                       the id input BAG, 1 (sum; mean: 1/n of the cell's n
//                                       values; weighted: the value's own weight, written
//                                       VALUE:WEIGHT in the cell) for a value and 0 for padding
//   --column-names A,B,...              the table has no header line (Criteo's files): these
//                                       name its columns
//   --delimiter comma|tab|C             the field delimiter (default: by the file name)
// Plain values; parse_column_spec and check_column_spec only read their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace psrun::worker {

// kWeighted: the cell's values carry their weights, VALUE:WEIGHT (a value without one weighs 1).
enum class BagCombiner { kSum, kMean, kWeighted };

struct ColumnFeed {
    std::string input;                 // a model input
    std::vector<std::string> columns;  // header names, in the order their values fill the input
};

struct BagWeights {
    std::string input;  // a float model input, as wide as `bag`
    std::string bag;    // an id input fed by a ColumnFeed
    BagCombiner combiner = BagCombiner::kSum;
};

struct ColumnSpec {
    std::vector<ColumnFeed> feeds;
    std::vector<BagWeights> weights;
    char separator = 0;  // 0: one value per cell
    // --column-names A,B,...: the table has no header line, these name its columns; empty: the
    // first line names them.
    std::vector<std::string> header;
    char delimiter = 0;  // --delimiter comma|tab|C; 0: a tab for .tsv (and .tsv.gz), else a comma
    // psrun predict on new rows: a table with none of its target columns reads every target as
    // 0 (TableTargets::absent); false: they are required.
    bool targets_optional = false;
    bool given() const { return !feeds.empty(); }
};

// What the table reader needs to know of one model input (workerd/datasets.cpp fills it from
// the model's description; the data layer does not read descriptions).
struct TableInput {
    std::string name;
    bool ints = false;      // an id input (hashed categorical values); else float
    std::size_t width = 0;  // values per example (the input's dims multiplied)
    std::string shape;      // "[13] float", for messages
    std::int64_t rows = 0;  // ids: rows of the smallest embedding reading it (0: none does)
    std::string table;      // that embedding's name, for messages
    bool labels = false;    // fed by the data's labels (a graph loss's label input): no columns
    bool raw = false;       // ids read by a table keyed by raw ids (--raw-ids): the unreduced hash, InputColumn::u64
};

// Parses the three options (`separator` empty: none). Errors (kInvalidArgument, naming the
// option and the argument and saying what to give): a malformed NAME=COL list, an empty column
// name, an input named twice, a combiner other than sum, mean or weighted, a separator other than one
// character or one of '"', CR, LF; --bag-weights or --value-separator without --input-columns.
[[nodiscard]] Result<ColumnSpec> parse_column_spec(const std::vector<std::string>& input_columns,
                                                   const std::vector<std::string>& bag_weights,
                                                   std::string_view separator);

// Adds --column-names (`names`, a comma list; empty: none) and --delimiter (`delimiter`: comma,
// tab or one character; empty: by the file name) to `spec`. Errors (kInvalidArgument): an empty
// or repeated name, a delimiter that is a quote, a line break or more than one character, a
// delimiter equal to the value separator.
[[nodiscard]] Result<void> parse_table_layout(std::string_view names, std::string_view delimiter, ColumnSpec& spec);

// Checks `spec` against the inputs of `model_name` (inputs[0] is the primary one). Errors
// (kInvalidArgument, naming the input and what to give): an input the model lacks or fed by the
// labels, an input fed twice or not at all, a float input given another number of columns
// than its width, an id input whose width is not a multiple of its columns or that needs
// several values per cell without --value-separator, an id input no embedding reads, bag
// weights for an input that is not an id input fed by columns or of another width.
[[nodiscard]] Result<void> check_column_spec(const ColumnSpec& spec, const std::vector<TableInput>& inputs,
                                             const std::string& model_name);

}  // namespace psrun::worker
