#include "workerd/nn/model_description.h"

#include "workerd/nn/field_reader.h"
#include "workerd/nn/graph_builder.h"
#include "workerd/nn/graph_loss.h"

namespace psrun::nn {

namespace {

Error model_error(std::string_view source, const std::string& what) {
    return Error{ErrorCode::kInvalidArgument, "model " + std::string(source) + ": " + what};
}

constexpr const char* kInputForms =
    "{\"channels\", \"height\", \"width\"} or {\"shape\": [...], \"type\": \"float\"|\"int\"}";
// Most inputs a model may declare.
constexpr std::size_t kMaxInputs = 64;

// One input object: {"channels", "height", "width"} (an image, [N, C, H, W] floats) or
// {"shape": [...], "type": "float" | "int"} (the dims after N, none for int labels [N]; "dims"
// is the same field), and
// "name" (required in the "inputs" list, where `list` is true; "input" by default otherwise).
Result<InputDef> parse_input_object(const nlohmann::json& value, const std::string& where, bool list) {
    FieldReader reader(value, where);
    InputDef input;
    Dims dims{Dim::batch_times(1)};
    const bool has_shape = reader.has("shape"), has_dims = list && reader.has("dims");
    if (has_shape && has_dims)
        return tl::unexpected(reader.fail("dims", "give \"dims\" or \"shape\" (the same field), not both"));
    if (!has_shape && !has_dims) {
        for (const char* field : {"channels", "height", "width"}) {
            PSRUN_TRY_ASSIGN(auto v, reader.integer(field, std::nullopt, 1, kMaxTensorElements));
            dims.push_back(Dim::of(v));
        }
    } else {
        const char* field = has_shape ? "shape" : "dims";
        const auto& shape = reader.raw(field);
        if (!shape.is_array() || shape.size() > 5)
            return tl::unexpected(reader.fail(
                field, "expected 0 to 5 positive integers (the dims after the batch), got " + describe_value(shape)));
        for (const auto& d : shape) {
            if (!d.is_number_integer() || d.get<std::int64_t>() < 1 || d.get<std::int64_t>() > kMaxTensorElements)
                return tl::unexpected(reader.fail(field, "expected positive integers, got " + describe_value(shape)));
            dims.push_back(Dim::of(d.get<std::int64_t>()));
        }
        PSRUN_TRY_ASSIGN(auto type, reader.choice("type", 0, {"float", "int"}));
        input.info.type = type == 1 ? ElementType::kInt : ElementType::kFloat;
    }
    if (has_shape || has_dims || list) {
        PSRUN_TRY_ASSIGN(auto name, reader.string("name", list ? std::nullopt : std::optional<std::string>("input")));
        if (!valid_value_name(name))
            return tl::unexpected(reader.fail(
                "name", "expected 1 to 200 of A-Z a-z 0-9 _ - . /, got " + describe_value(reader.raw("name"))));
        input.name = name;
    }
    PSRUN_TRY(reader.finish());
    const auto elements = elements_per_example(dims);
    if (!elements || *elements > kMaxTensorElements)
        return tl::unexpected(Error{ErrorCode::kInvalidArgument,
                                    where + ": " + to_string(dims) + " has more than 2^31-1 elements per example"});
    input.info.dims = std::move(dims);
    return input;
}

// "input" (one input object) or "inputs" (a list of 1 to kMaxInputs named input objects,
// names distinct), exactly one of them.
Result<void> parse_inputs(FieldReader& top, ModelDescription& model) {
    const bool one = top.has("input"), several = top.has("inputs");
    if (one && several)
        return tl::unexpected(top.fail("inputs", "give \"input\" (one input) or \"inputs\" (a list), not both"));
    if (!one && !several)
        return tl::unexpected(top.fail("input", std::string("missing (expected ") + kInputForms +
                                                    ", or \"inputs\": a list of them, each with a \"name\")"));
    if (one) {
        const auto& value = top.raw("input");
        if (!value.is_object())
            return tl::unexpected(
                top.fail("input", std::string("expected ") + kInputForms + ", got " + describe_value(value)));
        PSRUN_TRY_ASSIGN(auto input, parse_input_object(value, top.where() + ": input", false));
        model.inputs = {std::move(input)};
        return {};
    }
    const auto& list = top.raw("inputs");
    if (!list.is_array() || list.empty() || list.size() > kMaxInputs)
        return tl::unexpected(
            top.fail("inputs", "expected a list of 1 to " + std::to_string(kMaxInputs) +
                                   " inputs {\"name\", \"dims\": [...], \"type\": \"float\"|\"int\"}, got " +
                                   describe_value(list)));
    model.inputs.clear();
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string where = top.where() + ": inputs[" + std::to_string(i) + "]";
        if (!list[i].is_object())
            return tl::unexpected(
                Error{ErrorCode::kInvalidArgument,
                      where + ": expected {\"name\", \"dims\": [...], \"type\": \"float\"|\"int\"}, got " +
                          describe_value(list[i])});
        PSRUN_TRY_ASSIGN(auto input, parse_input_object(list[i], where, true));
        if (model.input_index(input.name) >= 0)
            return tl::unexpected(Error{ErrorCode::kInvalidArgument, where + ": input name \"" + input.name +
                                                                         "\" is already inputs[" +
                                                                         std::to_string(model.input_index(input.name)) +
                                                                         "]'s (input names are distinct)"});
        model.inputs.push_back(std::move(input));
    }
    return {};
}

// A graph loss's "heads": a list of 1 to kMaxHeads {"output": VALUE, "kind": "softmax" |
// "sigmoid" | "value", "targets": INPUT}; the names are checked against the graph by resolve_heads.
Result<std::vector<Head>> parse_heads(FieldReader& loss) {
    const auto& list = loss.raw("heads");
    constexpr const char* kForm = "{\"output\": VALUE, \"kind\": \"softmax\"|\"sigmoid\", \"targets\": INPUT}";
    if (!list.is_array() || list.empty() || list.size() > kMaxHeads)
        return tl::unexpected(loss.fail("heads", "expected a list of 1 to " + std::to_string(kMaxHeads) + " heads " +
                                                     kForm + ", got " + describe_value(list)));
    std::vector<Head> heads;
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string where = loss.where() + ": field \"heads\": heads[" + std::to_string(i) + "]";
        if (!list[i].is_object())
            return tl::unexpected(
                Error{ErrorCode::kInvalidArgument, where + ": expected " + kForm + ", got " + describe_value(list[i])});
        FieldReader reader(list[i], where);
        Head head;
        PSRUN_TRY_ASSIGN(auto output, reader.string("output", std::nullopt));
        if (output.empty() || output.size() > 256)
            return tl::unexpected(
                reader.fail("output", "expected a value's name, got " + describe_value(reader.raw("output"))));
        PSRUN_TRY_ASSIGN(auto kind, reader.choice("kind", std::nullopt, {"softmax", "sigmoid", "value"}));
        PSRUN_TRY_ASSIGN(auto targets, reader.string("targets", std::nullopt));
        if (targets.empty() || targets.size() > 256)
            return tl::unexpected(
                reader.fail("targets", "expected an input's name, got " + describe_value(reader.raw("targets"))));
        PSRUN_TRY(reader.finish());
        head.value = output;
        head.kind = kind == 2 ? HeadKind::kValue : kind == 1 ? HeadKind::kSigmoid : HeadKind::kSoftmax;
        head.target = targets;
        heads.push_back(std::move(head));
    }
    return heads;
}

