// Readers of a parsed description for the description tests: the parse itself (a model that
// must parse, or the exit-2 error one must give), a node's output as C x H x W (or flat), its
// window's pads and stride, the tensors it created and their initializers.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "workerd/nn/model_description.h"
#include "workerd/nn/ops/conv.h"
#include "workerd/nn/ops/pool.h"

namespace psrun::nn::test {

inline ModelDescription parse_ok(const nlohmann::json& doc) {
    auto model = parse_model(doc, "T");
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    return *model;
}

inline std::string parse_error(const nlohmann::json& doc) {
    auto model = parse_model(doc, "F");
    REQUIRE_FALSE(model);
    CHECK(model.error().code == psrun::ErrorCode::kInvalidArgument);
    return model.error().message;
}

inline ActivationShape out_shape(const Node& node) {
    const auto& d = node.output_info.front().dims;
    if (d.size() == 4) return {d[1].value, d[2].value, d[3].value, false};
    return {d.back().value, 1, 1, true};
}

inline Window2d window_of(const ModelDescription& model, std::size_t i) {
    const Node& node = model.nodes[i];
    const ValueInfo& in = model.value(node.inputs[0]);
    if (node.op == "conv2d") return conv_geometry(node.attrs, in)->window;
    return pool_geometry(node, in)->window;
}

inline Pads pads_of(const ModelDescription& model, std::size_t i) {
    const Window2d w = window_of(model, i);
    return Pads{w.pt, w.pb, w.pl, w.pr};
}

inline Extent2 stride_of(const ModelDescription& model, std::size_t i) {
    const Window2d w = window_of(model, i);
    return Extent2{w.sh, w.sw};
}

inline std::vector<TensorDef> tensors_of(const ModelDescription& model, std::size_t i) {
    std::vector<TensorDef> out;
    for (const auto& t : model.tensors)
        if (t.owner == model.nodes[i].name) out.push_back(t);
    return out;
}

// The initializer of node i's tensor in slot "w" or "b".
inline Initializer init_of(const ModelDescription& model, std::size_t i, const std::string& slot) {
    const TensorDef* t = model.tensor(model.nodes[i].name + "/" + slot);
    return t == nullptr ? Initializer{} : t->init;
}

}  // namespace psrun::nn::test
