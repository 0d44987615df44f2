#include "workerd/nn/model_summary.h"

#include <openssl/evp.h>

#include <array>
#include <cstdio>

namespace psrun::nn {

namespace {

nlohmann::json shape_json(const ActivationShape& shape) {
    if (shape.flat) return {shape.channels};
    return {shape.channels, shape.height, shape.width};
}

}  // namespace

std::vector<TensorEntry> parameter_tensors(const ModelDescription& model) {
    std::vector<TensorEntry> out;
    std::int64_t offset = 0;
    for (const auto& layer : model.layers) {
        for (const auto& p : layer.params) {
            out.push_back(TensorEntry{p.name, p.shape, offset, p.size});
            offset += p.size;
        }
    }
    return out;
}

nlohmann::json canonical_architecture(const ModelDescription& model) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& layer : model.layers) {
        const auto& ops = layer_kind_ops(layer.kind);
        nlohmann::json entry = {{"kind", ops.name}, {"name", layer.name}};
        ops.write(layer, entry);
        layers.push_back(std::move(entry));
    }
    return {
        {"format", 1},
        {"input", {{"channels", model.input.channels}, {"height", model.input.height}, {"width", model.input.width}}},
        {"classes", model.classes},
        {"loss", {{"kind", "softmax_cross_entropy"}, {"reduction", to_string(model.reduction)}}},
        {"layers", std::move(layers)},
    };
}

nlohmann::json model_json(const ModelDescription& model) {
    nlohmann::json out = canonical_architecture(model);
    out["name"] = model.name;
    if (!model.description.empty()) out["description"] = model.description;
    if (model.recipe) out["recipe"] = to_json(*model.recipe);
    return out;
}

std::string architecture_hash(const ModelDescription& model) {
    const std::string text = canonical_architecture(model).dump();
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int length = 0;
    EVP_Digest(text.data(), text.size(), digest.data(), &length, EVP_sha256(), nullptr);
    std::string hex;
    for (unsigned int i = 0; i < length; ++i) {
        char byte[3];
        std::snprintf(byte, sizeof byte, "%02x", digest[i]);
        hex += byte;
    }
    return hex;
}

nlohmann::json summary_json(const ModelDescription& model) {
    nlohmann::json layers = nlohmann::json::array();
    for (std::size_t i = 0; i < model.layers.size(); ++i) {
        const auto& layer = model.layers[i];
        const auto& ops = layer_kind_ops(layer.kind);
        nlohmann::json options = nlohmann::json::object();
        ops.write(layer, options);
        nlohmann::json params = nlohmann::json::array();
        for (const auto& p : layer.params)
            params.push_back({{"name", p.name}, {"shape", p.shape}, {"size", p.size}, {"init", to_json(p.init)}});
        nlohmann::json entry = {{"index", i},
                                {"name", layer.name},
                                {"kind", ops.name},
                                {"options", std::move(options)},
                                {"input_shape", shape_json(layer.input)},
                                {"output_shape", shape_json(layer.output)},
                                {"parameters", layer.param_count},
                                {"tensors", std::move(params)},
                                {"mflop", layer.flops / 1e6}};
        if (layer.kind == LayerKind::kConv2d || layer.kind == LayerKind::kMaxPool || layer.kind == LayerKind::kAvgPool)
            entry["pads"] = {{"top", layer.pads.top}, {"bottom", layer.pads.bottom},
                             {"left", layer.pads.left}, {"right", layer.pads.right}};
        layers.push_back(std::move(entry));
    }
    nlohmann::json out = {
        {"name", model.name},
        {"description", model.description},
        {"input_shape", shape_json(model.input)},
        {"classes", model.classes},
        {"loss", {{"kind", "softmax_cross_entropy"}, {"reduction", to_string(model.reduction)}}},
        {"layers", std::move(layers)},
        {"total", {{"parameters", model.parameter_count},
                   {"bytes_f32", model.parameter_count * 4},
                   {"mflop_per_example", model.flops / 1e6}}},
        {"architecture_sha256", architecture_hash(model)},
    };
    if (model.recipe) out["recipe"] = to_json(*model.recipe);
    return out;
}

}  // namespace psrun::nn
