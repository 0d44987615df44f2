// The losses PyTorch exports inside a module (issue 35, "the loss is part of the graph"):
//   {"kind": "softmax_cross_entropy_loss", "inputs": ["scores", "labels"(, "weights")],
//    "reduction": "mean", "ignore_index": -100, "label_smoothing": 0.1}:
//     torch.nn.functional.cross_entropy(scores, labels, weight, ignore_index, reduction,
//     label_smoothing);
//   {"kind": "nll_loss", "inputs": ["log_probs", "labels"(, "weights")], "reduction": "mean",
//    "ignore_index": -100}: torch.nn.functional.nll_loss (input 0 holds log-probabilities).
// Inputs: scores floats [R, C] or [R, C, d1, ..., dk] (R: N, or a multiple of N after a
// reshape(-1, C); C constant); labels integers (class ids) of the scores' dims without axis 1,
// [R] or [R, d1, ..., dk]; optional weights floats [C] (a weight per class, any value: a
// constant, a tensor; it gets no gradient: zeros where the engine asks for one).
// Fields: "reduction": "mean" (default) | "sum" | "none"; "ignore_index": an integer, optional
// (absent: no label is ignored; the canonical form then omits it); "label_smoothing" (only
// softmax_cross_entropy_loss): E in [0, 1), default 0 (psrun's extension: ONNX has none).
// Output: reduction none: floats of the labels' dims, one loss per position; mean and sum: a
// float scalar (no batch axis).
// Semantics, per position i with label y (lp = log_softmax over axis 1, in double):
//   nll_i = -w[y] lp[y]; smooth_i = -sum_c w[c] lp[c] / C; loss_i = (1 - E) nll_i + E smooth_i
// (w = 1 without weights; nll_loss: lp is input 0 itself and E = 0). A position whose label is
// ignore_index has loss 0 and counts nowhere. sum = sum_i loss_i; mean = sum_i loss_i /
// sum_i w[y_i] over the positions not ignored (torch's weighted mean). Where that denominator
// is 0 (every position ignored) the mean is 0 with a zero gradient, where torch returns nan: a
// nan loss would stop training (psd refuses it). A label outside [0, C) that is not
// ignore_index stops the step (std::out_of_range naming the row, the position and the range).
// Gradient: d loss_i / d x_c = (1 - E) w[y] (p_c - [c == y]) + E (p_c sum_k w_k - w_c) / C
// (nll_loss: -w[y] at c = y, 0 elsewhere), times the output's gradient at i (none) or the
// scalar's, divided by the mean's denominator.
// FLOPs: 4 per score element (max, exp, sum, the gradient's).
// ONNX: SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (opset 12+: reduction, default
// "mean"; ignore_index when present; the labels int64, read as integers; weights an initializer
// or Constant become a `constant`, a graph value is read as it is). SoftmaxCrossEntropyLoss's
// second output (log_prob), when read, is a log_softmax over axis 1 of the scores. Float labels
// of the scores' dims (probability targets, as torch 1.13 writes F.cross_entropy(x, probs))
// import as -reduce(sum(labels * log_softmax(scores), axis 1)) in element-wise kinds. Export
// (opset 13): the same nodes and attributes; label smoothing has no ONNX form and is refused.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

constexpr std::int64_t kIntMin = std::numeric_limits<std::int32_t>::min();
constexpr std::int64_t kIntMax = std::numeric_limits<std::int32_t>::max();

Result<void> parse_loss(FieldReader& reader, nlohmann::json& attrs, bool smoothing) {
    static const std::vector<std::string_view> reductions = {"mean", "sum", "none"};
    PSRUN_TRY_ASSIGN(auto reduction, reader.choice("reduction", 0, reductions));
    attrs["reduction"] = std::string(reductions[reduction]);
    if (reader.has("ignore_index")) {  // absent: no label is ignored (and the field stays absent)
        PSRUN_TRY_ASSIGN(auto ignore, reader.integer("ignore_index", std::nullopt, kIntMin, kIntMax));
        attrs["ignore_index"] = ignore;
    }
    if (!smoothing) return {};
    PSRUN_TRY_ASSIGN(auto e, reader.number("label_smoothing", 0.0));
    if (e < 0.0 || e >= 1.0)
        return tl::unexpected(reader.fail("label_smoothing", "expected a number in [0, 1), got " + std::to_string(e)));
    attrs["label_smoothing"] = e;
    return {};
}

Result<void> parse_softmax_cross_entropy(FieldReader& reader, nlohmann::json& attrs) {
    return parse_loss(reader, attrs, true);
}

