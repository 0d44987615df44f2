// PReLU: y = x where x > 0, slope * x elsewhere, the slope learned per channel (axis 1 of an
// N x C x ... input) or shared by all:
//   {"kind": "prelu", "shared": false}: a tensor "slope" of [C] (shared: [1]), initialised to
//   0.25 (PyTorch's nn.PReLU);
//   {"kind": "prelu", "inputs": ["x", "slope"]}: the slope is a value (a parameter layer's
//   output, reshaped as ONNX wants it) of one element or of C elements along axis 1 once
//   numpy-broadcast to x's rank ([C, 1, 1] for images, [C] for N x C); it gets the gradient.
// Floats only. FLOPs: 1 per element.
// ONNX: PRelu. PyTorch writes PRelu(x, Unsqueeze(weight)) for nn.PReLU() ([1]) and nn.PReLU(C)
// ([C]): the Unsqueeze imports as a parameter layer of the initializer's name and an unsqueeze
// layer, so the trained weight keeps PyTorch's name; a slope that is an initializer itself binds
// the tensor. Export writes PRelu with the slope as x's rank wants it.
#include <algorithm>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_prelu(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto shared, reader.boolean("shared", false));
    attrs["shared"] = shared;
    return {};
}

Result<void> infer_prelu(InferContext& context) {
    const ValueInfo& in = context.input(0);
    if (in.type != ElementType::kFloat) return tl::unexpected(op_error("expects floats, got integer ids"));
    if (in.rank() < 2 || in.dims[1].batch)
        return tl::unexpected(op_error("expects an N x C (x ...) input, got " + to_string(in.dims)));
    const std::int64_t channels = in.dims[1].value;
    if (context.input_count() == 2) {
        const ValueInfo& slope = context.input(1);
        if (slope.type != ElementType::kFloat) return tl::unexpected(op_error("the slope must be floats"));
        // One element, or C along axis 1 after numpy-broadcasting to x's rank.
        if (slope.rank() > in.rank())
            return tl::unexpected(
                op_error("the slope " + to_string(slope.dims) + " has more dims than " + to_string(in.dims)));
        bool ones = true, per_channel = slope.rank() + 1 >= in.rank();
        const std::size_t offset = in.rank() - std::min(slope.rank(), in.rank());
        for (std::size_t d = 0; d < slope.rank(); ++d) {
            const Dim dim = slope.dims[d];
            ones = ones && dim == Dim::of(1);
            const std::size_t axis = d + offset;
            per_channel = per_channel && (axis == 1 ? dim == Dim::of(channels) : dim == Dim::of(1));
        }
        if (!ones && !per_channel)
            return tl::unexpected(op_error("the slope " + to_string(slope.dims) +
                                           " is neither one value nor one per channel of " + to_string(in.dims)));
    } else {
        const std::int64_t n = context.attr_bool("shared") ? 1 : channels;
        if (auto ok = context.tensor("slope", {n}, Initializer{InitKind::kConstant, 0.25}); !ok) return ok;
    }
    context.set_output(0, in);
    context.add_flops(static_cast<double>(elements_per_example(in.dims).value_or(0)));
    return {};
}

Result<void> import_prelu(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const ValueInfo* xi = node.info(0);
    if (xi == nullptr || xi->rank() < 2) return tl::unexpected(node.refuse("the input must be N x C (x ...)"));
    nlohmann::json layer = {{"kind", "prelu"}};
    const std::string tensor = node.initializer(1);
    const auto shape = node.constant_shape(1);
    std::int64_t count = 1;
    for (const auto d : shape.value_or(std::vector<std::int64_t>{})) count *= d;
    // An initializer of [1] or [C] (rank 2) binds the tensor; any other slope is a value.
    if (!tensor.empty() && shape && (count == 1 || (shape->size() == 1 && xi->rank() == 2))) {
        layer["inputs"] = {x};
        layer["shared"] = count == 1;
        layer["tensors"] = {{"slope", tensor}};
    } else {
        PSRUN_TRY_ASSIGN(auto slope, node.value(1));
        layer["inputs"] = {x, slope};
    }
    PSRUN_TRY_ASSIGN(auto name, node.emit(layer));
    node.bind_output(0, name);
    return {};
}

Result<void> export_prelu(OnnxNodeExport& out) {
    const Node& node = out.node();
    std::string slope = out.input(1);
    const ValueInfo& x = out.model().value(node.inputs.at(0));
    if (node.data_inputs == 1 && !node.attrs.at("shared").get<bool>() && x.rank() > 2) {
        // [C] -> [C, 1, ...]: numpy broadcasting aligns the last axes.
        std::vector<std::int64_t> axes;
        for (std::size_t d = 1; d + 1 < x.rank(); ++d) axes.push_back(static_cast<std::int64_t>(d));
        const std::string shaped = out.fresh(node.name + "/slope");
        out.add("Unsqueeze", {slope, out.int64_constant(node.name + "/axes", axes)}, {shaped}, {},
                node.name + "/unsqueeze");
        slope = shaped;
    }
    out.add("PRelu", {out.input(0), slope}, {out.output(0)}, {}, node.name);
    return {};
}

}  // namespace

const OpSchema& prelu_schema() {
    static const OpSchema schema{"prelu", 1, 2, parse_prelu, infer_prelu, {"PRelu"}, import_prelu, export_prelu};
    return schema;
}

}  // namespace psrun::nn
