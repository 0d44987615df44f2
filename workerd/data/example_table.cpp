#include "workerd/data/example_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <span>

#include "workerd/data/column_table.h"
#include "workerd/data/example_proto.h"
#include "workerd/data/reader_common.h"
#include "workerd/data/tfrecord_reader.h"

namespace psrun::worker {
namespace {

constexpr char kBagSeparator = '\x1f';  // the rows' value separator (ASCII unit separator)

tl::unexpected<Error> invalid(const std::string& message) {
    return tl::unexpected(Error{ErrorCode::kInvalidArgument, message});
}

// What one column of the rows holds: `slots` values of feature keys[key] from `first`.
enum class CellKind { kFloat, kIds, kTarget };
struct Cell {
    std::string name;  // the column's name in the rows (an id feature's own name: its hash seed)
    std::size_t key = 0;
    std::size_t slots = 1;  // float and target cells: the feature's values per example
    std::size_t first = 0;  // this column's first value in the feature
    CellKind kind = CellKind::kFloat;
    std::string what;  // "the float input num", for messages
};

std::string number_text(float v) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

void put_field(std::string& out, const std::string& value) {
    out += '"';
    for (const char c : value) {
        if (c == '"') out += '"';
        out += c;
    }
    out += '"';
}

// The column's cell of one Example (`f`: the values of its feature `name`; `where` starts
// messages).
Result<std::string> cell_text(const Cell& cell, const FeatureValues& f, const std::string& name,
                              const std::string& where) {
    const std::string feature = "feature '" + name + "' (" + to_string(f.kind) + ")";
    if (cell.kind == CellKind::kIds) {
        std::string out;
        const std::size_t n = f.size();
        for (std::size_t i = 0; i < n; ++i) {
            if (i) out += kBagSeparator;
            if (f.kind == FeatureKind::kInt64) {
                out += std::to_string(f.ints[i]);
            } else if (f.kind == FeatureKind::kBytes) {
                const std::string v(f.bytes[i].begin(), f.bytes[i].end());
                if (v.find(kBagSeparator) != std::string::npos)
                    return invalid(where + feature + ": a value holds the byte 0x1f, which psrun's rows reserve");
                out += v;
            } else {
                return invalid(where + feature + ": " + cell.what +
                               " takes bytes_list or int64_list values "
                               "(categorical), not float_list");
            }
        }
        return out;
    }
    if (f.kind == FeatureKind::kMissing || f.size() == 0) {
        if (cell.kind == CellKind::kTarget) return invalid(where + "no target feature '" + name + "'");
        return std::string();  // a float: 0, counted as an empty cell
    }
    if (f.size() != cell.slots)
        return invalid(where + feature + " has " + std::to_string(f.size()) + " values: " + cell.what + " takes " +
                       std::to_string(cell.slots) + " from it");
    if (f.kind == FeatureKind::kFloat) {
        const float v = f.floats[cell.first];
        if (!std::isfinite(v))
            return invalid(where + feature + ": value " + std::to_string(cell.first) + " is " + number_text(v) +
                           ", not a finite number (" + cell.what + ")");
        return number_text(v);
    }
    if (f.kind == FeatureKind::kInt64) return std::to_string(f.ints[cell.first]);
    if (cell.kind == CellKind::kTarget && cell.slots == 1) return std::string(f.bytes[0].begin(), f.bytes[0].end());
    return invalid(where + feature + ": " + cell.what + " takes float_list or int64_list values");
}

// The rows' columns for `spec` (a float or target feature of k values: k columns, "NAME[i]"),
// with the spec and target names the CSV reader reads them by.
struct Layout {
    std::vector<std::string> keys;  // features to find in each Example
    std::vector<Cell> cells;
    ColumnSpec spec;
    std::vector<std::string> targets;
};

std::size_t key_of(Layout& l, const std::string& name) {
    const auto it = std::find(l.keys.begin(), l.keys.end(), name);
    if (it != l.keys.end()) return static_cast<std::size_t>(it - l.keys.begin());
    l.keys.push_back(name);
    return l.keys.size() - 1;
}

void add_cells(Layout& l, const std::string& feature, std::size_t slots, CellKind kind, const std::string& what,
               std::vector<std::string>& names) {
    const std::size_t key = key_of(l, feature);
    for (std::size_t i = 0; i < slots; ++i) {
        const std::string name = slots == 1 ? feature : feature + "[" + std::to_string(i) + "]";
        l.cells.push_back(Cell{name, key, slots, i, kind, what});
        names.push_back(name);
    }
}

Result<Layout> make_layout(const std::string& path, const ColumnSpec& spec, const std::vector<TableInput>& inputs,
                           const std::vector<std::string>& targets, const ModelInput& model) {
    if (spec.separator != 0 || !spec.header.empty() || spec.delimiter != 0)
        return invalid(path +
                       ": a TFRecord file of Examples: its features are lists already and named: drop "
                       "--value-separator, --column-names and --delimiter (CSV/TSV options)");
    for (const auto& w : spec.weights)
        if (w.combiner == BagCombiner::kWeighted)
            return invalid(path + ": --bag-weights " + w.input + "=" + w.bag +
                           ":weighted reads CSV cells of VALUE:WEIGHT: give sum or mean for "
                           "TFRecord Examples");
    Layout l;
    l.spec = spec;
    l.spec.separator = kBagSeparator;
    l.spec.delimiter = ',';
    for (auto& feed : l.spec.feeds) {
        const auto in =
            std::find_if(inputs.begin(), inputs.end(), [&](const TableInput& t) { return t.name == feed.input; });
        const std::vector<std::string> features = std::move(feed.columns);
        feed.columns.clear();
        if (in == inputs.end() || in->ints || features.empty()) {  // checked by the CSV reader
            for (const auto& f : features) {
                l.cells.push_back(Cell{f, key_of(l, f), 1, 0, CellKind::kIds, "the id input " + feed.input});
                feed.columns.push_back(f);
            }
            continue;
        }
        if (in->width % features.size() != 0)
            return invalid(path + ": the float input " + in->name + " " + in->shape + " takes " +
                           std::to_string(in->width) +
                           " values per example: name features whose values divide "
                           "them evenly (given " +
                           std::to_string(features.size()) + ")");
        for (const auto& f : features)
            add_cells(l, f, in->width / features.size(), CellKind::kFloat, "the float input " + in->name, feed.columns);
    }
    const std::vector<std::string> names = targets.empty() ? std::vector<std::string>{"label"} : targets;
    const std::size_t width = model.target == TargetKind::kVector ? static_cast<std::size_t>(model.target_length) : 1;
    if (width == 0 || width % names.size() != 0)
        return invalid(path + ": --targets names " + std::to_string(names.size()) + " features but the model " +
                       model.name + " takes " + std::to_string(width) + " target values");
    for (const auto& t : names) add_cells(l, t, width / names.size(), CellKind::kTarget, "the target", l.targets);
    return l;
}

}  // namespace

Result<Table> parse_example_table(const std::vector<std::vector<std::uint8_t>>& records, const std::string& path,
                                  const ColumnSpec& spec, const std::vector<TableInput>& inputs,
                                  const std::vector<std::string>& targets, const ModelInput& model) {
    PSRUN_TRY_ASSIGN(auto layout, make_layout(path, spec, inputs, targets, model));
    // The spec as the rows give it (a float feature of k values: k columns): checked before any
    // record.
    PSRUN_TRY(check_column_spec(layout.spec, inputs, model.name));
    if (records.empty()) return invalid(path + ": no records");
    if (spec.targets_optional) {  // new rows without target features: the CSV reader reads 0s
        std::vector<std::string> names = targets.empty() ? std::vector<std::string>{"label"} : targets;
        std::vector<FeatureValues> first(names.size());
        if (parse_example(records.front(), names, first) &&
            std::all_of(first.begin(), first.end(),
                        [](const FeatureValues& f) { return f.kind == FeatureKind::kMissing; })) {
            std::erase_if(layout.cells, [](const Cell& c) { return c.kind == CellKind::kTarget; });
            layout.targets = std::move(names);
        }
    }
    std::string text;
    for (const auto& c : layout.cells) {
        if (&c != &layout.cells.front()) text += ',';
        put_field(text, c.name);
    }
    text += '\n';
    std::vector<FeatureValues> values(layout.keys.size());
    for (std::size_t r = 0; r < records.size(); ++r) {
        const std::string where = path + ": record " + std::to_string(r) + ": ";
        if (auto ok = parse_example(records[r], layout.keys, values); !ok) return invalid(where + ok.error().message);
        for (std::size_t i = 0; i < layout.cells.size(); ++i) {
            const Cell& c = layout.cells[i];
            auto cell = cell_text(c, values[c.key], layout.keys[c.key], where);
            if (!cell) {
                const std::string has = describe_example_keys(records[r]);
                return invalid(cell.error().message + " (it has: " + (has.empty() ? "no features" : has) + ")");
            }
            if (i) text += ',';
            put_field(text, *cell);
        }
        text += '\n';
    }
    const std::vector<std::uint8_t> bytes(text.begin(), text.end());
    auto table = parse_column_table(bytes, path, layout.spec, inputs, layout.targets, model);
    if (!table) return tl::unexpected(table.error());
    if (table->description.starts_with("CSV table"))
        table->description = "TFRecord Examples" + table->description.substr(9);
    return table;
}

Result<Table> load_table_or_examples(const std::string& path, const ColumnSpec& spec,
                                     const std::vector<TableInput>& inputs, const std::vector<std::string>& targets,
                                     const ModelInput& model) {
    auto bytes = read_maybe_gzip(path);
    if (!bytes) return make_error(ErrorCode::kInvalidArgument, bytes.error().message);
    const std::vector<std::uint8_t> head(
        bytes->begin(), bytes->begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(64, bytes->size())));
    if (!looks_like_tfrecord(head)) return parse_column_table(*bytes, path, spec, inputs, targets, model);
    PSRUN_TRY_ASSIGN(auto records, parse_tfrecords(*bytes, path, CorruptRecords::kError));
    return parse_example_table(records, path, spec, inputs, targets, model);
}

}  // namespace psrun::worker
