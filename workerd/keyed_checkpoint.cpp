#include "workerd/keyed_checkpoint.h"

#include <algorithm>
#include <array>
#include <fstream>

#include "common/row_init.h"
#include "workerd/nn/parameter_init.h"

namespace psrun::worker {
namespace {

// The embedding node whose table is model.tensors[tensor], or nullptr.
const nn::Node* keyed_table_reader(const nn::ModelDescription& model, std::size_t tensor) {
    for (const auto& n : model.nodes)
        if (n.op == "embedding" && n.inputs.size() > n.data_inputs &&
            n.inputs[n.data_inputs] == model.tensors[tensor].name)
            return &n;
    return nullptr;
}

// The embedding node `name` names (its own name or its table's), or nullptr.
const nn::Node* keyed_named_embedding(const nn::ModelDescription& model, const std::string& name) {
    for (const auto& n : model.nodes)
        if (n.op == "embedding" &&
            (n.name == name || (n.inputs.size() > n.data_inputs && n.inputs[n.data_inputs] == name)))
            return &n;
    return nullptr;
}

}  // namespace

std::optional<std::uint64_t> recorded_run_seed(const std::string& model_dir) {
    std::ifstream in(model_dir + "/summary.json");
    if (!in) return std::nullopt;
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("seed") || !j["seed"].is_number_unsigned())
        return std::nullopt;
    return j["seed"].get<std::uint64_t>();
}

Result<std::vector<std::size_t>> mark_keyed_tables(const nlohmann::json& manifest, const nn::ModelDescription& model,
                                                   std::vector<TensorSpec>& tensors,
                                                   std::optional<std::uint64_t> fallback_seed,
                                                   const std::string& where) {
    std::vector<std::size_t> out;
    if (!manifest.is_object() || !manifest.contains("layout") || !manifest["layout"].is_object() ||
        !manifest["layout"].contains("tensors") || !manifest["layout"]["tensors"].is_array())
        return out;  // an older manifest: no keyed table then
    for (const auto& entry : manifest["layout"]["tensors"]) {
        if (!entry.is_object() || !entry.contains("kind") || !entry["kind"].is_string() ||
            entry["kind"].get<std::string>() != to_string(TensorKind::kKeyedRows))
            continue;
        const std::string name = entry.value("name", std::string());
        const auto it =
            std::find_if(tensors.begin(), tensors.end(), [&](const TensorSpec& t) { return t.name == name; });
        if (it == tensors.end())
            return make_error(ErrorCode::kInvalidArgument,
                              where + ": keyed table '" + name + "' is not part of its model");
        const auto k = static_cast<std::size_t>(it - tensors.begin());
        if (it->shape.size() != 2 || keyed_table_reader(model, k) == nullptr)
            return make_error(ErrorCode::kInvalidArgument,
                              where + ": keyed table '" + name + "' is no embedding's table");
        std::optional<RowInit> init;
        if (entry.contains("row_init")) {
            init = row_init_from_json(entry["row_init"]);
            if (!init)
                return make_error(ErrorCode::kInvalidArgument,
                                  where + ": keyed table '" + name + "' has a damaged row_init");
        } else if (fallback_seed) {
            init = nn::table_row_init(model, k, *fallback_seed);
            if (!init)
                return make_error(ErrorCode::kInvalidArgument,
                                  where + ": keyed table '" + name + "' has an initializer psd cannot draw by row");
        } else {
            return make_error(ErrorCode::kNotFound,
                              where + " records no initializer of keyed table '" + name +
                                  "' (written before psrun recorded them) and the model dir's summary.json no --seed: "
                                  "the ids that are not rows have no initial values; evaluate a newer checkpoint");
        }
        it->kind = TensorKind::kKeyedRows;
        it->row_init = *init;
        out.push_back(k);
    }
    std::sort(out.begin(), out.end());
    return out;
}

Result<void> check_raw_id_names(const nn::ModelDescription& model, const std::vector<std::size_t>& keyed,
                                const std::vector<std::string>& names, const std::string& where) {
    std::vector<bool> named(keyed.size(), false);
    for (const auto& name : names) {
        const nn::Node* node = keyed_named_embedding(model, name);
        if (node == nullptr)
            return make_error(ErrorCode::kUnsupported, "--raw-ids " + name + ": no embedding of model " + model.name +
                                                           " has that name or table");
        const std::string& table = node->inputs[node->data_inputs];
        const auto it =
            std::find_if(keyed.begin(), keyed.end(), [&](std::size_t k) { return model.tensors[k].name == table; });
        if (it == keyed.end())
            return make_error(ErrorCode::kUnsupported, "--raw-ids " + name + ": table " + table + " of embedding " +
                                                           node->name + " is not keyed by raw ids in " + where +
                                                           " (the run trained it on row ids): drop --raw-ids " + name);
        named[static_cast<std::size_t>(it - keyed.begin())] = true;
    }
    for (std::size_t i = 0; i < keyed.size(); ++i) {
        if (named[i]) continue;
        const nn::Node* node = keyed_table_reader(model, keyed[i]);
        return make_error(ErrorCode::kUnsupported, where + " holds table " + model.tensors[keyed[i]].name +
                                                       " keyed by raw 64-bit ids (trained with "
                                                       "--raw-ids " +
                                                       node->name + "): give --raw-ids " + node->name +
                                                       ", as in training, so that its "
                                                       "input " +
                                                       node->inputs.front() + " is read as raw ids");
    }
    return {};
}

std::vector<std::string> keyed_embedding_names(const nn::ModelDescription& model,
                                               const std::vector<std::size_t>& keyed) {
    std::vector<std::string> out;
    for (const std::size_t k : keyed)
        if (const nn::Node* node = keyed_table_reader(model, k)) out.push_back(node->name);
    return out;
}

Result<std::vector<KeyedRows>> load_keyed_tables(const std::string& dir, const std::vector<TensorSpec>& tensors,
                                                 const std::vector<std::size_t>& keyed, bool average) {
    std::vector<KeyedRows> out;
    for (const std::size_t k : keyed) {
        PSRUN_TRY_ASSIGN(auto rows, KeyedRows::load(dir, tensors.at(k), average));
        out.push_back(std::move(rows));
    }
    return out;
}

}  // namespace psrun::worker