// The loss: a built-in one on the output, or {"kind": "graph", "labels": NAME, "heads": [...]}
// (the graph's scalar output is the loss; `labels` the input the data's labels feed, found by
// resolve_graph_loss when not given; `heads` the scores evaluation and prediction read, found by
// resolve_heads when not given).
Result<void> parse_loss(FieldReader& top, ModelDescription& model, std::string& labels,
                        std::optional<std::vector<Head>>& heads) {
    if (!top.has("loss")) return {};
    const auto& value = top.raw("loss");
    if (!value.is_object())
        return tl::unexpected(top.fail("loss",
                                       "expected {\"kind\": \"softmax_cross_entropy\"|\"mean_squared_error\"|"
                                       "\"sigmoid_cross_entropy\", \"reduction\": \"mean\"|\"sum\"} or "
                                       "{\"kind\": \"graph\", \"labels\": INPUT}, got " +
                                           describe_value(value)));
    FieldReader reader(value, top.where() + ": loss");
    PSRUN_TRY_ASSIGN(
        auto kind,
        reader.choice("kind", 0, {"softmax_cross_entropy", "mean_squared_error", "sigmoid_cross_entropy", "graph"}));
    if (static_cast<LossKind>(kind) == LossKind::kGraph) {
        PSRUN_TRY_ASSIGN(auto name, reader.string("labels", std::string()));
        if (reader.has("heads")) {
            PSRUN_TRY_ASSIGN(auto given, parse_heads(reader));
            heads = std::move(given);
        }
        PSRUN_TRY(reader.finish());
        model.loss = LossKind::kGraph;
        labels = name;
        return {};
    }
    PSRUN_TRY_ASSIGN(auto reduction, reader.choice("reduction", 0, {"mean", "sum"}));
    PSRUN_TRY(reader.finish());
    model.loss = static_cast<LossKind>(kind);
    model.reduction = reduction == 1 ? LossReduction::kSum : LossReduction::kMean;
    return {};
}

}  // namespace

