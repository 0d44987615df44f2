// ONNX Einsum -> the layers plan_einsum (einsum.h) lowers it to, named "<node>/<step>" (the
// last one: the node's own name). matmul.cpp's schema lists Einsum and hands it here. Every
// refusal names the node, op Einsum and the equation.
#include <string>
#include <vector>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/ops/einsum.h"

namespace psrun::nn {

namespace {

// Emits `plan`'s layers on `operands` (psrun values), named "<base>/<step>", the last one
// `last_name`; returns the value that is its result.
Result<std::string> emit_plan(OnnxNodeImport& node, const EinsumPlan& plan, std::vector<std::string> values,
                              const std::string& base, const std::string& last_name, const std::string& what) {
    for (std::size_t k = 0; k < plan.steps.size(); ++k) {
        const EinsumStep& s = plan.steps[k];
        nlohmann::json layer = s.attrs;
        layer["kind"] = s.kind;
        layer["name"] = k + 1 == plan.steps.size() ? last_name : base + "/" + s.label;
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
    return values.at(plan.result);
}

}  // namespace

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
    // Three or more operands: a chain of pairs, each planned on the previous pair's result.
    std::vector<std::string> pairs = {equation};
    if (dims.size() > 2) {
        auto parsed = parse_einsum(equation, dims.size());
        if (!parsed) return tl::unexpected(node.refuse(what + " " + parsed.error().message));
        pairs = pairwise_einsum(*parsed);
    }
    std::vector<EinsumPlan> plans;
    Dims current = dims.front();
    for (std::size_t k = 0; k < pairs.size(); ++k) {
        std::vector<Dims> operands = pairs.size() == 1 ? dims : std::vector<Dims>{current, dims[k + 1]};
        auto plan = plan_einsum(pairs[k], operands);
        if (!plan) {
            const std::string step = pairs.size() == 1 ? "" : " (as the pair \"" + pairs[k] + "\")";
            return tl::unexpected(node.refuse(what + step + " " + plan.error().message));
        }
        current = plan->dims;
        plans.push_back(std::move(*plan));
    }
    std::vector<std::string> values;
    for (std::size_t i = 0; i < dims.size(); ++i) {
        PSRUN_TRY_ASSIGN(auto v, node.value(i));
        values.push_back(v);
    }
    const std::string base = node.node_name();
    if (plans.size() == 1) {
        PSRUN_TRY_ASSIGN(auto out, emit_plan(node, plans.front(), values, base, base, what));
        node.bind_output(0, out);
        return {};
    }
    std::string result = values.front();
    for (std::size_t k = 0; k < plans.size(); ++k) {
        const std::string pair_base = base + "/pair" + std::to_string(k);
        const std::string last = k + 1 == plans.size() ? base : pair_base;
        PSRUN_TRY_ASSIGN(result, emit_plan(node, plans[k], {result, values[k + 1]}, pair_base, last, what));
    }
    node.bind_output(0, result);
    return {};
}

}  // namespace psrun::nn
