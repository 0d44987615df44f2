// batch_norm: {"kind": "batch_norm", "epsilon": 1e-5, "momentum": 0.1, "scale": true,
//              "center": true}
// Input N x C (x D) (x H) x W, rank 2 to 5, floats; output the same shape. Per channel c:
// y = scale[c] (x - mean) / sqrt(var + epsilon) + bias[c], with the batch's mean and
// (population) variance over N and the spatial axes when the forward trains, and the running
// statistics otherwise (evaluation, and every forward of a forward-only network).
// A training forward moves the running statistics by PyTorch's rule,
//   running = (1 - momentum) running + momentum batch,
// with the batch variance unbiased (times n / (n - 1), n = the values per channel), as
// PyTorch's running_var; the engine writes old - new into the gradient buffer and psd (or the
// standalone trainer) subtracts it (docs/models.md, "Operator kinds").
// Tensors: scale [C] (slot "scale", ones; only with "scale"), bias [C] (slot "bias", zeros;
// only with "center"), and the state tensors mean [C] (slot "mean", zeros) and var [C]
// (slot "var", ones).
// ONNX: BatchNormalization (opset 9-13: 1 output, or PyTorch's training export with 5, whose
// updated statistics dangle; its momentum is 1 - this one). Exported as an inference
// BatchNormalization over the running statistics.
#include <charconv>
#include <cmath>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/normalization.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_batch_norm(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto epsilon, reader.number("epsilon", 1e-5));
    if (!(epsilon > 0.0 && epsilon <= 1.0))
        return tl::unexpected(reader.fail("epsilon", "expected a number in (0, 1], got " + describe_value(epsilon)));
    PSRUN_TRY_ASSIGN(auto momentum, reader.number("momentum", 0.1));
    if (!(momentum >= 0.0 && momentum <= 1.0))
        return tl::unexpected(reader.fail("momentum",
                                          "expected a number in [0, 1] (PyTorch's convention: the weight of "
                                          "the batch statistics, 0.1 by default), got " +
                                              describe_value(momentum)));
    PSRUN_TRY_ASSIGN(auto scale, reader.boolean("scale", true));
    PSRUN_TRY_ASSIGN(auto center, reader.boolean("center", true));
    attrs["epsilon"] = epsilon;
    attrs["momentum"] = momentum;
    attrs["scale"] = scale;
    attrs["center"] = center;
    return {};
}

Result<void> infer_batch_norm(InferContext& context) {
    const ValueInfo& in = context.input(0);
    if (in.type != ElementType::kFloat) return tl::unexpected(op_error("expects floats, got integer ids"));
    if (in.rank() < 2 || in.rank() > 5 || in.dims[0] != Dim::batch_times(1))
        return tl::unexpected(
            op_error("expects an N x C (x D x H x W) input of rank 2 to 5, got " + to_string(in.dims)));
    for (std::size_t i = 1; i < in.rank(); ++i)
        if (in.dims[i].batch)
            return tl::unexpected(op_error("expects the batch axis first only, got " + to_string(in.dims)));
    const std::int64_t channels = in.dims[1].value;
    context.set_output(0, in);
    if (context.attr_bool("scale")) {
        if (auto ok = context.tensor("scale", {channels}, Initializer{InitKind::kConstant, 1.0}); !ok) return ok;
    }
    if (context.attr_bool("center")) {
        if (auto ok = context.tensor("bias", {channels}, Initializer{InitKind::kZeros, 0.0}); !ok) return ok;
    }
    if (auto ok = context.tensor("mean", {channels}, Initializer{InitKind::kZeros, 0.0}, TensorClass::kState); !ok)
        return ok;
    if (auto ok = context.tensor("var", {channels}, Initializer{InitKind::kConstant, 1.0}, TensorClass::kState); !ok)
        return ok;
    context.add_flops(5.0 * static_cast<double>(elements_per_example(in.dims).value_or(0)));
    return {};
}

