#include "workerd/data/column_spec.h"

#include <algorithm>

namespace psrun::worker {
namespace {

// "dense [13] float, cat [26] int" (the inputs columns can feed), for messages.
std::string inputs_text(const std::vector<TableInput>& inputs) {
    std::string out;
    for (const auto& in : inputs)
        if (!in.labels) out += (out.empty() ? "" : ", ") + in.name + " " + in.shape;
    return out;
}

std::vector<std::string> split(std::string_view text, char sep) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (true) {
        const std::size_t at = text.find(sep, start);
        out.emplace_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
        if (at == std::string_view::npos) return out;
        start = at + 1;
    }
}

const TableInput* find_input(const std::vector<TableInput>& inputs, const std::string& name) {
    for (const auto& in : inputs)
        if (in.name == name) return &in;
    return nullptr;
}

}  // namespace

Result<ColumnSpec> parse_column_spec(const std::vector<std::string>& input_columns,
                                     const std::vector<std::string>& bag_weights, std::string_view separator) {
    ColumnSpec spec;
    std::vector<std::string> named;
    const auto once = [&](const std::string& name, const std::string& arg) -> Result<void> {
        if (std::find(named.begin(), named.end(), name) != named.end())
            return invalid_argument(arg + ": the input " + name +
                                    " is already given (one --input-columns or --bag-weights per input)");
        named.push_back(name);
        return {};
    };
    for (const auto& arg : input_columns) {
        const std::string where = "--input-columns " + arg;
        const auto eq = arg.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
            return invalid_argument(
                where +
                ": expected NAME=COLUMN[,COLUMN...] (a model input and the table columns that feed it, "
                "e.g. dense=I1,I2,I3)");
        ColumnFeed feed{arg.substr(0, eq), split(std::string_view(arg).substr(eq + 1), ',')};
        for (const auto& c : feed.columns)
            if (c.empty())
                return invalid_argument(where +
                                        ": an empty column name (give NAME=COLUMN[,COLUMN...] without empty items)");
        PSRUN_TRY(once(feed.input, where));
        spec.feeds.push_back(std::move(feed));
    }
    for (const auto& arg : bag_weights) {
        const std::string where = "--bag-weights " + arg;
        const auto eq = arg.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
            return invalid_argument(
                where +
                ": expected WEIGHTS=BAG[:sum|mean|weighted] (a float input and the id input whose bag it weighs)");
        BagWeights w{arg.substr(0, eq), arg.substr(eq + 1), BagCombiner::kSum};
        if (const auto colon = w.bag.find(':'); colon != std::string::npos) {
            const std::string combiner = w.bag.substr(colon + 1);
            w.bag.resize(colon);
            if (combiner == "mean") w.combiner = BagCombiner::kMean;
            else if (combiner == "weighted") w.combiner = BagCombiner::kWeighted;
            else if (combiner != "sum")
                return invalid_argument(where + ": combiner '" + combiner +
                                        "' (give sum: 1 per value, mean: 1/n of the cell's n values, or weighted: "
                                        "VALUE:WEIGHT in the cell)");
        }
        if (w.bag.empty())
            return invalid_argument(where + ": expected WEIGHTS=BAG[:sum|mean|weighted] (no BAG input given)");
        PSRUN_TRY(once(w.input, where));
        spec.weights.push_back(std::move(w));
    }
    if (!separator.empty()) {
        if (separator.size() != 1 || separator == "\"" || separator == "\n" || separator == "\r")
            return invalid_argument("--value-separator '" + std::string(separator) +
                                    "': give one character other than a quote or a line break (e.g. '|')");
        spec.separator = separator[0];
    }
    if (!spec.given() && (!spec.weights.empty() || spec.separator != 0))
        return invalid_argument(
            std::string(spec.weights.empty() ? "--value-separator" : "--bag-weights") +
            " reads a table fed by --input-columns NAME=COLUMN[,COLUMN...]: give --input-columns too");
    return spec;
}

Result<void> parse_table_layout(std::string_view names, std::string_view delimiter, ColumnSpec& spec) {
    if (!names.empty()) {
        spec.header = split(names, ',');
        for (std::size_t i = 0; i < spec.header.size(); ++i) {
            if (spec.header[i].empty())
                return invalid_argument("--column-names: an empty name at position " + std::to_string(i + 1) +
                                        " (give NAME,NAME,... one per column of the table)");
            if (std::find(spec.header.begin(), spec.header.begin() + static_cast<std::ptrdiff_t>(i), spec.header[i]) !=
                spec.header.begin() + static_cast<std::ptrdiff_t>(i))
                return invalid_argument("--column-names: '" + spec.header[i] +
                                        "' names two columns (give each column its own name)");
        }
    }
    if (delimiter == "comma") spec.delimiter = ',';
    else if (delimiter == "tab") spec.delimiter = '\t';
    else if (delimiter.size() == 1 && delimiter != "\"" && delimiter != "\n" && delimiter != "\r")
        spec.delimiter = delimiter[0];
    else if (!delimiter.empty())
        return invalid_argument("--delimiter '" + std::string(delimiter) +
                                "': give comma, tab or one character other than a quote or a line break");
    if (spec.delimiter != 0 && spec.delimiter == spec.separator)
        return invalid_argument("--delimiter and --value-separator are both '" + std::string(1, spec.separator) +
                                "': the values of a cell need a separator of their own");
    return {};
}

