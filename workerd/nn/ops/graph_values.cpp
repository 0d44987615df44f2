// Values that are not computed from inputs:
//   parameter: {"kind": "parameter", "shape": [d, ...] (or [], a scalar), "init": glorot_uniform}: a trainable
//     tensor (slot "value", "<layer>/value" unless "tensors" names it) as a value any layer can
//     read: a learned positional embedding, weights an ONNX graph transforms before use.
//     "frozen": true makes it a state tensor nothing writes (never trained, no gradient, no
//     optimizer slots; kept with the model and its checkpoints): a PyTorch buffer or a
//     requires_grad=False weight too large for a constant (python/psrun_torch.py, psrun.frozen).
//   constant: {"kind": "constant", "shape": [d, ...], "type": "float" | "int", "values": [...]}
//     (a float constant's infinities are the strings "inf" and "-inf")
//     or {"kind": "constant", "shape": [1, "N", 64], "fill": 0}: fixed data in the description
//     (at most 2^20 values; a shape with "N" (or "kN", a multiple of the batch size) takes a
//     fill value only).
//   batch_range: {"kind": "batch_range"}: the integers 0 .. N-1 over the batch axis
//     (torch.arange(x.shape[0]): the batch coordinate of the index tuples torch.onnx writes for
//     slice assignment and advanced indexing).
// No data inputs. ONNX: parameter is the initializer (exported as Identity); constant a
// Constant node; batch_range is Range(0, N, 1) (exported so, N from the input's shape).
#include <cmath>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_parameter(FieldReader& reader, nlohmann::json& attrs) {
    // [] is a scalar (weight_norm(dim=None)'s g).
    const bool scalar = reader.has("shape") && reader.raw("shape") == nlohmann::json::array();
    std::vector<std::int64_t> shape;
    if (!scalar) {
        PSRUN_TRY_ASSIGN(auto dims, reader.integers("shape", std::nullopt, 0, 1, kMaxTensorElements));
        shape = dims;
    }
    Initializer init{InitKind::kGlorotUniform, 0.0};
    if (reader.has("init")) {
        PSRUN_TRY_ASSIGN(auto parsed, parse_initializer(reader.raw("init"), reader.where() + ": field \"init\""));
        init = parsed;
    }
    attrs["shape"] = shape;
    attrs["init"] = to_json(init);
    PSRUN_TRY_ASSIGN(auto frozen, reader.boolean("frozen", false));
    if (frozen) attrs["frozen"] = true;  // absent when false: older models keep their hash
    return {};
}

Result<void> infer_parameter(InferContext& context) {
    const auto shape = context.attr_ints("shape");
    const auto cls = context.attrs().value("frozen", false) ? TensorClass::kState : TensorClass::kTrainable;
    if (auto ok = context.tensor("value", shape, attr_initializer(context.attrs(), "init"), cls); !ok) return ok;
    context.set_output(0, ValueInfo{constant_dims(shape)});
    return {};
}

