#include "workerd/data/column_table.h"

#include <algorithm>
#include <optional>

#include "workerd/data/categorical_hash.h"
#include "workerd/data/csv_reader.h"
#include "workerd/data/reader_common.h"
#include "workerd/data/table_cells.h"
#include "workerd/data/table_targets.h"

namespace psrun::worker {
namespace {

// One input fed by columns, resolved against the header.
struct Feed {
    const TableInput* input = nullptr;
    std::vector<std::size_t> cols;       // header indices
    std::vector<std::uint64_t> seeds;    // ids: column_seed of each column's name
    std::vector<std::uint64_t> missing;  // ids: each column's hash of "" (padding)
    std::size_t slots = 1;               // values per column per example
    bool value_weights = false;          // values are VALUE:WEIGHT (a kWeighted bag)
    std::vector<std::size_t> kept;       // this row: values kept per column
    std::vector<float> slot_weights;     // this row, with value_weights: per slot, 0 for padding
    InputColumn* out = nullptr;
};

// One id of `feed` from its value's hash: the hash itself for raw ids (--raw-ids), else its row
// of the smallest table reading the input.
void push_id(Feed& feed, std::uint64_t hash) {
    if (feed.input->raw) feed.out->u64.push_back(hash);
    else feed.out->i32.push_back(hash_bucket(hash, feed.input->rows));
}

struct Weights {
    const Feed* bag = nullptr;
    BagCombiner combiner = BagCombiner::kSum;
    InputColumn* out = nullptr;
};

struct Counts {
    std::size_t empty_cells = 0;
    std::size_t dropped_values = 0;  // beyond a bag's slots
    std::size_t truncated_rows = 0;
};

class RowReader {
  public:
    RowReader(const std::string& path, char separator, const std::vector<std::string>& header, Counts& counts)
        : path_(path), separator_(separator), header_(header), counts_(counts) {}

    Result<void> read(Feed& feed, const std::vector<std::string>& f, std::size_t line, bool& truncated) {
        const TableInput& in = *feed.input;
        for (std::size_t j = 0; j < feed.cols.size(); ++j) {
            const std::string& cell = f[feed.cols[j]];
            const std::string_view trimmed = trim_cell(cell);
            if (trimmed.empty()) ++counts_.empty_cells;
            if (!in.ints) {
                float v = 0;
                if (!trimmed.empty() && !parse_float_cell(trimmed, v))
                    return invalid_argument(path_ + ": line " + std::to_string(line) + ", column '" +
                                            header_[feed.cols[j]] + "': '" + cell +
                                            "' is not a number (the float input " + in.name + ")");
                feed.out->f32.push_back(v);
                continue;
            }
            if (j == 0) feed.slot_weights.clear();
            std::size_t n = 0;
            Result<void> bad_weight;
            const auto add = [&](std::string_view value) {
                float weight = 1;
                if (const auto colon = value.rfind(':'); feed.value_weights && colon != std::string_view::npos) {
                    if (!parse_float_cell(value.substr(colon + 1), weight) && bad_weight)
                        bad_weight = invalid_argument(
                            path_ + ": line " + std::to_string(line) + ", column '" + header_[feed.cols[j]] + "': '" +
                            std::string(value) + "' has no number after its ':' (a weighted bag reads VALUE:WEIGHT)");
                    value = trim_cell(value.substr(0, colon));
                }
                if (n < feed.slots) {
                    push_id(feed, seeded_hash(feed.seeds[j], value));
                    if (feed.value_weights) feed.slot_weights.push_back(weight);
                } else {
                    ++counts_.dropped_values;
                    truncated = true;
                }
                ++n;
            };
            if (separator_ == 0) {
                add(trimmed);
            } else {
                std::size_t start = 0;
                while (start <= trimmed.size()) {
                    const std::size_t at = std::min(trimmed.find(separator_, start), trimmed.size());
                    const std::string_view value = trim_cell(trimmed.substr(start, at - start));
                    if (!value.empty()) add(value);
                    start = at + 1;
                }
            }
            if (!bad_weight) return bad_weight;
            feed.kept[j] = std::min(n, feed.slots);
            for (std::size_t s = feed.kept[j]; s < feed.slots; ++s) push_id(feed, feed.missing[j]);
            if (feed.value_weights) feed.slot_weights.resize((j + 1) * feed.slots, 0.0f);
        }
        return {};
    }

