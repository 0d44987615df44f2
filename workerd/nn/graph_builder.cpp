#include "workerd/nn/graph_builder.h"

#include "workerd/nn/graph_loss.h"

#include "workerd/nn/field_reader.h"
#include "workerd/nn/op_schema.h"

namespace psrun::nn {

namespace {

Error invalid(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message)}; }

const char* kNameRule = "1 to 200 of A-Z a-z 0-9 _ - . /";

}  // namespace

GraphBuilder::GraphBuilder(ModelDescription& model, std::string prefix) : model_(model), prefix_(std::move(prefix)) {
    for (const auto& input : model_.inputs) model_.values.emplace(input.name, input.info);
}

std::string GraphBuilder::previous_value() const {
    return model_.nodes.empty() ? model_.input_name() : model_.nodes.back().outputs.front();
}

std::string GraphBuilder::input_names() const {
    std::string out;
    for (const auto& input : model_.inputs) out += (out.empty() ? "\"" : ", \"") + input.name + "\"";
    return out;
}

bool GraphBuilder::taken(const std::string& name) const {
    if (model_.values.count(name) != 0) return true;
    for (const auto& n : model_.nodes)
        if (n.name == name) return true;
    return false;
}

Result<std::vector<std::string>> GraphBuilder::parse_inputs(const nlohmann::json& layer, const std::string& where,
                                                            bool no_inputs) const {
    if (!layer.contains("inputs")) {
        if (no_inputs) return std::vector<std::string>{};
        return std::vector<std::string>{previous_value()};
    }
    const auto& raw = layer.at("inputs");
    std::vector<std::string> names;
    if (raw.is_string()) {
        names.push_back(raw.get<std::string>());
    } else if (raw.is_array() && (!raw.empty() || no_inputs)) {
        for (const auto& v : raw) {
            if (!v.is_string())
                return tl::unexpected(
                    invalid(where + ": field \"inputs\": expected value names, got " + describe_value(v)));
            names.push_back(v.get<std::string>());
        }
    } else {
        return tl::unexpected(
            invalid(where + ": field \"inputs\": expected a value name or a list of them, got " + describe_value(raw)));
    }
    for (const auto& n : names) {
        if (model_.values.count(n) == 0)
            return tl::unexpected(invalid(where + ": field \"inputs\": \"" + n.substr(0, 200) +
                                          "\" is not a value defined before this layer (the input" +
                                          (model_.multi_input() ? "s " : " ") + input_names() +
                                          ", a tensor, or an earlier layer's output; layers are in order)"));
    }
    return names;
}

