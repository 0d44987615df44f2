// ONNX Einsum -> the layers plan_einsum (einsum.h) lowers it to, named "<node>/<step>" (the
// last one: the node's own name). matmul.cpp's schema lists Einsum and hands it here. Every
// refusal names the node, op Einsum and the equation.
#include <string>
#include <vector>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/ops/einsum.h"

namespace psrun::nn {

Result<void> import_einsum(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto equation, node.string_attr("equation", ""));
    if (equation.empty()) return tl::unexpected(node.refuse("the equation attribute is missing or empty"));
    const std::string what = "equation \"" + equation + "\"";
    std::vector<Dims> dims;
    for (std::size_t i = 0; i < node.input_count(); ++i) {
        if (const ValueInfo* v = node.info(i)) {
            dims.push_back(v->dims);
        } else if (auto shape = node.constant_shape(i)) {
            dims.push_back(constant_dims(*shape));
        } else {
            return tl::unexpected(node.refuse(what + ": the shape of operand " + std::to_string(i) + " is unknown"));
        }
    }
    auto plan = plan_einsum(equation, dims);
    if (!plan) return tl::unexpected(node.refuse(what + " " + plan.error().message));
    std::vector<std::string> values;
    for (std::size_t i = 0; i < dims.size(); ++i) {
        PSRUN_TRY_ASSIGN(auto v, node.value(i));
        values.push_back(v);
    }
    const std::string base = node.node_name();
    for (std::size_t k = 0; k < plan->steps.size(); ++k) {
        const EinsumStep& s = plan->steps[k];
        nlohmann::json layer = s.attrs;
        layer["kind"] = s.kind;
        layer["name"] = k + 1 == plan->steps.size() ? base : base + "/" + s.label;
        nlohmann::json inputs = nlohmann::json::array();
        for (const auto i : s.inputs) inputs.push_back(values.at(i));
        layer["inputs"] = inputs;
        auto name = node.emit(std::move(layer));
        if (!name) {
            Error e = name.error();
            e.message += " (lowering " + what + ")";
            return tl::unexpected(e);
        }
        values.push_back(*name);
    }
    node.bind_output(0, values.at(plan->result));
    return {};
}

}  // namespace psrun::nn
