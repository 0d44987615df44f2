#include "workerd/nn/model_description.h"

#include <map>

#include "workerd/nn/field_reader.h"

namespace psrun::nn {

namespace {

Error model_error(std::string_view source, const std::string& what) {
    return Error{ErrorCode::kInvalidArgument, "model " + std::string(source) + ": " + what};
}

bool valid_layer_name(const std::string& name) {
    if (name.empty() || name.size() > 64) return false;
    for (const char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                        c == '_' || c == '-' || c == '.';
        if (!ok) return false;
    }
    return true;
}

Result<ActivationShape> parse_input(FieldReader& top) {
    if (!top.has("input")) return tl::unexpected(top.fail("input", "missing (expected {\"channels\", \"height\", \"width\"})"));
    const auto& value = top.raw("input");
    if (!value.is_object())
        return tl::unexpected(top.fail("input", "expected {\"channels\", \"height\", \"width\"}, got " + describe_value(value)));
    FieldReader reader(value, top.where() + ": input");
    ActivationShape shape;
    for (auto [field, target] : {std::pair{"channels", &shape.channels}, std::pair{"height", &shape.height},
                                 std::pair{"width", &shape.width}}) {
        auto v = reader.integer(field, std::nullopt, 1, kMaxTensorElements);
        if (!v) return tl::unexpected(v.error());
        *target = *v;
    }
    if (auto ok = reader.finish(); !ok) return tl::unexpected(ok.error());
    if (!checked_product({shape.channels, shape.height, shape.width}))
        return tl::unexpected(top.fail("input", shape.to_string() + " has more than 2^31-1 elements"));
    return shape;
}

Result<LossReduction> parse_loss(FieldReader& top) {
    if (!top.has("loss")) return LossReduction::kMean;
    const auto& value = top.raw("loss");
    if (!value.is_object())
        return tl::unexpected(top.fail("loss", "expected {\"kind\": \"softmax_cross_entropy\", \"reduction\": "
                                               "\"mean\"|\"sum\"}, got " + describe_value(value)));
    FieldReader reader(value, top.where() + ": loss");
    auto kind = reader.choice("kind", 0, {"softmax_cross_entropy"});
    if (!kind) return tl::unexpected(kind.error());
    auto reduction = reader.choice("reduction", 0, {"mean", "sum"});
    if (!reduction) return tl::unexpected(reduction.error());
    if (auto ok = reader.finish(); !ok) return tl::unexpected(ok.error());
    return *reduction == 1 ? LossReduction::kSum : LossReduction::kMean;
}

// Parses layer `index` and infers its shapes from `input`; `counts` numbers default names.
Result<LayerSpec> parse_layer(const nlohmann::json& value, std::size_t index, const ActivationShape& input,
                              std::map<LayerKind, int>& counts, std::string_view source) {
    const std::string at = "model " + std::string(source) + ": layer " + std::to_string(index);
    const auto kinds = layer_kind_names();
    if (!value.is_object())
        return make_error(ErrorCode::kInvalidArgument,
                          at + ": expected an object with \"kind\", got " + describe_value(value));
    if (!value.contains("kind"))
        return make_error(ErrorCode::kInvalidArgument,
                          at + ": missing field \"kind\" (one of " + join_names(kinds) + ")");
    const auto& kind_value = value.at("kind");
    const LayerKindOps* ops = kind_value.is_string() ? find_layer_kind(kind_value.get_ref<const std::string&>()) : nullptr;
    if (ops == nullptr) {
        const std::string hint = kind_value.is_string()
                                     ? " (did you mean \"" + closest_name(kind_value.get_ref<const std::string&>(), kinds) + "\"?"
                                     : " (";
        return make_error(ErrorCode::kInvalidArgument, at + ": unknown kind " + describe_value(kind_value) + hint +
                                                           (kind_value.is_string() ? " " : "") +
                                                           "known kinds: " + join_names(kinds) + ")");
    }
    LayerSpec layer;
    layer.kind = ops->kind;
    layer.name = std::string(ops->name) + std::to_string(++counts[ops->kind]);
    std::string where = at + " (" + std::string(ops->name) + ")";
    if (value.contains("name")) {
        const auto& name = value.at("name");
        if (!name.is_string() || !valid_layer_name(name.get_ref<const std::string&>()))
            return make_error(ErrorCode::kInvalidArgument,
                              where + ": field \"name\": expected 1 to 64 of A-Z a-z 0-9 _ - ., got " +
                                  describe_value(name));
        layer.name = name.get<std::string>();
        layer.named = true;
        where = at + " (" + std::string(ops->name) + " \"" + layer.name + "\")";
    }
    FieldReader reader(value, where);
    reader.allow("kind");
    reader.allow("name");
    if (auto ok = ops->parse(reader, layer); !ok) return tl::unexpected(ok.error());
    if (auto ok = reader.finish(); !ok) return tl::unexpected(ok.error());
    layer.input = input;
    if (auto ok = ops->infer(layer); !ok)
        return make_error(ErrorCode::kInvalidArgument, where + ": " + ok.error().message);
    return layer;
}

}  // namespace

const char* to_string(LossReduction reduction) { return reduction == LossReduction::kSum ? "sum" : "mean"; }

Result<ModelDescription> parse_model(const nlohmann::json& document, std::string_view source) {
    if (!document.is_object())
        return tl::unexpected(model_error(source, "expected a JSON object, got " + describe_value(document)));
    FieldReader top(document, "model " + std::string(source));
    ModelDescription model;
    if (auto format = top.integer("format", 1, 1, 1); !format) return tl::unexpected(format.error());
    auto name = top.string("name", std::string(source));
    if (!name) return tl::unexpected(name.error());
    auto description = top.string("description", std::string());
    if (!description) return tl::unexpected(description.error());
    model.name = *name;
    model.description = *description;
    auto input = parse_input(top);
    if (!input) return tl::unexpected(input.error());
    model.input = *input;
    auto classes = top.integer("classes", std::nullopt, 2, kMaxTensorElements);
    if (!classes) return tl::unexpected(classes.error());
    model.classes = *classes;
    auto reduction = parse_loss(top);
    if (!reduction) return tl::unexpected(reduction.error());
    model.reduction = *reduction;
    if (top.has("recipe")) {
        auto recipe = parse_recipe(top.raw("recipe"), top.where() + ": recipe");
        if (!recipe) return tl::unexpected(recipe.error());
        model.recipe = *recipe;
    }
    if (!top.has("layers")) return tl::unexpected(top.fail("layers", "missing (expected an array of layers)"));
    const auto& layers = top.raw("layers");
    if (!layers.is_array() || layers.empty() || layers.size() > kMaxLayers)
        return tl::unexpected(top.fail("layers", "expected an array of 1 to " + std::to_string(kMaxLayers) +
                                                     " layers, got " + describe_value(layers)));
    if (auto ok = top.finish(); !ok) return tl::unexpected(ok.error());

    std::map<LayerKind, int> counts;
    std::map<std::string, std::size_t> names;
    ActivationShape shape = model.input;
    for (std::size_t i = 0; i < layers.size(); ++i) {
        auto layer = parse_layer(layers[i], i, shape, counts, source);
        if (!layer) return tl::unexpected(layer.error());
        if (const auto [it, fresh] = names.emplace(layer->name, i); !fresh)
            return tl::unexpected(model_error(source, "layer " + std::to_string(i) + " (" +
                                                          std::string(layer_kind_ops(layer->kind).name) + "): name \"" +
                                                          layer->name + "\" is already layer " +
                                                          std::to_string(it->second) +
                                                          "'s (names are unique; unnamed layers are <kind><n>)"));
        if (model.parameter_count + layer->param_count > kMaxTensorElements)
            return tl::unexpected(model_error(source, "layer " + std::to_string(i) +
                                                          ": the parameters add up to more than 2^31-1"));
        model.parameter_count += layer->param_count;
        model.flops += layer->flops;
        shape = layer->output;
        model.layers.push_back(std::move(*layer));
    }
    if (!shape.flat || shape.channels != model.classes)
        return tl::unexpected(model_error(source, "the last layer's output is " + shape.to_string() +
                                                      (shape.flat ? " features" : " (an image)") +
                                                      "; the loss needs the logits: " +
                                                      std::to_string(model.classes) +
                                                      " flat features (end with a dense layer of \"classes\" units)"));
    return model;
}

Result<ModelDescription> parse_model_text(std::string_view text, std::string_view source) {
    if (text.size() > kMaxModelTextBytes)
        return tl::unexpected(model_error(source, "larger than " + std::to_string(kMaxModelTextBytes) +
                                                      " bytes: not a model description"));
    nlohmann::json document;
    try {
        document = nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::parse_error& e) {
        const std::size_t end = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
        std::size_t line = 1;
        std::size_t column = 1;
        for (std::size_t i = 0; i < end; ++i) {
            if (text[i] == '\n') {
                ++line;
                column = 1;
            } else {
                ++column;
            }
        }
        std::string what = e.what();
        if (const auto colon = what.find("syntax error"); colon != std::string::npos) what = what.substr(colon);
        return tl::unexpected(model_error(source, "JSON syntax error at line " + std::to_string(line) + ", column " +
                                                      std::to_string(column) + ": " + what));
    } catch (const nlohmann::json::exception& e) {
        // Not a syntax error but still the text's fault: a number out of double's range (406).
        std::string what = e.what();
        if (const auto end = what.find("] "); end != std::string::npos) what = what.substr(end + 2);
        return tl::unexpected(model_error(source, "bad JSON: " + what));
    }
    return parse_model(document, source);
}

}  // namespace psrun::nn