  private:
    const std::string& path_;
    char separator_;
    const std::vector<std::string>& header_;
    Counts& counts_;
};

void write_weights(const Weights& w) {
    const Feed& bag = *w.bag;
    if (w.combiner == BagCombiner::kWeighted) {
        w.out->f32.insert(w.out->f32.end(), bag.slot_weights.begin(), bag.slot_weights.end());
        return;
    }
    for (const std::size_t n : bag.kept)
        for (std::size_t s = 0; s < bag.slots; ++s)
            w.out->f32.push_back(s >= n ? 0.0f : w.combiner == BagCombiner::kSum ? 1.0f : 1.0f / static_cast<float>(n));
}

std::string describe(const std::string& path, std::size_t rows, const std::vector<Feed>& feeds,
                     const std::vector<Weights>& weights, char separator, const TableTargets& targets,
                     const Counts& c) {
    std::string s = "CSV table " + path + ": " + std::to_string(rows) + " rows; ";
    for (const auto& f : feeds) {
        s += f.input->name + " <- " + std::to_string(f.cols.size()) + (f.cols.size() == 1 ? " column" : " columns");
        if (f.input->ints)
            s += " (" + (f.slots > 1 ? "bags of " + std::to_string(f.slots) + ", " : std::string()) + "hashed into " +
                 std::to_string(f.input->rows) + " rows of " + f.input->table + ")";
        s += ", ";
    }
    for (const auto& w : weights)
        s += w.out->name + " <- " +
             (w.combiner == BagCombiner::kSum    ? "sum"
              : w.combiner == BagCombiner::kMean ? "mean"
                                                 : "the cells' own") +
             " weights of " + w.bag->input->name + ", ";
    s += (targets.is_absent() ? std::string("no target columns") : "target " + quoted_list(targets.names())) + "; " +
         std::to_string(c.empty_cells) + " empty cells";
    if (separator != 0)
        s += "; " + std::to_string(c.dropped_values) + " values beyond a bag's slots dropped in " +
             std::to_string(c.truncated_rows) + " rows (truncated)";
    return s;
}

}  // namespace

Result<Table> parse_column_table(const std::vector<std::uint8_t>& bytes, const std::string& path,
                                 const ColumnSpec& spec, const std::vector<TableInput>& inputs,
                                 const std::vector<std::string>& target_names, const ModelInput& model) {
    PSRUN_TRY(check_column_spec(spec, inputs, model.name));
    const char delimiter = spec.delimiter != 0                                   ? spec.delimiter
                           : path.ends_with(".tsv") || path.ends_with(".tsv.gz") ? '\t'
                                                                                 : ',';
    if (spec.separator == delimiter)
        return invalid_argument(path + ": --value-separator '" + std::string(1, delimiter) +
                                "' is the table's delimiter (give another character, e.g. '|')");
    // One output per input fed by columns, in model order; outputs[0] is the primary input.
    std::vector<InputColumn> outputs;
    for (const auto& in : inputs)
        if (!in.labels) outputs.push_back(InputColumn{in.name, path, in.width, {}, {}, {}});
    const auto output_of = [&](const std::string& name) {
        return &*std::find_if(outputs.begin(), outputs.end(), [&](const InputColumn& c) { return c.name == name; });
    };
    std::vector<Feed> feeds;
    std::vector<Weights> weights;
    std::vector<std::string> header;
    std::optional<TableTargets> targets;
    Counts counts;
    std::optional<RowReader> reader;
    std::size_t rows = 0;
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    const auto start = [&](const std::vector<std::string>& names) -> Result<void> {
        header = names;
        auto found = TableTargets::find(header, target_names, path, model);
        const auto in_header = [&](const std::string& n) {
            return std::find(header.begin(), header.end(), n) != header.end();
        };
        if (!found && spec.targets_optional &&
            (target_names.empty() ? !in_header("label")
                                  : std::none_of(target_names.begin(), target_names.end(), in_header)))
            found = TableTargets::absent(path, model);
        if (!found) return tl::unexpected(found.error());
        targets = std::move(*found);
        feeds.reserve(spec.feeds.size());
        for (const auto& fs : spec.feeds) {
            Feed feed;
            feed.input =
                &*std::find_if(inputs.begin(), inputs.end(), [&](const TableInput& in) { return in.name == fs.input; });
            feed.out = output_of(fs.input);
            feed.slots = feed.input->ints ? feed.input->width / fs.columns.size() : 1;
            for (const auto& name : fs.columns) {
                auto c = find_column(header, name, path);
                if (!c) return invalid_argument(c.error().message + " (--input-columns " + fs.input + ")");
                feed.cols.push_back(*c);
                feed.seeds.push_back(column_seed(name));
                if (feed.input->ints) feed.missing.push_back(seeded_hash(feed.seeds.back(), ""));
            }
            feed.kept.assign(feed.cols.size(), 0);
            feeds.push_back(std::move(feed));
        }
        for (const auto& ws : spec.weights) {
            const auto bag =
                std::find_if(feeds.begin(), feeds.end(), [&](const Feed& fd) { return fd.input->name == ws.bag; });
            weights.push_back(Weights{&*bag, ws.combiner, output_of(ws.input)});
            if (ws.combiner == BagCombiner::kWeighted) bag->value_weights = true;
        }
        reader.emplace(path, spec.separator, header, counts);
        return {};
    };
    auto ok =
        parse_csv(text, delimiter, path, [&](const std::vector<std::string>& f, std::size_t line) -> Result<void> {
            if (header.empty()) {
                if (spec.header.empty()) return start(f);
                if (f.size() != spec.header.size())
                    return invalid_argument(path + ": line " + std::to_string(line) + ": " + std::to_string(f.size()) +
                                            " fields, but --column-names names " + std::to_string(spec.header.size()) +
                                            " columns");
                if (auto started = start(spec.header); !started) return started;
            }
            bool truncated = false;
            for (auto& feed : feeds)
                if (auto read = reader->read(feed, f, line, truncated); !read) return read;
            for (const auto& w : weights) write_weights(w);
            if (truncated) ++counts.truncated_rows;
            if (auto added = targets->add(f, line); !added) return added;
            if (++rows > kMaxExamples)
                return invalid_argument(path + ": more than " + std::to_string(kMaxExamples) + " rows");
            return {};
        });
    if (!ok) return tl::unexpected(ok.error());
    if (rows == 0) return invalid_argument(path + ": a header but no rows");
    Table t;
    LabeledImages& d = t.data;
    PSRUN_TRY(targets->finish(d));
    t.description = describe(path, rows, feeds, weights, spec.separator, *targets, counts);
    InputColumn& primary = outputs.front();
    if (inputs.front().ints) {
        d.input = InputKind::kTokens;
        d.token_length = primary.per_example;
        d.tokens = std::move(primary.i32);
        d.raw_tokens = std::move(primary.u64);  // --raw-ids on the primary input
    } else {
        d.input = InputKind::kFeatures;
        d.images.count = rows;
        d.images.channels = 1;
        d.images.height = 1;
        d.images.width = static_cast<int>(primary.per_example);
        d.images.type = PixelType::kFloat32;
        d.images.f32 = std::move(primary.f32);
    }
    d.columns.assign(std::make_move_iterator(outputs.begin() + 1), std::make_move_iterator(outputs.end()));
    conform_to_model(d, model);
    return t;
}

Result<Table> load_column_table(const std::string& path, const ColumnSpec& spec, const std::vector<TableInput>& inputs,
                                const std::vector<std::string>& targets, const ModelInput& model) {
    auto bytes = read_maybe_gzip(path);
    if (!bytes) return make_error(ErrorCode::kInvalidArgument, bytes.error().message);
    return parse_column_table(*bytes, path, spec, inputs, targets, model);
}

}  // namespace psrun::worker