const char* to_string(TensorClass cls) { return cls == TensorClass::kState ? "state" : "trainable"; }

const char* to_string(LossKind kind) {
    switch (kind) {
        case LossKind::kSoftmaxCrossEntropy: return "softmax_cross_entropy";
        case LossKind::kMeanSquaredError: return "mean_squared_error";
        case LossKind::kSigmoidCrossEntropy: return "sigmoid_cross_entropy";
        case LossKind::kGraph: return "graph";
    }
    return "?";
}

const char* to_string(LossReduction reduction) { return reduction == LossReduction::kSum ? "sum" : "mean"; }

bool valid_value_name(std::string_view name) {
    if (name.empty() || name.size() > 200) return false;
    for (const char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                        c == '-' || c == '.' || c == '/';
        if (!ok) return false;
    }
    return true;
}

const ValueInfo& ModelDescription::value(std::string_view value_name) const {
    const auto it = values.find(value_name);
    if (it == values.end()) throw std::out_of_range("no value '" + std::string(value_name) + "' in model " + name);
    return it->second;
}

const TensorDef* ModelDescription::tensor(std::string_view tensor_name) const {
    for (const auto& t : tensors)
        if (t.name == tensor_name) return &t;
    return nullptr;
}

int ModelDescription::input_index(std::string_view input_name) const {
    for (std::size_t i = 0; i < inputs.size(); ++i)
        if (inputs[i].name == input_name) return static_cast<int>(i);
    return -1;
}

std::optional<ActivationShape> ModelDescription::image_input() const {
    const ValueInfo& in = input();
    if (in.type != ElementType::kFloat || in.rank() != 4) return std::nullopt;
    return ActivationShape{in.dims[1].value, in.dims[2].value, in.dims[3].value, false};
}

Result<ModelDescription> parse_model(const nlohmann::json& document, std::string_view source) {
    if (!document.is_object())
        return tl::unexpected(model_error(source, "expected a JSON object, got " + describe_value(document)));
    FieldReader top(document, "model " + std::string(source));
    ModelDescription model;
    PSRUN_TRY(top.integer("format", 1, 1, 1));
    PSRUN_TRY_ASSIGN(auto name, top.string("name", std::string(source)));
    PSRUN_TRY_ASSIGN(auto description, top.string("description", std::string()));
    model.name = name;
    model.description = description;
    PSRUN_TRY(parse_inputs(top, model));
    std::string labels;
    std::optional<std::vector<Head>> heads;
    PSRUN_TRY(parse_loss(top, model, labels, heads));
    if (model.loss == LossKind::kGraph) {
        // The graph's shapes give the classes (its head's) or the target width.
    } else if (model.loss == LossKind::kSoftmaxCrossEntropy) {
        PSRUN_TRY_ASSIGN(auto classes, top.integer("classes", std::nullopt, 2, kMaxTensorElements));
        model.classes = classes;
    } else {
        PSRUN_TRY_ASSIGN(auto targets, top.integer("targets", 0, 0, kMaxTensorElements));
        model.classes = targets;
    }
    PSRUN_TRY_ASSIGN(auto output, top.string("output", std::string()));
    if (top.has("recipe")) {
        PSRUN_TRY_ASSIGN(auto recipe, parse_recipe(top.raw("recipe"), top.where() + ": recipe"));
        model.recipe = recipe;
    }
    if (!top.has("layers")) return tl::unexpected(top.fail("layers", "missing (expected an array of layers)"));
    const auto& layers = top.raw("layers");
    if (!layers.is_array() || layers.empty() || layers.size() > kMaxLayers)
        return tl::unexpected(top.fail("layers", "expected an array of 1 to " + std::to_string(kMaxLayers) +
                                                     " layers, got " + describe_value(layers)));
    PSRUN_TRY(top.finish());

    GraphBuilder builder(model, "model " + std::string(source));
    for (const auto& layer : layers) PSRUN_TRY(builder.add(layer));
    PSRUN_TRY(builder.finish(output, labels, heads ? &*heads : nullptr));
    return model;
}

Result<ModelDescription> parse_model_text(std::string_view text, std::string_view source) {
    if (text.size() > kMaxModelTextBytes)
        return tl::unexpected(model_error(
            source, "larger than " + std::to_string(kMaxModelTextBytes) + " bytes: not a model description"));
    auto document = parse_json_text(text);
    if (!document) return tl::unexpected(model_error(source, document.error().message));
    return parse_model(*document, source);
}

}  // namespace psrun::nn