Result<void> parse_constant(FieldReader& reader, nlohmann::json& attrs) {
    if (!reader.has("shape")) return tl::unexpected(reader.fail("shape", "missing (expected a list of dims)"));
    const auto& shape = reader.raw("shape");
    if (!shape.is_array() || shape.size() > 6)
        return tl::unexpected(reader.fail("shape", "expected up to 6 dims (positive integers, \"N\" or \"kN\")"));
    Dims dims;
    nlohmann::json canonical = nlohmann::json::array();
    for (const auto& d : shape) {
        const auto dim = parse_dim(d);
        if (!dim)
            return tl::unexpected(
                reader.fail("shape", "expected positive integers, \"N\" or \"kN\", got " + describe_value(d)));
        dims.push_back(*dim);
        canonical.push_back(dim->batch ? nlohmann::json(dim->to_string()) : nlohmann::json(dim->value));
    }
    PSRUN_TRY_ASSIGN(auto type, reader.choice("type", 0, {"float", "int"}));
    const auto count = elements_per_example(dims);
    if (!count || *count > kMaxConstantValues)
        return tl::unexpected(reader.fail("shape", "more than " + std::to_string(kMaxConstantValues) + " values"));
    attrs["shape"] = canonical;
    attrs["type"] = type == 1 ? "int" : "float";
    const bool values = reader.has("values"), fill = reader.has("fill");
    if (values == fill) return tl::unexpected(reader.fail("values", "give exactly one of \"values\" and \"fill\""));
    if (fill) {
        PSRUN_TRY_ASSIGN(auto v, reader.number("fill", std::nullopt));
        attrs["fill"] = type == 1 ? nlohmann::json(static_cast<std::int64_t>(v)) : nlohmann::json(v);
        return {};
    }
    if (has_batch(dims)) return tl::unexpected(reader.fail("values", "a shape with N takes \"fill\", not values"));
    const auto& raw = reader.raw("values");
    if (!raw.is_array() || static_cast<std::int64_t>(raw.size()) != *count)
        return tl::unexpected(reader.fail("values", "expected " + std::to_string(*count) + " numbers"));
    // JSON has no infinities: a float constant writes them as "inf" and "-inf" (a causal
    // attention mask), so the description survives its text form (checkpoints, exports).
    nlohmann::json canonical_values = nlohmann::json::array();
    for (const auto& v : raw) {
        const bool infinity = type == 0 && ((v.is_number_float() && std::isinf(v.get<double>())) ||
                                            (v.is_string() && (v == "inf" || v == "-inf")));
        if (infinity) {
            canonical_values.push_back((v.is_string() ? v == "-inf" : v.get<double>() < 0) ? "-inf" : "inf");
            continue;
        }
        if (!v.is_number() || (type == 1 && !v.is_number_integer()) ||
            (v.is_number_float() && std::isnan(v.get<double>())))
            return tl::unexpected(reader.fail(
                "values", std::string("expected ") + (type == 1 ? "integers" : "numbers (or \"inf\", \"-inf\")") +
                              ", got " + describe_value(v)));
        canonical_values.push_back(v);
    }
    attrs["values"] = std::move(canonical_values);
    return {};
}

Dims constant_shape(const nlohmann::json& attrs) {
    Dims dims;
    for (const auto& d : attrs.at("shape")) dims.push_back(*parse_dim(d));
    return dims;
}

Result<void> infer_constant(InferContext& context) {
    context.set_output(0, ValueInfo{constant_shape(context.attrs()),
                                    context.attr_string("type") == "int" ? ElementType::kInt : ElementType::kFloat});
    return {};
}

Result<void> export_parameter(OnnxNodeExport& out) {
    out.add("Identity", {out.input(0)}, {out.output(0)}, {}, out.node().name);
    return {};
}

// A fill whose shape depends on the batch size (an RNN's zero initial state, [layers, N, H]):
// Expand of the scalar to a shape computed from the model input's batch dim, as PyTorch's
// exporter writes it (Shape, Gather, Mul, Concat), so any batch size runs.
Result<void> export_batch_fill(OnnxNodeExport& out, const Dims& dims) {
    const Node& node = out.node();
    const std::string shape = out.fresh(node.name + "/input_shape"), batch = out.fresh(node.name + "/batch");
    out.add("Shape", {out.model_input()}, {shape}, {}, node.name + "/Shape");
    out.add("Gather", {shape, out.int64_constant(node.name + "/zero", {0})}, {batch}, {{"axis", std::int64_t{0}}},
            node.name + "/Gather");
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < dims.size(); ++i) {
        const auto& d = dims[i];
        if (!d.batch) {
            parts.push_back(out.int64_constant(node.name + "/dim" + std::to_string(i), {d.value}));
            continue;
        }
        const std::string scaled = out.fresh(node.name + "/dim" + std::to_string(i));
        out.add("Mul", {batch, out.int64_constant(node.name + "/factor" + std::to_string(i), {d.value})}, {scaled}, {},
                node.name + "/Mul" + std::to_string(i));
        parts.push_back(scaled);
    }
    const std::string target = out.fresh(node.name + "/shape");
    out.add("Concat", parts, {target}, {{"axis", std::int64_t{0}}}, node.name + "/Concat");
    std::string fill;
    if (node.attrs.at("type") == "int") {
        fill = out.int64_constant(node.name + "/fill", {node.attrs.at("fill").get<std::int64_t>()});
    } else {
        const float v = node.attrs.at("fill").get<float>();
        fill = out.fresh(node.name + "/fill");
        out.constant_node(fill, {1}, std::span(&v, 1), node.name + "/fill");
    }
    out.add("Expand", {fill, target}, {out.output(0)}, {}, node.name);
    return {};
}