Result<const Node*> GraphBuilder::add(const nlohmann::json& layer) {
    const std::string at = prefix_ + ": layer " + std::to_string(index());
    const auto kinds = op_kinds();
    if (!layer.is_object())
        return tl::unexpected(invalid(at + ": expected an object with \"kind\", got " + describe_value(layer)));
    if (!layer.contains("kind"))
        return tl::unexpected(invalid(at + ": missing field \"kind\" (one of " + join_names(kinds) + ")"));
    const auto& kind_value = layer.at("kind");
    const OpSchema* schema = kind_value.is_string() ? find_op(kind_value.get_ref<const std::string&>()) : nullptr;
    if (schema == nullptr) {
        const std::string hint = kind_value.is_string()
                                     ? " (did you mean \"" +
                                           closest_name(kind_value.get_ref<const std::string&>(), kinds) +
                                           "\"? known kinds: "
                                     : " (known kinds: ";
        return tl::unexpected(
            invalid(at + ": unknown kind " + describe_value(kind_value) + hint + join_names(kinds) + ")"));
    }
    const std::string kind(schema->kind);
    Node node;
    node.op = kind;
    node.name = kind + std::to_string(++kind_counts_[kind]);
    std::string where = at + " (" + kind + ")";
    if (layer.contains("name")) {
        const auto& name = layer.at("name");
        if (!name.is_string() || !valid_value_name(name.get_ref<const std::string&>()))
            return tl::unexpected(
                invalid(where + ": field \"name\": expected " + kNameRule + ", got " + describe_value(name)));
        node.name = name.get<std::string>();
        node.named = true;
        where = at + " (" + kind + " \"" + node.name + "\")";
    }
    FieldReader reader(layer, where);
    reader.allow("kind");
    reader.allow("name");
    reader.allow("inputs");
    node.default_inputs = !layer.contains("inputs");
    if (reader.has("tensors")) {
        const auto& bindings = reader.raw("tensors");
        if (!bindings.is_object())
            return tl::unexpected(
                reader.fail("tensors", "expected {\"slot\": \"tensor name\", ...}, got " + describe_value(bindings)));
        for (const auto& [slot, target] : bindings.items()) {
            if (!target.is_string() || !valid_value_name(target.get_ref<const std::string&>()))
                return tl::unexpected(reader.fail("tensors", "slot \"" + slot.substr(0, 40) +
                                                                 "\": expected a name of " + kNameRule + ", got " +
                                                                 describe_value(target)));
            node.bindings[slot] = target.get<std::string>();
        }
    }
    PSRUN_TRY(schema->parse(reader, node.attrs));
    PSRUN_TRY(reader.finish());
    PSRUN_TRY_ASSIGN(auto inputs, parse_inputs(layer, where, schema->max_inputs == 0));
    const auto count = static_cast<int>(inputs.size());
    if (count < schema->min_inputs || (schema->max_inputs >= 0 && count > schema->max_inputs)) {
        const std::string wanted =
            schema->max_inputs < 0 ? "at least " + std::to_string(schema->min_inputs)
            : schema->min_inputs == schema->max_inputs
                ? std::to_string(schema->min_inputs)
                : std::to_string(schema->min_inputs) + " to " + std::to_string(schema->max_inputs);
        return tl::unexpected(invalid(where + ": field \"inputs\": takes " + wanted + " input" +
                                      (wanted == "1" ? "" : "s") + ", got " + std::to_string(count)));
    }
    if (taken(node.name)) {
        for (std::size_t i = 0; i < model_.nodes.size(); ++i)
            if (model_.nodes[i].name == node.name || model_.nodes[i].outputs.front() == node.name)
                return tl::unexpected(invalid(prefix_ + ": layer " + std::to_string(index()) + " (" + kind +
                                              "): name \"" + node.name + "\" is already layer " + std::to_string(i) +
                                              "'s (names are unique; unnamed layers are <kind><n>)"));
        return tl::unexpected(invalid(where + ": name \"" + node.name + "\" is already a value (" +
                                      (model_.input_index(node.name) >= 0 ? "a model input" : "a tensor") + ")"));
    }
    node.inputs = std::move(inputs);
    node.data_inputs = node.inputs.size();
    InferContext context(model_, node);
    if (auto ok = schema->infer(context); !ok) return tl::unexpected(invalid(where + ": " + ok.error().message));
    if (node.outputs.empty() || node.outputs.size() != node.output_info.size())
        return tl::unexpected(invalid(where + ": the kind set no output (a bug in its schema)"));
    for (const auto& [slot, target] : node.bindings) {
        bool used = false;
        for (const auto& s : node.slots) used = used || s == slot;
        if (!used) {
            std::string slots;
            for (const auto& s : node.slots) {
                if (!slots.empty()) slots += ", ";
                slots += s;
            }
            return tl::unexpected(invalid(where + ": field \"tensors\": this layer has no slot \"" +
                                          slot.substr(0, 40) + "\" (its slots: " + (slots.empty() ? "none" : slots) +
                                          ")"));
        }
    }
    for (std::size_t i = 0; i < node.outputs.size(); ++i) {
        const auto& info = node.output_info[i];
        const auto elements = elements_per_example(info.dims);
        if (!elements || *elements > kMaxTensorElements)
            return tl::unexpected(invalid(where + ": output " + to_string(info.dims) +
                                          " would have more than 2^31-1 elements per example"));
        if (model_.values.count(node.outputs[i]) != 0)
            return tl::unexpected(invalid(where + ": output \"" + node.outputs[i] + "\" is already a value"));
        model_.values.emplace(node.outputs[i], info);
    }
    model_.flops += node.flops;
    model_.nodes.push_back(std::move(node));
    return &model_.nodes.back();
}

