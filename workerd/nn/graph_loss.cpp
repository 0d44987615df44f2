#include "workerd/nn/graph_loss.h"

namespace psrun::nn {

namespace {

Error graph_loss_error(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message)}; }

bool per_example_scores(const ValueInfo& v) {
    return v.type == ElementType::kFloat && v.rank() == 2 && v.dims[0] == Dim::batch_times(1) && !v.dims[1].batch;
}

}  // namespace

bool is_label_loss(const Node& node) {
    return (node.op == "softmax_cross_entropy_loss" || node.op == "nll_loss") && node.data_inputs >= 2;
}

Result<void> resolve_graph_loss(ModelDescription& model, const std::string& labels) {
    const ValueInfo& out = model.value(model.output);
    if (out.type != ElementType::kFloat || has_batch(out.dims) || elements_per_example(out.dims).value_or(0) != 1)
        return tl::unexpected(graph_loss_error("is " + to_string(out.dims) + (out.type == ElementType::kInt ? " ids" : "") +
                                      "; a graph loss is a float scalar (end with a loss reduced over the batch: "
                                      "softmax_cross_entropy_loss with reduction mean or sum, or reduce_mean over every axis)"));
    model.label_input = -1;
    model.head.clear();
    model.classes = 0;
    if (!labels.empty()) {
        model.label_input = model.input_index(labels);
        if (model.label_input < 0)
            return tl::unexpected(graph_loss_error("the loss's \"labels\" \"" + labels + "\" is not one of the model's inputs"));
    } else {
        for (const auto& node : model.nodes) {
            if (!is_label_loss(node)) continue;
            const int i = model.input_index(node.inputs[1]);
            const ValueInfo& v = model.value(node.inputs[1]);
            if (i > 0 && v.rank() == 1 && v.dims[0] == Dim::batch_times(1)) model.label_input = i;
            break;
        }
    }
    if (model.label_input < 0) return {};  // every input after the first is a column
    const InputDef& input = model.inputs[static_cast<std::size_t>(model.label_input)];
    if (model.label_input == 0)
        return tl::unexpected(graph_loss_error("the loss's labels cannot be the primary input \"" + input.name +
                                      "\" (the data's images or features feed it): put the labels input after it"));
    const Dims& d = input.info.dims;
    if (input.info.type == ElementType::kFloat) {
        if (d.size() != 2 || d[0] != Dim::batch_times(1) || d[1].batch)
            return tl::unexpected(graph_loss_error("the labels input \"" + input.name + "\" is " + to_string(d) +
                                          "; float labels are targets N x T"));
        model.classes = d[1].value;
        return {};
    }
    if (d.size() != 1 || d[0] != Dim::batch_times(1))
        return tl::unexpected(graph_loss_error("the labels input \"" + input.name + "\" is " + to_string(d) +
                                      " ids; the data's labels are one class per example (N); feed per-position labels "
                                      "as another input with --train-input NAME=FILE.npy"));
    for (const auto& node : model.nodes) {
        if (!is_label_loss(node) || node.inputs[1] != input.name) continue;
        const ValueInfo& scores = model.value(node.inputs[0]);
        if (!per_example_scores(scores)) continue;
        model.head = node.inputs[0];
        model.classes = scores.dims[1].value;
        return {};
    }
    return tl::unexpected(graph_loss_error("the labels input \"" + input.name +
                                  "\" is read as labels by no softmax_cross_entropy_loss or nll_loss over N x C scores, "
                                  "so its classes are unknown"));
}

}  // namespace psrun::nn