Result<void> export_constant(OnnxNodeExport& out) {
    const Node& node = out.node();
    const Dims dims = constant_shape(node.attrs);
    if (has_batch(dims)) {
        if (!node.attrs.contains("fill"))
            return tl::unexpected(
                op_error("a constant whose shape depends on the batch size holds one fill value or none"));
        return export_batch_fill(out, dims);
    }
    const auto shape = concrete(dims, 1);
    if (node.attrs.at("type") == "int") {
        std::vector<std::int64_t> values;
        if (node.attrs.contains("fill"))
            values.assign(static_cast<std::size_t>(*elements_per_example(dims)),
                          node.attrs.at("fill").get<std::int64_t>());
        else values = node.attrs.at("values").get<std::vector<std::int64_t>>();
        const std::string source = out.int64_constant(node.name + "/values", values);
        out.add("Reshape", {source, out.int64_constant(node.name + "/shape", shape)}, {out.output(0)}, {}, node.name);
        return {};
    }
    std::vector<float> values;
    if (node.attrs.contains("fill"))
        values.assign(static_cast<std::size_t>(*elements_per_example(dims)), node.attrs.at("fill").get<float>());
    else
        for (const auto& v : node.attrs.at("values")) values.push_back(constant_float(v));
    out.constant_node(out.output(0), shape, values, node.name);  // not an initializer: it would import as a parameter
    return {};
}

Result<void> infer_batch_range(InferContext& context) {
    context.set_output(0, ValueInfo{Dims{Dim{1, true}}, ElementType::kInt});
    return {};
}

Result<void> import_batch_range(OnnxNodeImport& node) {
    const auto start = node.ints(0), delta = node.ints(2);
    const auto limit = node.symbolic_ints(1);
    const bool arange_n = start && start->size() == 1 && (*start)[0] == 0 && delta && delta->size() == 1 &&
                          (*delta)[0] == 1 && limit && limit->size() == 1 && (*limit)[0] == Dim{1, true};
    if (!arange_n)
        return tl::unexpected(node.refuse(
            "a Range computed at run time imports only as arange(N) over the batch size (start 0, limit N, step 1)"));
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "batch_range"}}));
    node.bind_output(0, name);
    return {};
}

// Range(0, N, 1) with N the model input's dim 0, each a 0-D tensor.
Result<void> export_batch_range(OnnxNodeExport& out) {
    const Node& node = out.node();
    auto scalar = [&out, &node](const std::string& hint, const std::string& one) {
        const std::string s = out.fresh(node.name + "/" + hint);
        out.add("Squeeze", {one, out.int64_constant(node.name + "/" + hint + "_axes", {0})}, {s}, {},
                node.name + "/" + hint);
        return s;
    };
    const std::string shape = out.fresh(node.name + "/input_shape"), batch = out.fresh(node.name + "/batch");
    out.add("Shape", {out.model_input()}, {shape}, {}, node.name + "/Shape");
    out.add("Gather", {shape, out.int64_constant(node.name + "/zero", {0})}, {batch}, {{"axis", std::int64_t{0}}},
            node.name + "/Gather");
    out.add("Range",
            {scalar("start", out.int64_constant(node.name + "/start_1", {0})), scalar("limit", batch),
             scalar("delta", out.int64_constant(node.name + "/delta_1", {1}))},
            {out.output(0)}, {}, node.name);
    return {};
}

}  // namespace

const OpSchema& batch_range_schema() {
    static const OpSchema schema{
        "batch_range",      0,    0, parse_no_attributes, infer_batch_range, {"Range"}, import_batch_range,
        export_batch_range, false};
    return schema;
}

const OpSchema& parameter_schema() {
    static const OpSchema schema{"parameter", 0, 0, parse_parameter, infer_parameter, {}, nullptr, export_parameter};
    return schema;
}

const OpSchema& constant_schema() {
    static const OpSchema schema{"constant", 0, 0, parse_constant, infer_constant, {}, nullptr, export_constant, false};
    return schema;
}

}  // namespace psrun::nn