Result<void> GraphBuilder::finish(const std::string& output, const std::string& labels,
                                  const std::vector<Head>* heads) {
    if (model_.nodes.empty()) return tl::unexpected(invalid(prefix_ + ": no layers"));
    for (std::size_t i = 0; i < model_.inputs.size(); ++i) {
        bool read = false;
        for (const auto& node : model_.nodes)
            for (const auto& in : node.inputs) read = read || in == model_.inputs[i].name;
        if (!read)
            return tl::unexpected(invalid(prefix_ + ": input \"" + model_.inputs[i].name + "\"" +
                                          (model_.multi_input() ? " (inputs[" + std::to_string(i) + "])" : "") +
                                          " is read by no layer (name it in a layer's \"inputs\", or remove it)"));
    }
    model_.default_output = output.empty();
    model_.output = output.empty() ? model_.nodes.back().outputs.front() : output;
    const auto it = model_.values.find(model_.output);
    if (it == model_.values.end())
        return tl::unexpected(
            invalid(prefix_ + ": field \"output\": \"" + model_.output + "\" is not a value of the model"));
    const ValueInfo& out = it->second;
    const bool logits =
        out.type == ElementType::kFloat && out.rank() == 2 && out.dims[0] == Dim::batch_times(1) && !out.dims[1].batch;
    const std::string what = model_.default_output ? "the last layer's output" : "the output \"" + model_.output + "\"";
    if (model_.loss == LossKind::kGraph) {
        if (auto ok = resolve_heads(model_, heads); !ok)
            return tl::unexpected(invalid(prefix_ + ": loss: field \"heads\": " + ok.error().message));
        if (auto ok = resolve_graph_loss(model_, labels); !ok)
            return tl::unexpected(invalid(prefix_ + ": " + what + ": " + ok.error().message));
    } else if (model_.loss == LossKind::kSoftmaxCrossEntropy) {
        // Scores per position (N x C x H x W: a segmentation network's) train with the loss in
        // the graph, which reads the int masks as an input of their own.
        const bool per_position = out.type == ElementType::kFloat && out.rank() > 2 &&
                                  out.dims[0] == Dim::batch_times(1) && !out.dims[1].batch;
        if (!logits || out.dims[1].value != model_.classes)
            return tl::unexpected(invalid(
                prefix_ + ": " + what + " is " + to_string(out.dims) + "; the loss needs the logits: " +
                (model_.classes > 0
                     ? "N x " + std::to_string(model_.classes) + " (end with a dense layer of \"classes\" units)"
                     : std::string(
                           "N x C floats, one score per class (flatten, or end with a dense layer of C units)")) +
                (per_position ? std::string("; for scores per position (segmentation), put the loss in the graph: "
                                            "export forward(x, y) returning F.cross_entropy(scores, y) with y the "
                                            "int masks (docs/models.md, \"Segmentation\")")
                              : std::string())));
    } else {
        if (!logits || (model_.classes != 0 && out.dims[1].value != model_.classes))
            return tl::unexpected(invalid(prefix_ + ": " + what + " is " + to_string(out.dims) + "; the loss " +
                                          to_string(model_.loss) + " needs N x " +
                                          (model_.classes ? std::to_string(model_.classes) : std::string("T")) +
                                          " floats (one per target)"));
        model_.classes = out.dims[1].value;
    }
    return {};
}

}  // namespace psrun::nn
