#include "launcher/table_column_options.h"

namespace psrun::launcher {

void add_table_column_options(CLI::App& cmd, worker::TableColumnOptions& o, const std::string& data_option) {
    cmd.add_option("--input-columns", o.input_columns,
                   "NAME=COL[,COL...]: the CSV/TSV table of " + data_option +
                       " feeds the model input NAME from these columns (TFRecord Examples: "
                       "features), as in training (float inputs: numbers; int inputs: "
                       "categorical values hashed into the rows of the embedding that reads "
                       "them); repeat per input (docs/data.md, Recommender tables)")
        ->expected(1)
        ->take_all();
    cmd.add_option("--value-separator", o.value_separator,
                   "with --input-columns: the cells of int inputs hold several values separated by "
                   "this character, "
                   "as in training");
    cmd.add_option("--bag-weights", o.bag_weights,
                   "WEIGHTS=BAG[:sum|mean|weighted]: with --input-columns, the float input WEIGHTS "
                   "as in training; "
                   "repeat per bag")
        ->expected(1)
        ->take_all();
    cmd.add_option("--column-names", o.column_names,
                   "A,B,...: with --input-columns, the table has no header line: these name its columns");
    cmd.add_option("--delimiter", o.delimiter,
                   "with --input-columns: the table's field delimiter, comma, tab or one character "
                   "(default: a tab "
                   "for .tsv, else a comma)");
}

}  // namespace psrun::launcher
