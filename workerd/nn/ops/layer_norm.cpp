// layer_norm: {"kind": "layer_norm", "epsilon": 1e-5, "axis": -1, "scale": true, "center": true}
// Normalises each example over the dims from `axis` to the last (negative: counted from the
// end; they must not include the batch axis): y = scale * (x - mean) / sqrt(var + epsilon) +
// bias, mean and (population) variance over those dims, as nn.LayerNorm(x.shape[axis:]).
// Output = input shape. Tensors over the normalised dims: scale (slot "scale", ones; only with
// "scale") and bias (slot "bias", zeros; only with "center"). No state.
// ONNX: PyTorch's opset-13 decomposition (ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add)
// is recognised by the importer (workerd/onnx/onnx_patterns.cpp, over the last axis) and
// exported the same way, Mul and Add always (constant ones and zeros without scale or bias).
// LayerNormalization (opset 17: axis, epsilon, Scale, optional B; its Mean and InvStdDev
// outputs unread) imports as one layer (Scale of constant ones, or no B: no scale or bias). A
// layer over several dims imports back through its embedded description only.
#include <algorithm>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/normalization.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_layer_norm(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto epsilon, reader.number("epsilon", 1e-5));
    if (!(epsilon > 0.0 && epsilon <= 1.0))
        return tl::unexpected(reader.fail("epsilon", "expected a number in (0, 1], got " + describe_value(epsilon)));
    PSRUN_TRY_ASSIGN(auto axis, reader.integer("axis", -1, -6, 5));
    PSRUN_TRY_ASSIGN(auto scale, reader.boolean("scale", true));
    PSRUN_TRY_ASSIGN(auto center, reader.boolean("center", true));
    attrs["epsilon"] = epsilon;
    attrs["axis"] = axis;
    attrs["scale"] = scale;
    attrs["center"] = center;
    return {};
}

Result<void> infer_layer_norm(InferContext& context) {
    const ValueInfo& in = context.input(0);
    PSRUN_TRY_ASSIGN(auto g, layer_norm_geometry(context.attrs(), in));
    context.set_output(0, in);
    const std::vector<std::int64_t> shape =
        concrete(Dims(in.dims.begin() + static_cast<std::ptrdiff_t>(g.axis), in.dims.end()), 1);
    if (context.attr_bool("scale")) {
        if (auto ok = context.tensor("scale", shape, Initializer{InitKind::kConstant, 1.0}); !ok) return ok;
    }
    if (context.attr_bool("center")) {
        if (auto ok = context.tensor("bias", shape, Initializer{InitKind::kZeros, 0.0}); !ok) return ok;
    }
    context.add_flops(5.0 * static_cast<double>(elements_per_example(in.dims).value_or(0)));
    return {};
}

// ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div[, Mul][, Add]: what PyTorch 1.13 writes for
// nn.LayerNorm at opset 13, and what the importer recognises (for the last axis).
Result<void> export_layer_norm(OnnxNodeExport& out) {
    const Node& node = out.node();
    const ValueInfo& in = out.model().value(node.inputs[0]);
    PSRUN_TRY_ASSIGN(auto g, layer_norm_geometry(node.attrs, in));
    std::vector<std::int64_t> axes;
    for (std::size_t a = g.axis; a < in.rank(); ++a) axes.push_back(static_cast<std::int64_t>(a));
    const bool scale = node.attrs.at("scale").get<bool>(), center = node.attrs.at("center").get<bool>();
    const std::string& n = node.name;
    auto scalar = [&](const std::string& hint, float v) {
        return out.float_constant(n + "/" + hint, {}, std::span(&v, 1));
    };
    const std::string x = out.input(0), mean = out.fresh(n + "/mean"), diff = out.fresh(n + "/diff"),
                      square = out.fresh(n + "/square"), var = out.fresh(n + "/var"),
                      var_eps = out.fresh(n + "/var_eps"), stddev = out.fresh(n + "/stddev");
    const std::string normed = out.fresh(n + "/normalized"), scaled = out.fresh(n + "/scaled");
    out.add("ReduceMean", {x}, {mean}, {{"axes", axes}, {"keepdims", std::int64_t{1}}}, n + "/ReduceMean");
    out.add("Sub", {x, mean}, {diff}, {}, n + "/Sub");
    out.add("Pow", {diff, scalar("two", 2.0f)}, {square}, {}, n + "/Pow");
    out.add("ReduceMean", {square}, {var}, {{"axes", axes}, {"keepdims", std::int64_t{1}}}, n + "/ReduceMean_1");
    out.add("Add", {var, scalar("epsilon", static_cast<float>(node.attrs.at("epsilon").get<double>()))}, {var_eps}, {},
            n + "/Add");
    out.add("Sqrt", {var_eps}, {stddev}, {}, n + "/Sqrt");
    out.add("Div", {diff, stddev}, {normed}, {}, n + "/Div");
    // Mul and Add always (constant ones and zeros for a layer without scale or bias), so that
    // the importer's pattern finds the whole decomposition.
    std::vector<std::int64_t> shape;
    for (std::size_t a = g.axis; a < in.rank(); ++a) shape.push_back(in.dims[a].value);
    const std::vector<float> ones(static_cast<std::size_t>(g.features), 1.0f), zeros(ones.size(), 0.0f);
    std::size_t slot = 1;
    const std::string gamma = scale ? out.input(slot++) : out.float_constant(n + "/ones", shape, ones);
    const std::string beta = center ? out.input(slot) : out.float_constant(n + "/zeros", shape, zeros);
    out.add("Mul", {normed, gamma}, {scaled}, {}, n + "/Mul");
    out.add("Add", {scaled, beta}, {out.output(0)}, {}, n);
    return {};
}