Result<void> parse_nll(FieldReader& reader, nlohmann::json& attrs) { return parse_loss(reader, attrs, false); }

Result<void> infer_loss(InferContext& context) {
    const ValueInfo& scores = context.input(0);
    const ValueInfo& labels = context.input(1);
    const bool nll = context.node().op == "nll_loss";
    const char* what = nll ? "log-probabilities" : "scores";
    if (scores.type != ElementType::kFloat)
        return tl::unexpected(
            op_error(std::string("input 0 (") + what + ") must be floats, got integers " + to_string(scores.dims)));
    if (scores.rank() < 2)
        return tl::unexpected(op_error(std::string("input 0 (") + what + ") must be [R, C] or [R, C, d1, ...], got " +
                                       to_string(scores.dims)));
    const Dim classes = scores.dims[1];
    if (classes.batch)
        return tl::unexpected(op_error("the classes (axis 1 of " + to_string(scores.dims) +
                                       ") scale with the batch; the class axis must be a constant"));
    Dims expected = scores.dims;
    expected.erase(expected.begin() + 1);
    if (labels.type != ElementType::kInt)
        return tl::unexpected(op_error("input 1 (" + context.input_name(1) +
                                       ") must hold integer class ids, got floats " + to_string(labels.dims)));
    if (labels.dims != expected)
        return tl::unexpected(op_error("the labels (" + context.input_name(1) + ") are " + to_string(labels.dims) +
                                       " but the " + what + " " + to_string(scores.dims) + " need " +
                                       to_string(expected) + " (their dims without axis 1, the classes)"));
    if (context.input_count() > 2) {
        const ValueInfo& weights = context.input(2);
        if (weights.type != ElementType::kFloat || weights.dims != Dims{classes})
            return tl::unexpected(op_error("input 2 (" + context.input_name(2) +
                                           ", the class weights) must be floats [" + std::to_string(classes.value) +
                                           "], got " + to_string(weights.type) + " " + to_string(weights.dims)));
    }
    const bool none = context.attr_string("reduction") == "none";
    context.set_output(0, ValueInfo{none ? expected : Dims{}, ElementType::kFloat});
    context.add_flops(4.0 * static_cast<double>(elements_per_example(scores.dims).value_or(0)));
    return {};
}

// Probabilities as targets (F.cross_entropy(logits, probs): distillation, mixup), which torch
// 1.13 writes as a SoftmaxCrossEntropyLoss whose labels are floats of the scores' dims (ONNX's
// schema wants class ids): -sum(labels * log_softmax(scores), axis 1), then the reduction (a
// mean over every remaining entry, as torch's).
Result<void> import_soft_targets(OnnxNodeImport& node, const std::string& scores) {
    if (node.input_count() > 2 && node.has_input(2))
        return tl::unexpected(node.refuse("class weights with probability targets are not supported"));
    PSRUN_TRY_ASSIGN(auto labels, node.value(1));
    PSRUN_TRY_ASSIGN(auto reduction, node.string_attr("reduction", "mean"));
    if (reduction != "mean" && reduction != "sum" && reduction != "none")
        return tl::unexpected(node.refuse("reduction '" + reduction + "' (expected mean, sum or none)"));
    const std::string base = node.node_name();
    PSRUN_TRY_ASSIGN(
        auto log_prob,
        node.emit({{"kind", "log_softmax"}, {"name", base + "/log_prob"}, {"inputs", {scores}}, {"axis", 1}}));
    PSRUN_TRY_ASSIGN(auto weighted, node.emit({{"kind", "mul"}, {"inputs", {log_prob, labels}}}));
    PSRUN_TRY_ASSIGN(auto per,
                     node.emit({{"kind", "reduce_sum"}, {"inputs", {weighted}}, {"axes", {1}}, {"keepdims", false}}));
    std::string total = per;
    if (reduction != "none") {
        std::vector<std::int64_t> all;
        for (std::size_t d = 0; d + 1 < node.info(0)->rank(); ++d) all.push_back(static_cast<std::int64_t>(d));
        PSRUN_TRY_ASSIGN(auto reduced, node.emit({{"kind", reduction == "sum" ? "reduce_sum" : "reduce_mean"},
                                                  {"inputs", {per}},
                                                  {"axes", all},
                                                  {"keepdims", false}}));
        total = reduced;
    }
    PSRUN_TRY_ASSIGN(auto loss, node.emit({{"kind", "neg"}, {"name", base}, {"inputs", {total}}}));
    node.bind_output(0, loss);
    if (node.output_count() > 1 && node.output_read(1)) node.bind_output(1, log_prob);
    return {};
}

