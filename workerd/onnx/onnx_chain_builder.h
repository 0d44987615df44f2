// Translates the chain of an ONNX graph (onnx_graph.h), node by node, into the layers of a
// psrun model description (docs/models.md) and the parameters its initializers hold. Tracks the
// activation shape so that explicit pads can be matched to psrun's valid or TF's same padding.
// Every refusal names the node, its op type and what the engine cannot honour.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/nn/shape.h"
#include "workerd/onnx/onnx_graph.h"

namespace psrun::onnx_io {

// The values of one parameter layer as the graph holds them (dense weights already [units, in],
// columns in ONNX's order: CHW after an image).
struct ImportedParams {
    std::vector<std::int64_t> w_dims;
    std::vector<float> w;
    std::vector<float> b;  // empty: no bias
};

class ChainBuilder {
  public:
    // `input`: the graph input's shape (a 2-D [N, F] input is 1 x 1 x F and already flat).
    // `opset`: the default domain's version (Dropout's ratio is an attribute before 12).
    ChainBuilder(const GraphIndex& graph, nn::ActivationShape input, bool input_is_2d,
                 std::int64_t opset);

    // Translates chain()[i] (and, for MatMul followed by a bias Add, that Add too): returns the
    // number of chain nodes consumed (>= 1).
    Result<std::size_t> add(std::size_t i);

    // The description's layers (JSON, docs/models.md) and, per layer, the parameters (or none).
    const nlohmann::json& layers() const { return layers_; }
    const std::vector<ImportedParams>& params() const { return params_; }
    const std::vector<std::string>& layer_nodes() const { return layer_nodes_; }
    // The activation after the nodes added so far (flat after a dense layer).
    const nn::ActivationShape& shape() const { return shape_; }

  private:
    Error refuse(const onnx::NodeProto& node, const std::string& what) const;
    Result<std::vector<float>> constant_floats(const onnx::NodeProto& node, int input) const;
    Result<void> check_data_input(const onnx::NodeProto& node) const;
    Result<void> conv(const onnx::NodeProto& node);
    Result<void> pool(const onnx::NodeProto& node, bool max);
    Result<void> zero_pad(const onnx::NodeProto& node);
    Result<void> flatten(const onnx::NodeProto& node);
    Result<void> reshape(const onnx::NodeProto& node);
    Result<std::size_t> dense(const onnx::NodeProto& node, const onnx::NodeProto* next);
    Result<void> dropout(const onnx::NodeProto& node);
    Result<void> final_softmax(const onnx::NodeProto& node);
    // Kernel, strides and pads of a Conv/pool: sets layer's "stride" and "padding" and the
    // shape after it. `kernel` from the weights or kernel_shape.
    Result<void> window(const onnx::NodeProto& node, std::int64_t kh, std::int64_t kw,
                        nlohmann::json& layer, bool& padded);
    void push(nlohmann::json layer, const onnx::NodeProto& node, ImportedParams params = {});

    const GraphIndex& graph_;
    std::int64_t opset_;
    nn::ActivationShape shape_;
    bool flattened_ = false;  // the activation is [N, F] in ONNX (a flat feature vector)
    std::string current_;     // the chain value entering the next node
    nlohmann::json layers_ = nlohmann::json::array();
    std::vector<ImportedParams> params_;
    std::vector<std::string> layer_nodes_;
};

}  // namespace psrun::onnx_io
