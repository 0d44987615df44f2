// export_onnx (onnx_model.h): one node per layer, named after it, its parameters as the
// initializers "<layer>/w" and "<layer>/b"; dropout is left out (inference), a Flatten goes in
// front of a dense layer on an image, and a Softmax named "softmax" ends the graph.
#include <stdexcept>

#include "workerd/nn/model_summary.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::onnx_io {

namespace {

void add_dim(onnx::TensorShapeProto& shape, std::int64_t value) {
    shape.add_dim()->set_dim_value(value);
}

void set_value_info(onnx::ValueInfoProto& info, const std::string& name, const std::string& batch,
                    const std::vector<std::int64_t>& dims) {
    info.set_name(name);
    auto* tensor = info.mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(onnx::TensorProto::FLOAT);
    auto* shape = tensor->mutable_shape();
    shape->add_dim()->set_dim_param(batch);
    for (const auto d : dims) add_dim(*shape, d);
}

onnx::NodeProto& add_node(onnx::GraphProto& graph, const std::string& op, const std::string& name,
                          std::vector<std::string> inputs, const std::string& output) {
    onnx::NodeProto* node = graph.add_node();
    node->set_op_type(op);
    node->set_name(name);
    for (auto& input : inputs) node->add_input(std::move(input));
    node->add_output(output);
    return *node;
}

// kernel_shape, strides and pads ([top, left, bottom, right]: TF's split, explicit).
void set_window(onnx::NodeProto& node, const nn::LayerSpec& layer) {
    set_ints(node, "kernel_shape", {layer.kernel.h, layer.kernel.w});
    set_ints(node, "strides", {layer.stride.h, layer.stride.w});
    set_ints(node, "pads", {layer.pads.top, layer.pads.left, layer.pads.bottom, layer.pads.right});
}

const char* activation_op(nn::LayerKind kind) {
    switch (kind) {
        case nn::LayerKind::kRelu:
            return "Relu";
        case nn::LayerKind::kTanh:
            return "Tanh";
        case nn::LayerKind::kSigmoid:
            return "Sigmoid";
        default:
            return nullptr;
    }
}

}  // namespace

Result<std::string> export_onnx(const nn::ModelDescription& model, std::span<const float> params) {
    if (params.size() != static_cast<std::size_t>(model.parameter_count))
        return make_error(ErrorCode::kInvalidArgument,
                          "export: " + std::to_string(params.size()) + " parameters for model " +
                              model.name + " of " + std::to_string(model.parameter_count));
    onnx::ModelProto proto;
    proto.set_ir_version(onnx::IR_VERSION_2020_5_8);  // 7: what opset 13 came with
    proto.set_producer_name("psrun");
    proto.set_model_version(1);
    proto.set_doc_string(model.description);
    auto* opset = proto.add_opset_import();
    opset->set_domain("");
    opset->set_version(kExportOpset);
    auto* meta = proto.add_metadata_props();
    meta->set_key(kDescriptionKey);
    meta->set_value(nn::model_json(model).dump());

    onnx::GraphProto& graph = *proto.mutable_graph();
    graph.set_name(model.name.empty() ? "psrun" : model.name);
    set_value_info(*graph.add_input(), "images", "N",
                   {model.input.channels, model.input.height, model.input.width});

    // Value names: "<layer>/out" (a layer name has no '/', so no clash with "images",
    // "probabilities" or the initializers).
    std::string current = "images";
    std::size_t offset = 0;
    auto take = [&](const nn::ParamTensor& t) {
        auto span = params.subspan(offset, static_cast<std::size_t>(t.size));
        offset += static_cast<std::size_t>(t.size);
        return span;
    };
    for (const auto& layer : model.layers) {
        const std::string out = layer.name + "/out";
        switch (layer.kind) {
            case nn::LayerKind::kConv2d: {
                std::vector<std::string> inputs{current};
                for (const auto& t : layer.params) {
                    add_float_tensor(graph, t.name, t.shape, take(t));
                    inputs.push_back(t.name);
                }
                auto& node = add_node(graph, "Conv", layer.name, inputs, out);
                set_window(node, layer);
                set_ints(node, "dilations", {1, 1});
                set_int(node, "group", 1);
                break;
            }
            case nn::LayerKind::kMaxPool:
            case nn::LayerKind::kAvgPool: {
                const bool max = layer.kind == nn::LayerKind::kMaxPool;
                auto& node =
                    add_node(graph, max ? "MaxPool" : "AveragePool", layer.name, {current}, out);
                set_window(node, layer);
                // The engine averages over the real inputs only (pooling_avg_exclude_padding, TF).
                if (!max) set_int(node, "count_include_pad", 0);
                break;
            }
            case nn::LayerKind::kDense: {
                std::string input = current;
                if (!layer.input.flat) {  // ONNX's Gemm takes [N, F]: flatten the NCHW image first
                    input = layer.name + "/flatten";
                    set_int(add_node(graph, "Flatten", input, {current}, input), "axis", 1);
                }
                const auto& w = layer.params.at(0);
                auto values = take(w);
                if (!layer.input.flat) {
                    const auto chw = dense_columns_to_chw(values, layer.units, layer.input);
                    add_float_tensor(graph, w.name, w.shape, chw);
                } else {
                    add_float_tensor(graph, w.name, w.shape, values);
                }
                std::vector<std::string> inputs{input, w.name};
                if (layer.params.size() > 1) {
                    const auto& b = layer.params[1];
                    add_float_tensor(graph, b.name, b.shape, take(b));
                    inputs.push_back(b.name);
                }
                auto& node = add_node(graph, "Gemm", layer.name, inputs, out);
                set_float(node, "alpha", 1.0f);
                set_float(node, "beta", 1.0f);
                set_int(node, "transB", 1);
                break;
            }
            case nn::LayerKind::kDropout:
                continue;  // inference: the identity
            default: {
                const char* op = activation_op(layer.kind);
                if (op == nullptr)
                    throw std::logic_error("export_onnx: layer kind without an ONNX op");
                add_node(graph, op, layer.name, {current}, out);
                break;
            }
        }
        current = out;
    }
    set_int(add_node(graph, "Softmax", "softmax", {current}, "probabilities"), "axis", 1);
    set_value_info(*graph.add_output(), "probabilities", "N", {model.classes});

    std::string bytes;
    if (!proto.SerializeToString(&bytes))
        return make_error(ErrorCode::kInvalidArgument,
                          "export: model " + model.name + " does not serialize (over 2 GiB?)");
    return bytes;
}

}  // namespace psrun::onnx_io
