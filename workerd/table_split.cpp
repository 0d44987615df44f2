#include "workerd/table_split.h"

#include <algorithm>

#include "workerd/data/example_table.h"
#include "workerd/datasets.h"
#include "workerd/nn/model_summary.h"

namespace psrun::worker {

std::vector<TableInput> table_inputs(const nn::ModelDescription& model, const std::vector<std::string>& raw_inputs) {
    std::vector<TableInput> out;
    for (std::size_t i = 0; i < model.inputs.size(); ++i) {
        const nn::InputDef& in = model.inputs[i];
        TableInput t;
        t.name = in.name;
        t.ints = in.info.type == nn::ElementType::kInt;
        t.width = static_cast<std::size_t>(nn::elements_per_example(in.info.dims).value_or(0));
        t.shape = "[" + nn::shape_text(in.info.dims) + "] " + nn::to_string(in.info.type);
        t.labels = model.fed_by_labels(i);
        t.raw = t.ints && std::find(raw_inputs.begin(), raw_inputs.end(), in.name) != raw_inputs.end();
        for (const auto& node : model.nodes)  // the smallest table that reads the ids
            if (node.op == "embedding" && !node.inputs.empty() && node.inputs[0] == in.name) {
                const auto v = node.attrs.value("vocabulary", std::int64_t{0});
                if (v > 0 && (t.rows == 0 || v < t.rows)) {
                    t.rows = v;
                    t.table = node.name;
                }
            }
        out.push_back(std::move(t));
    }
    return out;
}

Result<ColumnSpec> parse_table_columns(const TableColumnOptions& o) {
    if (o.input_columns.empty()) {
        const char* option = !o.bag_weights.empty()       ? "--bag-weights"
                             : !o.value_separator.empty() ? "--value-separator"
                             : !o.column_names.empty()    ? "--column-names"
                                                          : "--delimiter";
        return make_error(ErrorCode::kInvalidArgument,
                          std::string(option) +
                              " reads a table fed by --input-columns NAME=COLUMN[,COLUMN...]: give "
                              "--input-columns too");
    }
    auto spec = parse_column_spec(o.input_columns, o.bag_weights, o.value_separator);
    if (!spec) return tl::unexpected(spec.error());
    PSRUN_TRY(parse_table_layout(o.column_names, o.delimiter, *spec));
    return spec;
}

Result<Table> load_table_split(const std::string& path, const ColumnSpec& spec, const nn::ModelDescription& model,
                               const std::vector<std::string>& targets, const std::vector<std::string>& raw_inputs) {
    const ModelInput input = model_input(model);
    auto table = load_table_or_examples(path, spec, table_inputs(model, raw_inputs), targets, input);
    if (!table) return tl::unexpected(table.error());
    conform_to_model(table->data, input);
    return table;
}

}  // namespace psrun::worker