Result<void> check_column_spec(const ColumnSpec& spec, const std::vector<TableInput>& inputs,
                               const std::string& model) {
    const auto lookup = [&](const std::string& name, const std::string& where) -> Result<const TableInput*> {
        const TableInput* in = find_input(inputs, name);
        if (in == nullptr)
            return invalid_argument(where + ": model " + model + " has no input '" + name +
                                    "' (its inputs: " + inputs_text(inputs) + ")");
        if (in->labels)
            return invalid_argument(where + ": " + name +
                                    " is the model's label input, fed from the table's --targets columns");
        return in;
    };
    if (inputs.empty() || inputs.front().labels)
        return invalid_argument("model " + model +
                                ": its primary input is fed by the labels; --input-columns feeds the primary input");
    for (const auto& feed : spec.feeds) {
        std::string where = "--input-columns " + feed.input + "=";
        for (std::size_t i = 0; i < feed.columns.size(); ++i) where += (i ? "," : "") + feed.columns[i];
        PSRUN_TRY_ASSIGN(auto found, lookup(feed.input, where));
        const TableInput& in = *found;
        const std::size_t n = feed.columns.size();
        if (in.width == 0)
            return invalid_argument(where + ": the input " + in.name + " " + in.shape + " has no values per example");
        if (!in.ints && n != in.width)
            return invalid_argument(where + ": the float input " + in.name + " " + in.shape + " takes " +
                                    std::to_string(in.width) + " values per example: name " + std::to_string(in.width) +
                                    " columns (given " + std::to_string(n) + ")");
        if (in.ints && in.width % n != 0)
            return invalid_argument(where + ": the id input " + in.name + " " + in.shape + " takes " +
                                    std::to_string(in.width) + " ids per example, not a multiple of its " +
                                    std::to_string(n) + " columns (each column fills width / columns slots)");
        if (in.ints && in.width != n && spec.separator == 0)
            return invalid_argument(where + ": the id input " + in.name + " " + in.shape + " takes " +
                                    std::to_string(in.width / n) +
                                    " ids per column: give --value-separator C for multi-valued cells (e.g. '|'), or " +
                                    std::to_string(in.width) + " columns");
        if (in.ints && in.rows <= 0)
            return invalid_argument(
                where + ": no embedding reads the id input " + in.name +
                ": categorical values are hashed into the rows of the embedding that reads the input");
    }
    for (const auto& w : spec.weights) {
        const std::string where = "--bag-weights " + w.input + "=" + w.bag;
        PSRUN_TRY_ASSIGN(auto found, lookup(w.input, where));
        const auto feed =
            std::find_if(spec.feeds.begin(), spec.feeds.end(), [&](const ColumnFeed& f) { return f.input == w.bag; });
        const TableInput* bag = find_input(inputs, w.bag);
        if (feed == spec.feeds.end() || bag == nullptr || !bag->ints)
            return invalid_argument(where + ": " + w.bag +
                                    " is not an id input fed by --input-columns (give the id input whose bag " +
                                    w.input + " weighs)");
        if (found->ints || found->width != bag->width)
            return invalid_argument(where + ": the weights input " + w.input + " " + found->shape +
                                    " must be float with " + std::to_string(bag->width) +
                                    " values per example, one per slot of " + w.bag + " " + bag->shape +
                                    " (e.g. dims [" + std::to_string(bag->width) + ", 1])");
    }
    for (const auto& in : inputs) {
        if (in.labels) continue;
        const bool fed = std::any_of(spec.feeds.begin(), spec.feeds.end(),
                                     [&](const ColumnFeed& f) { return f.input == in.name; }) ||
                         std::any_of(spec.weights.begin(), spec.weights.end(),
                                     [&](const BagWeights& w) { return w.input == in.name; });
        if (!fed)
            return invalid_argument("model " + model + " takes the input " + in.name + " " + in.shape +
                                    ": give --input-columns " + in.name + "=COLUMN[,COLUMN...]" +
                                    (in.ints ? "" : " (or --bag-weights " + in.name + "=BAG)"));
    }
    return {};
}

}  // namespace psrun::worker
