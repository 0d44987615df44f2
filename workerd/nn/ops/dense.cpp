// dense: {"kind": "dense", "units": U, "bias": true, "weight_init", "bias_init"}
// A linear layer. On an image N x C x H x W it first flattens it in TF's NHWC order (feature
// i = (h * W + w) * C + c: mnist_deep's layout; write a `flatten` layer first for PyTorch's
// CHW order); on any other input [..., F] it applies to the last axis (N x F -> N x U,
// N x L x F -> N x L x U). "last_axis": true applies it to the last axis of a 4-D input too
// (a Linear after permute(0, 2, 3, 1): [N, H, W, C] -> [N, H, W, U]). Tensors: w [U, F] (slot
// "w"; PyTorch's Linear.weight, TF's kernel transposed), b [U] (slot "b"). ONNX: Gemm (transA
// 0; other alpha, beta or a C that is not a bias [U] import as dense, mul and add); MatMul + Add
// of a bias is recognised by the importer.
#include <cmath>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_dense(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto units, reader.integer("units", std::nullopt, 1, kMaxTensorElements));
    attrs["units"] = units;
    PSRUN_TRY_ASSIGN(auto last_axis, reader.boolean("last_axis", false));
    if (last_axis) attrs["last_axis"] = true;  // absent when false: older models keep their hash
    return parse_trainable_options(reader, attrs, Initializer{InitKind::kGlorotUniform, 0.0});
}

// An image the layer flattens (NHWC order), rather than a tensor it applies to per position.
bool is_image(const ValueInfo& in, const nlohmann::json& attrs) {
    return in.rank() == 4 && !in.dims[1].batch && !in.dims[2].batch && !in.dims[3].batch &&
           !attrs.value("last_axis", false);
}

Result<void> infer_dense(InferContext& context) {
    const ValueInfo& in = context.input(0);
    if (in.type != ElementType::kFloat || in.rank() < 2 || in.dims.back().batch)
        return tl::unexpected(
            op_error("expects float features [..., F], got " + to_string(in.dims) + " " + to_string(in.type)));
    const std::int64_t units = context.attr_int("units");
    Dims out;
    std::int64_t features = in.dims.back().value;
    std::int64_t rows = 1;  // per example
    if (is_image(in, context.attrs())) {
        const auto f = checked_product({in.dims[1].value, in.dims[2].value, in.dims[3].value});
        if (!f) return tl::unexpected(op_error("the flattened input would have more than 2^31-1 features"));
        features = *f;
        out = {in.dims[0], Dim::of(units)};
    } else {
        out.assign(in.dims.begin(), in.dims.end() - 1);
        out.push_back(Dim::of(units));
        for (std::size_t i = 0; i + 1 < in.dims.size(); ++i) rows *= in.dims[i].value;
    }
    context.set_output(0, ValueInfo{out});
    if (auto ok = context.tensor("w", {units, features}, attr_initializer(context.attrs(), "weight_init")); !ok)
        return ok;
    context.add_flops(2.0 * static_cast<double>(units) * static_cast<double>(features) * static_cast<double>(rows));
    if (context.attr_bool("bias")) {
        if (auto ok = context.tensor("b", {units}, attr_initializer(context.attrs(), "bias_init")); !ok) return ok;
        context.add_flops(static_cast<double>(units * rows));
    }
    return {};
}