Result<void> import_batch_norm(OnnxNodeImport& node) {
    const ValueInfo* x = node.info(0);
    if (x == nullptr || x->rank() < 2 || x->rank() > 5)
        return tl::unexpected(node.refuse("the input must be N x C (x D x H x W), rank 2 to 5"));
    // Training or inference is the engine's choice either way (batch statistics in training,
    // the running ones in evaluation); the forms only differ in their statistics outputs, which
    // must dangle: opsets 9-13 give 5 outputs in training, 14+ 3 with training_mode = 1.
    const std::size_t training_outputs = node.opset() >= 14 ? 3 : 5;
    if (node.output_count() != 1 && node.output_count() != training_outputs)
        return tl::unexpected(node.refuse(std::to_string(node.output_count()) + " outputs: at opset " +
                                          std::to_string(node.opset()) + " the importer reads 1 (inference) or " +
                                          std::to_string(training_outputs) + " (PyTorch's training export)"));
    for (std::size_t i = 1; i < 5; ++i)
        if (!node.has_input(i)) return tl::unexpected(node.refuse("input " + std::to_string(i) + " is missing"));
    PSRUN_TRY_ASSIGN(auto epsilon, node.float_attr("epsilon", 1e-5f));
    PSRUN_TRY_ASSIGN(auto momentum, node.float_attr("momentum", 0.9f));
    if (!(momentum >= 0.0f && momentum <= 1.0f)) return tl::unexpected(node.refuse("momentum must be in [0, 1]"));
    PSRUN_TRY_ASSIGN(auto training_mode, node.int_attr("training_mode", 0));  // opset 14+
    if (training_mode != 0 && training_mode != 1) return tl::unexpected(node.refuse("training_mode must be 0 or 1"));
    PSRUN_TRY_ASSIGN(auto input, node.value(0));
    nlohmann::json tensors;
    const char* slots[] = {"scale", "bias", "mean", "var"};
    for (std::size_t i = 1; i < 5; ++i) {
        PSRUN_TRY_ASSIGN(auto t, node.slot(i));
        tensors[slots[i - 1]] = t;
    }
    nlohmann::json layer = {{"kind", "batch_norm"},
                            {"inputs", {input}},
                            {"epsilon", onnx_float(epsilon)},
                            {"momentum", onnx_momentum(momentum)},
                            {"tensors", tensors}};
    PSRUN_TRY_ASSIGN(auto name, node.emit(layer));
    node.bind_output(0, name);
    return {};
}

Result<void> export_batch_norm(OnnxNodeExport& out) {
    const Node& node = out.node();
    const std::int64_t channels = out.model().value(node.inputs[0]).dims[1].value;
    const bool scale = node.attrs.at("scale").get<bool>(), center = node.attrs.at("center").get<bool>();
    std::size_t slot = 1;
    std::vector<std::string> inputs{out.input(0)};
    const std::vector<float> ones(static_cast<std::size_t>(channels), 1.0f), zeros(ones.size(), 0.0f);
    inputs.push_back(scale ? out.input(slot++) : out.float_constant(node.name + "/ones", {channels}, ones));
    inputs.push_back(center ? out.input(slot++) : out.float_constant(node.name + "/zeros", {channels}, zeros));
    inputs.push_back(out.input(slot++));  // the running mean
    inputs.push_back(out.input(slot));    // the running (unbiased) variance
    out.add("BatchNormalization", inputs, {out.output(0)},
            {{"epsilon", static_cast<float>(node.attrs.at("epsilon").get<double>())},
             {"momentum", static_cast<float>(1.0 - node.attrs.at("momentum").get<double>())}},
            node.name);
    return {};
}

}  // namespace

double onnx_float(float value) {
    char text[32];
    const auto r = std::to_chars(text, text + sizeof text, value);
    double out = value;
    std::from_chars(text, r.ptr, out);
    return out;
}

double onnx_momentum(float onnx_value) { return std::round((1.0 - static_cast<double>(onnx_value)) * 1e7) / 1e7; }

const OpSchema& batch_norm_schema() {
    static const OpSchema schema{
        "batch_norm",     1, 1, parse_batch_norm, infer_batch_norm, {"BatchNormalization"}, import_batch_norm,
        export_batch_norm};
    return schema;
}

}  // namespace psrun::nn