// LayerNormalization(X, Scale[, B]), opset 17. Scale and B bind float initializers (PyTorch's
// weight and bias); known constants of ones and zeros drop them; other values are bound.
Result<void> import_layer_norm(OnnxNodeImport& node) {
    const ValueInfo* x = node.info(0);
    if (x == nullptr) return tl::unexpected(node.refuse("its input X must be a computed value"));
    PSRUN_TRY_ASSIGN(auto axis, node.int_attr("axis", -1));
    PSRUN_TRY_ASSIGN(auto epsilon, node.float_attr("epsilon", 1e-5f));
    PSRUN_TRY_ASSIGN(auto input, node.value(0));
    nlohmann::json tensors = nlohmann::json::object();
    bool on[2] = {false, false};
    const char* slots[2] = {"scale", "bias"};
    for (std::size_t i = 1; i < 3; ++i) {
        if (!node.has_input(i)) continue;
        const float neutral = i == 1 ? 1.0f : 0.0f;
        if (node.initializer(i).empty()) {
            const auto known = node.floats(i);
            if (known && std::all_of(known->begin(), known->end(), [&](float v) { return v == neutral; })) continue;
        }
        PSRUN_TRY_ASSIGN(auto bound, node.slot(i));
        tensors[slots[i - 1]] = bound;
        on[i - 1] = true;
    }
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "layer_norm"},
                                           {"inputs", {input}},
                                           {"axis", axis},
                                           {"epsilon", onnx_float(epsilon)},
                                           {"scale", on[0]},
                                           {"center", on[1]},
                                           {"tensors", tensors}}));
    node.bind_output(0, name);
    return {};
}

}  // namespace

Result<LayerNormGeometry> layer_norm_geometry(const nlohmann::json& attrs, const ValueInfo& in) {
    if (in.type != ElementType::kFloat) return tl::unexpected(op_error("expects floats, got integer ids"));
    const auto rank = static_cast<std::int64_t>(in.rank());
    const auto axis = attrs.at("axis").get<std::int64_t>();
    const std::int64_t a = axis < 0 ? rank + axis : axis;
    if (rank < 2 || a < 0 || a >= rank)
        return tl::unexpected(op_error("axis " + std::to_string(axis) + " is outside the input " + to_string(in.dims) +
                                       " (rank " + std::to_string(rank) + ")"));
    LayerNormGeometry g;
    g.axis = static_cast<std::size_t>(a);
    for (std::size_t i = g.axis; i < in.rank(); ++i) {
        if (in.dims[i].batch)
            return tl::unexpected(op_error("axis " + std::to_string(axis) + " of " + to_string(in.dims) +
                                           " normalises over the batch axis; give an axis after it (-1: the last)"));
        g.features *= in.dims[i].value;
    }
    return g;
}

NormSlots norm_slots(const Node& node) {
    NormSlots s;
    for (std::size_t k = 0; k < node.slots.size(); ++k) {
        const int index = static_cast<int>(node.data_inputs + k);
        const std::string& slot = node.slots[k];
        if (slot == "scale") s.scale = index;
        else if (slot == "bias") s.bias = index;
        else if (slot == "mean") s.mean = index;
        else if (slot == "var") s.var = index;
    }
    return s;
}

const OpSchema& layer_norm_schema() {
    static const OpSchema schema{
        "layer_norm",     1, 1, parse_layer_norm, infer_layer_norm, {"LayerNormalization"}, import_layer_norm,
        export_layer_norm};
    return schema;
}

}  // namespace psrun::nn