Result<void> import_loss(OnnxNodeImport& node) {
    const bool sce = node.op_type() == "SoftmaxCrossEntropyLoss";
    if (node.opset() < 12) return tl::unexpected(node.refuse("needs opset 12 or later"));
    PSRUN_TRY_ASSIGN(auto scores, node.value(0));
    const ValueInfo* label_info = node.info(1);
    const ValueInfo* score_info = node.info(0);
    if (sce && label_info != nullptr && score_info != nullptr && label_info->type == ElementType::kFloat &&
        label_info->dims == score_info->dims)
        return import_soft_targets(node, scores);
    if (label_info == nullptr || label_info->type != ElementType::kInt)
        return tl::unexpected(node.refuse("the labels (input 1) must be an integer graph value (class ids)"));
    PSRUN_TRY_ASSIGN(auto labels, node.value(1));
    PSRUN_TRY_ASSIGN(auto reduction, node.string_attr("reduction", "mean"));
    if (reduction != "mean" && reduction != "sum" && reduction != "none")
        return tl::unexpected(node.refuse("reduction '" + reduction + "' (expected mean, sum or none)"));
    nlohmann::json inputs = {scores, labels};
    if (node.input_count() > 2 && node.has_input(2)) {
        // Class weights held by the model (an initializer, a Constant): a constant, never trained.
        if (const auto values = node.floats(2)) {
            const auto dims = node.constant_shape(2);
            PSRUN_TRY_ASSIGN(auto weights, node.emit({{"kind", "constant"},
                                                      {"name", node.node_name() + "/weights"},
                                                      {"shape", dims.value_or(std::vector<std::int64_t>{
                                                                    static_cast<std::int64_t>(values->size())})},
                                                      {"values", *values}}));
            inputs.push_back(weights);
        } else {
            PSRUN_TRY_ASSIGN(auto weights, node.value(2));
            inputs.push_back(weights);
        }
    }
    nlohmann::json layer = {{"kind", sce ? "softmax_cross_entropy_loss" : "nll_loss"},
                            {"name", node.node_name()},
                            {"inputs", inputs},
                            {"reduction", reduction}};
    if (node.has_attr("ignore_index")) {
        PSRUN_TRY_ASSIGN(auto ignore, node.int_attr("ignore_index", 0));
        layer["ignore_index"] = ignore;
    }
    PSRUN_TRY_ASSIGN(auto name, node.emit(std::move(layer)));
    node.bind_output(0, name);
    if (sce && node.output_count() > 1 && node.output_read(1)) {  // log_prob
        PSRUN_TRY_ASSIGN(auto log_prob, node.emit({{"kind", "log_softmax"},
                                                   {"name", node.node_name() + "/log_prob"},
                                                   {"inputs", {scores}},
                                                   {"axis", 1}}));
        node.bind_output(1, log_prob);
    }
    return {};
}

Result<void> export_loss(OnnxNodeExport& out) {
    const Node& node = out.node();
    const bool sce = node.op == "softmax_cross_entropy_loss";
    if (sce && node.attrs.value("label_smoothing", 0.0) > 0.0)
        return tl::unexpected(
            op_error("ONNX's SoftmaxCrossEntropyLoss has no label smoothing; export a model with "
                     "\"label_smoothing\": 0 (smoothing is a training option: the trained weights "
                     "do not depend on it at inference)"));
    std::vector<std::string> inputs;
    for (std::size_t i = 0; i < node.data_inputs; ++i) inputs.push_back(out.input(i));
    std::vector<std::pair<std::string, OnnxAttr>> attrs = {
        {"reduction", node.attrs.at("reduction").get<std::string>()}};
    if (node.attrs.contains("ignore_index"))
        attrs.emplace_back("ignore_index", node.attrs.at("ignore_index").get<std::int64_t>());
    out.add(sce ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss", inputs, {out.output(0)}, attrs, node.name);
    return {};
}

}  // namespace

const OpSchema& cross_entropy_schema(std::string_view kind) {
    static const std::vector<OpSchema> schemas = {
        OpSchema{"softmax_cross_entropy_loss",
                 2,
                 3,
                 parse_softmax_cross_entropy,
                 infer_loss,
                 {"SoftmaxCrossEntropyLoss"},
                 import_loss,
                 export_loss},
        OpSchema{"nll_loss", 2, 3, parse_nll, infer_loss, {"NegativeLogLikelihoodLoss"}, import_loss, export_loss},
    };
    return family_member(schemas, kind);
}

}  // namespace psrun::nn
