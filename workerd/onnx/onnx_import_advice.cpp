// What the import tells a user about how the file was exported (onnx_import_advice.h).
#include "workerd/onnx/onnx_import_advice.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "workerd/onnx/onnx_proto.h"

namespace psrun::onnx_io {

namespace {

// The names of the graph's initializers (views into `proto`).
std::set<std::string_view> initializer_names(const onnx::GraphProto& graph) {
    std::set<std::string_view> names;
    for (const auto& t : graph.initializer()) names.insert(t.name());
    return names;
}

// PyTorch's exporter names a tensor it computed by constant folding "onnx::<Op>_<n>" after the
// node that reads it. A convolution's weight of that name was computed, not a module parameter:
// an eval-mode export (torch.onnx.export's default, training=TrainingMode.EVAL) folds each
// BatchNormalization into the convolution before it (and drops Dropout), and constant folding
// merges a weight_norm or any other weight computation the same way. The engine then trains
// the folded tensors, without the batch norms. One warning naming the folded weights, or none.
std::vector<std::string> folded_weight_warnings(const onnx::ModelProto& proto) {
    const auto initializers = initializer_names(proto.graph());
    std::vector<std::string> folded;
    for (const auto& node : proto.graph().node()) {
        if (node.op_type() != "Conv" && node.op_type() != "ConvTranspose") continue;
        if (node.input_size() < 2 || !initializers.contains(node.input(1))) continue;
        if (node.input(1).rfind("onnx::", 0) == 0) folded.push_back(node.input(1));
    }
    if (folded.empty()) return {};
    std::string names = folded.front();
    if (folded.size() > 1) names += " and " + std::to_string(folded.size() - 1) + " more";
    const bool one = folded.size() == 1;
    return {std::to_string(folded.size()) + " convolution weight" + (one ? "" : "s") + " (" + names + ") " +
            (one ? "was" : "were") +
            " computed by the exporter's constant folding, not read from the module's parameters: an eval-mode "
            "export (torch.onnx.export's default) folds each BatchNormalization into the convolution before it and "
            "drops Dropout, and folding merges computed weights (weight_norm), so the engine trains the folded "
            "tensors without them; export with training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False "
            "to train the module as written (docs/models.md \"Importing from PyTorch\")"};
}

// "'a'" or "'a' and 3 more": the nodes a warning names. REQUIRES: !names.empty().
std::string first_and_count(const std::vector<std::string>& names) {
    std::string text = "'" + names.front() + "'";
    if (names.size() > 1) text += " and " + std::to_string(names.size() - 1) + " more";
    return text;
}

// A node's name for a warning: its name, else its first output.
std::string node_name(const onnx::NodeProto& node) { return node.name().empty() ? node.output(0) : node.name(); }

// torch.onnx before PyTorch 2.0 writes F.pad(x, (l, r), mode="circular") (and a conv's
// padding_mode="circular") along an axis as Concat(x[-(r + 1):-1], x, x[0:l]) where PyTorch pads
// with x[-l:] and x[:r] (pytorch/pytorch#86690, fixed in 2.0): the file then computes another
// function than the module. psrun trains what the file says; one warning naming such Concats.
std::vector<std::string> circular_pad_warnings(const onnx::ModelProto& proto) {
    const auto& graph = proto.graph();
    std::map<std::string_view, const onnx::TensorProto*> constants;
    for (const auto& t : graph.initializer()) constants[t.name()] = &t;
    std::map<std::string_view, const onnx::NodeProto*> producers;
    for (const auto& node : graph.node()) {
        for (const auto& out : node.output()) producers[out] = &node;
        if (node.op_type() == "Constant" && node.output_size() == 1)
            for (const auto& a : node.attribute())
                if (a.name() == "value" && a.has_t()) constants[node.output(0)] = &a.t();
    }
    auto one_int = [&constants](const std::string& name) -> std::optional<std::int64_t> {
        const auto it = constants.find(name);
        if (it == constants.end()) return std::nullopt;
        auto v = read_ints(*it->second);
        if (!v || v->size() != 1) return std::nullopt;
        return v->front();
    };
    // Slice(of, [start], [end], [axis]) with no steps other than 1: {start, end}.
    auto slice_of = [&](const std::string& value, const std::string& of,
                        std::int64_t axis) -> std::optional<std::pair<std::int64_t, std::int64_t>> {
        const auto it = producers.find(value);
        if (it == producers.end()) return std::nullopt;
        const auto& n = *it->second;
        if (n.op_type() != "Slice" || n.input_size() < 4 || n.input(0) != of) return std::nullopt;
        if (n.input_size() > 4 && !n.input(4).empty() && one_int(n.input(4)) != std::int64_t{1}) return std::nullopt;
        const auto start = one_int(n.input(1)), end = one_int(n.input(2)), a = one_int(n.input(3));
        if (!start || !end || a != axis) return std::nullopt;
        return std::pair{*start, *end};
    };
    std::vector<std::string> found;
    for (const auto& node : graph.node()) {
        if (node.op_type() != "Concat" || node.input_size() != 3) continue;
        std::int64_t axis = 0;
        for (const auto& a : node.attribute())
            if (a.name() == "axis") axis = a.i();
        const std::string& x = node.input(1);
        const auto left = slice_of(node.input(0), x, axis), right = slice_of(node.input(2), x, axis);
        if (left && right && left->second == -1 && left->first < -1 && right->first == 0 && right->second > 0)
            found.push_back(node_name(node));
    }
    if (found.empty()) return {};
    return {"Concat " + first_and_count(found) +
            " pads circularly as torch.onnx before PyTorch 2.0 writes F.pad(mode='circular') and "
            "padding_mode='circular' (pytorch/pytorch#86690): it reads x[-(r+1):-1] before x and x[0:l] after it, "
            "where PyTorch pads with x[-l:] and x[:r], so the file computes another function than the module and "
            "psrun trains what the file says; export with PyTorch >= 2.0, or write the padding as "
            "torch.cat([x[..., -l:], x, x[..., :r]], dim)"};
}

// torch.onnx writes BatchNorm's momentum m as ONNX momentum 1 - m, and momentum=None (a
// cumulative average over every batch so far) as 0, which reads as m = 1: running statistics that
// are the last batch's alone. One warning naming such nodes.
std::vector<std::string> batch_norm_momentum_warnings(const onnx::ModelProto& proto) {
    std::vector<std::string> found;
    for (const auto& node : proto.graph().node()) {
        if (node.op_type() != "BatchNormalization") continue;
        for (const auto& a : node.attribute())
            if (a.name() == "momentum" && a.f() == 0.0f) found.push_back(node_name(node));
    }
    if (found.empty()) return {};
    return {"BatchNormalization " + first_and_count(found) +
            " has momentum 0, as torch.onnx writes BatchNorm(momentum=None) (a cumulative average of every batch's "
            "statistics) and momentum=1: psrun's running statistics are then the last batch's alone; give the module "
            "a momentum (0.1 is PyTorch's default) before exporting, or recompute the statistics after training"};
}

// nn.Embedding(padding_idx=k) found by the import (an all-zero row k): one warning per table.
std::vector<std::string> padding_row_warnings(const nn::ModelDescription& model) {
    std::vector<std::string> found;
    for (const auto& n : model.nodes)
        if (n.op == "embedding" && n.attrs.contains("padding_index"))
            found.push_back(
                "embedding " + n.name + ": row " + n.attrs.at("padding_index").dump() +
                " of its table is all zeros, as nn.Embedding(padding_idx=" + n.attrs.at("padding_index").dump() +
                ") keeps it: imported as that padding row, which gets no gradient and stays zero "
                "(PyTorch's padding_idx; ONNX's Gather does not record it)");
    return found;
}

// Trained tensors named "onnx__<Op>_<n>": constants the exporter computed from the module's
// parameters, other than the convolutions' weights and biases (folded_weight_warnings() names
// those folds). One warning, or none.
std::vector<std::string> folded_parameter_warnings(const onnx::ModelProto& proto, const nn::ModelDescription& model) {
    std::set<std::string> conv_weights;  // in the model's spelling: ':' is '_'
    for (const auto& node : proto.graph().node())
        if (node.op_type() == "Conv" || node.op_type() == "ConvTranspose")
            for (int i = 1; i < node.input_size() && i <= 2; ++i) {  // the weight and the bias
                std::string name = node.input(i);
                std::replace(name.begin(), name.end(), ':', '_');
                conv_weights.insert(name);
            }
    std::vector<std::string> folded;
    for (const auto& t : model.tensors)
        if (t.cls == nn::TensorClass::kTrainable && t.name.rfind("onnx__", 0) == 0 && !conv_weights.contains(t.name))
            folded.push_back(t.name);
    if (folded.empty()) return {};
    const bool one = folded.size() == 1;
    return {std::to_string(folded.size()) + " trained tensor" + (one ? "" : "s") + " (" + first_and_count(folded) +
            ") " + (one ? "is a constant" : "are constants") +
            " the exporter's constant folding computed from the module's parameters (torch.onnx names them "
            "onnx::<Op>_<n>): psrun trains them as they stand, under those names. A transposed Linear weight or a "
            "folded affine trains the same function, but the trained file no longer loads into the module by name; "
            "anything else folded from a parameter (F.normalize(w), w[index], a table gathered by constant "
            "indices) trains another function than the module's. Export with "
            "training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False (python/psrun_torch.py) to train "
            "the module's own parameters"};
}

}  // namespace

void add_export_warnings(const onnx::ModelProto& proto, nn::ModelDescription& model) {
    for (auto* warnings : {folded_weight_warnings, circular_pad_warnings, batch_norm_momentum_warnings})
        for (auto& w : warnings(proto)) model.import_warnings.push_back(std::move(w));
    for (auto& w : folded_parameter_warnings(proto, model)) model.import_warnings.push_back(std::move(w));
    for (auto& w : padding_row_warnings(model)) model.import_warnings.push_back(std::move(w));
}

// torch.onnx.export without dynamic_axes fixes the inputs' batch: the shapes PyTorch computed
// from it (x.view(x.size(0), -1), attention's reshapes) are constants of that size, which
// workerd/nn/ops/fixed_batch.h reads back where it can.
std::int64_t fixed_batch_size(const onnx::GraphProto& graph) {
    const auto initializers = initializer_names(graph);
    for (const auto& input : graph.input()) {
        if (initializers.contains(input.name())) continue;
        if (!input.type().has_tensor_type() || input.type().tensor_type().shape().dim_size() == 0) return 0;
        const auto& batch = input.type().tensor_type().shape().dim(0);
        return batch.has_dim_value() && batch.dim_value() > 0 ? batch.dim_value() : 0;
    }
    return 0;
}

namespace {
const char* const kDynamicAxesAdvice =
    "export with input_names=['x'], output_names=['logits'], dynamic_axes={'x': {0: 'N'}, 'logits': {0: 'N'}}, an "
    "entry for each input and output: docs/models.md \"Importing from PyTorch\"";
}  // namespace

std::string fixed_batch_hint(const onnx::ModelProto& proto) {
    const std::int64_t b = fixed_batch_size(proto.graph());
    if (b == 0) return {};
    return " (the file's inputs have a fixed batch size of " + std::to_string(b) +
           ": exported without dynamic_axes, its shapes computed from the batch are constants of that size; " +
           kDynamicAxesAdvice + ")";
}

std::optional<std::string> fixed_batch_warning(const onnx::ModelProto& proto, std::size_t other_readings) {
    const std::int64_t b = fixed_batch_size(proto.graph());
    if (b == 0) return std::nullopt;
    const std::string read =
        b == 1 ? "the batch on one axis of a Reshape's target, of an Expand of a parameter and of a constant fill "
                 "of rank 2 or more, where the file does not say which (with a batch of 1, attention's view(L, b * "
                 "heads, d) is [L, heads, d]): first as torch usually writes them (x.view(x.size(0), -1), "
                 "view(L, b * heads, d), view(L * b, E), a class token's expand(x.size(0), -1, -1); a fill as "
                 "written, without the batch), another reading only where the rest of the graph refuses one" +
                     (other_readings == 0 ? std::string()
                                          : " (" + std::to_string(other_readings) + " of them read so here)") +
                     "; a reading the graph accepts but torch did not mean computes the same at batch 1 only: check "
                     "a batch against torch"
               : "the axis of a Reshape's target that spans the batch (x.view(x.size(0), -1), attention's view(L, " +
                     std::to_string(b) + " x heads, d)) as a multiple of it, and the one " + std::to_string(b) +
                     " in an Expand of a parameter (a class token's expand(x.size(0), -1, -1)) and in a constant "
                     "fill (torch.zeros(x.size(0), H)) as the batch";
    return "the file's inputs have a fixed batch size of " + std::to_string(b) +
           " (exported without dynamic_axes): psrun reads that axis as the batch, of any size, and " + read +
           "; to say so in the file, " + kDynamicAxesAdvice;
}

std::optional<std::string> truncating_division_warning(const GraphIndex& graph, int i,
                                                       const std::vector<const Known*>& inputs) {
    if (inputs.size() != 2 || inputs[0] == nullptr || inputs[1] == nullptr) return std::nullopt;
    const auto a = inputs[0]->plain_ints(), b = inputs[1]->plain_ints();
    if (inputs[0]->is_float || inputs[1]->is_float || !a || !b || a->empty() || b->empty()) return std::nullopt;
    if (a->size() != b->size() && a->size() != 1 && b->size() != 1) return std::nullopt;
    // A floor division written out (torch.div(rounding_mode="floor"), newer exporters' //: the
    // remainder by Mod, or Sub(a, Mul(q, b)), and the signs by Less, to correct the quotient)
    // floors as PyTorch does.
    const auto& div = graph.graph().node(i);
    for (const int reader : graph.readers(div.output(0)))
        if (graph.graph().node(reader).op_type() == "Mul") return std::nullopt;
    for (const int reader : graph.readers(div.input(0)))
        if (const auto& op = graph.graph().node(reader).op_type(); op == "Mod" || op == "Less") return std::nullopt;
    for (std::size_t e = 0; e < std::max(a->size(), b->size()); ++e) {
        const std::int64_t x = (*a)[a->size() == 1 ? 0 : e], y = (*b)[b->size() == 1 ? 0 : e];
        if (y == 0 || y == -1 || x % y == 0 || (x < 0) == (y < 0)) continue;
        const std::int64_t q = x / y;
        return node_label(graph.graph().node(i), i) + ": the integer division " + std::to_string(x) + " / " +
               std::to_string(y) + " truncates to " + std::to_string(q) + " as ONNX says, where Python's and " +
               "PyTorch's // floor it to " + std::to_string(q - 1) +
               ": torch 1.13's exporter writes a // b of sizes as this Div, so if it came from // (a U-Net padding "
               "its upsampled map to the skip's size, diff // 2 of a negative diff), psrun computes the file, not "
               "the module. Keep such sizes non-negative (crop the larger map), or export with a PyTorch that floors";
    }
    return std::nullopt;
}

}  // namespace psrun::onnx_io