Result<void> import_gemm(OnnxNodeImport& node) {
    // A known A (an RNN cell's zero initial state, torch.zeros(N, H)) becomes a constant layer first.
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const ValueInfo* a = node.info(0);
    if (a == nullptr || a->rank() != 2) return tl::unexpected(node.refuse("input A must be a 2-D graph value [N, F]"));
    auto trans_a = node.int_attr("transA", 0);
    auto trans_b = node.int_attr("transB", 0);
    auto alpha = node.float_attr("alpha", 1.0f);
    auto beta = node.float_attr("beta", 1.0f);
    if (!trans_a || !trans_b || !alpha || !beta)
        return tl::unexpected(!trans_a   ? trans_a.error()
                              : !trans_b ? trans_b.error()
                              : !alpha   ? alpha.error()
                                         : beta.error());
    if (*trans_a != 0) return tl::unexpected(node.refuse("transA=1 is not supported"));
    if (!std::isfinite(*alpha) || !std::isfinite(*beta))
        return tl::unexpected(node.refuse("alpha and beta must be finite numbers"));
    std::vector<std::int64_t> b_dims;
    if (auto s = node.constant_shape(1)) b_dims = *s;
    else if (const ValueInfo* bi = node.info(1); bi && !has_batch(bi->dims)) b_dims = concrete(bi->dims, 1);
    if (b_dims.size() != 2) return tl::unexpected(node.refuse("B must be a 2-D tensor"));
    PSRUN_TRY_ASSIGN(auto w, node.slot(1));
    std::string weight = w;
    std::int64_t units = b_dims[0];
    if (*trans_b == 0) {  // B is [F, U]: the dense layer wants [U, F]
        units = b_dims[1];
        PSRUN_TRY_ASSIGN(auto data, node.value(1));
        PSRUN_TRY_ASSIGN(
            auto t,
            node.emit(
                {{"kind", "transpose"}, {"name", node.node_name() + "/w_t"}, {"inputs", {data}}, {"perm", {1, 0}}}));
        weight = t;
    }
    // C as the dense layer's bias: [U] (an initializer, or a graph value without the batch:
    // torch's Cast of the bias to double where a float64 scalar made the graph double).
    const bool has_c = node.has_input(2);
    auto c_dims = has_c ? node.constant_shape(2) : std::nullopt;
    if (const ValueInfo* ci = has_c ? node.info(2) : nullptr; !c_dims && ci && !has_batch(ci->dims))
        c_dims = concrete(ci->dims, 1);
    const bool bias =
        has_c && *alpha == 1.0f && *beta == 1.0f && c_dims && c_dims->size() == 1 && c_dims->back() == units;
    if (!has_c || bias)
        return node.emit_weighted({{"kind", "dense"}, {"inputs", {x}}, {"units", units}, {"bias", bias}},
                                  {{"w", weight}});
    // Otherwise alpha * (A B) + beta * C (torch.addmm(c, a, b, beta=, alpha=), a C per example):
    // the product, scaled, plus C scaled and broadcast by an add.
    auto scale = [&node](const std::string& v, float k) -> Result<std::string> {
        if (k == 1.0f) return v;
        auto c =
            node.emit({{"kind", "constant"}, {"shape", nlohmann::json::array()}, {"type", "float"}, {"values", {k}}});
        if (!c) return c;
        return node.emit({{"kind", "mul"}, {"inputs", {v, *c}}});
    };
    PSRUN_TRY_ASSIGN(
        auto product,
        node.emit(
            {{"kind", "dense"}, {"inputs", {x}}, {"units", units}, {"bias", false}, {"tensors", {{"w", weight}}}}));
    PSRUN_TRY_ASSIGN(auto scaled, scale(product, *alpha));
    PSRUN_TRY_ASSIGN(auto c, node.value(2));
    PSRUN_TRY_ASSIGN(auto c_scaled, scale(c, *beta));
    PSRUN_TRY_ASSIGN(auto sum, node.emit({{"kind", "add"}, {"inputs", {scaled, c_scaled}}}));
    node.bind_output(0, sum);
    return {};
}

Result<void> export_dense(OnnxNodeExport& out) {
    const Node& node = out.node();
    const ValueInfo& in = out.model().value(node.inputs[0]);
    const bool bias = node.attrs.at("bias").get<bool>();
    std::vector<std::string> gemm_inputs;
    if (is_image(in, node.attrs)) {  // TF's NHWC flattening: transpose to NHWC, then ONNX's Flatten
        const std::string nhwc = out.fresh(node.name + "/nhwc");
        const std::string flat = out.fresh(node.name + "/flatten");
        out.add("Transpose", {out.input(0)}, {nhwc}, {{"perm", std::vector<std::int64_t>{0, 2, 3, 1}}},
                node.name + "/nhwc");
        out.add("Flatten", {nhwc}, {flat}, {{"axis", std::int64_t{1}}}, node.name + "/flatten");
        gemm_inputs = {flat};
    } else if (in.rank() == 2) {
        gemm_inputs = {out.input(0)};
    } else {  // [..., F]: MatMul with the transposed weights, then the bias
        const std::string wt = out.fresh(node.name + "/w_t");
        out.add("Transpose", {out.input(1)}, {wt}, {{"perm", std::vector<std::int64_t>{1, 0}}}, node.name + "/w_t");
        if (!bias) {
            out.add("MatMul", {out.input(0), wt}, {out.output(0)}, {}, node.name);
            return {};
        }
        const std::string mm = out.fresh(node.name + "/matmul");
        out.add("MatMul", {out.input(0), wt}, {mm}, {}, node.name + "/matmul");
        out.add("Add", {mm, out.input(2)}, {out.output(0)}, {}, node.name);
        return {};
    }
    gemm_inputs.push_back(out.input(1));
    if (bias) gemm_inputs.push_back(out.input(2));
    out.add("Gemm", gemm_inputs, {out.output(0)}, {{"transB", std::int64_t{1}}}, node.name);
    return {};
}

// Every weight once per position before the last dim (1 after an image, L on N x L x F).
TrainingMacs dense_macs(const MacsContext& c) {
    const TensorDef* w = c.slot_tensor(0);
    if (w == nullptr) return {};  // weights from a graph value (a transpose of a parameter)
    return c.weighted(static_cast<double>(w->size) * MacsContext::per_example(c.node.output_info.front().dims, true));
}

}  // namespace

const OpSchema& dense_schema() {
    static const OpSchema schema{"dense",      1,    1,         parse_dense, infer_dense, {"Gemm"}, import_gemm,
                                 export_dense, true, dense_macs};
    return schema;
}

}  // namespace psrun::nn
