#include "workerd/nn/graph_loss.h"

#include <algorithm>
#include <map>

namespace psrun::nn {

namespace {

Error graph_loss_error(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message)}; }

bool per_example_scores(const ValueInfo& v) {
    return v.type == ElementType::kFloat && v.rank() == 2 && v.dims[0] == Dim::batch_times(1) && !v.dims[1].batch;
}

// Scores per position: float [N, C, d1, ...] with every dim after the batch a constant.
bool per_position_scores(const ValueInfo& v) {
    if (v.type != ElementType::kFloat || v.rank() < 3 || v.dims[0] != Dim::batch_times(1)) return false;
    return std::none_of(v.dims.begin() + 1, v.dims.end(), [](const Dim& d) { return d.batch; });
}

// An input after the first of int [N, d1, ...]: the scores' dims without axis 1 (C).
bool position_labels(const ModelDescription& model, const std::string& value, const ValueInfo& scores) {
    if (model.input_index(value) <= 0) return false;
    const ValueInfo& v = model.value(value);
    if (v.type != ElementType::kInt || v.rank() + 1 != scores.rank() || v.dims[0] != Dim::batch_times(1)) return false;
    for (std::size_t i = 1; i < v.rank(); ++i)
        if (v.dims[i] != scores.dims[i + 1]) return false;
    return true;
}

// An input after the first of int [N] (labels) or float [N, T] with T == `width` (targets).
bool label_target(const ModelDescription& model, const std::string& value) {
    if (model.input_index(value) <= 0) return false;
    const ValueInfo& v = model.value(value);
    return v.type == ElementType::kInt && v.rank() == 1 && v.dims[0] == Dim::batch_times(1);
}
bool float_target(const ModelDescription& model, const std::string& value, const ValueInfo& scores) {
    if (model.input_index(value) <= 0) return false;
    const ValueInfo& v = model.value(value);
    return v.type == ElementType::kFloat && v.dims == scores.dims;
}

// The heads the graph shows (graph_loss.h), in the graph order of their values.
std::vector<Head> find_heads(const ModelDescription& model) {
    std::map<std::string, std::size_t, std::less<>> producer;
    for (std::size_t i = 0; i < model.nodes.size(); ++i)
        for (const auto& o : model.nodes[i].outputs) producer.emplace(o, i);
    // The node of kind `op` whose first output is `value` (its data input 0), or nullptr.
    auto made_by = [&](const std::string& value, const char* op) -> const Node* {
        const auto it = producer.find(value);
        if (it == producer.end()) return nullptr;
        const Node& node = model.nodes[it->second];
        return node.op == op && node.outputs.front() == value && node.data_inputs >= 1 ? &node : nullptr;
    };
    std::vector<std::pair<std::size_t, Head>> found;  // (producer index + 1, 0 for an input; head)
    auto add = [&](const std::string& value, HeadKind kind, const std::string& target) {
        for (const auto& [at, h] : found)
            if (h.value == value) return;
        const auto it = producer.find(value);
        found.emplace_back(it == producer.end() ? 0 : it->second + 1,
                           Head{value, kind, target, model.value(value).dims[1].value, {}, {}});
    };
    for (const auto& node : model.nodes) {
        if (is_label_loss(node)) {
            const ValueInfo& scores = model.value(node.inputs[0]);
            if (per_example_scores(scores) && label_target(model, node.inputs[1])) {
                add(node.inputs[0], HeadKind::kSoftmax, node.inputs[1]);
            } else if (per_position_scores(scores) && position_labels(model, node.inputs[1], scores)) {
                const std::size_t before = found.size();
                add(node.inputs[0], HeadKind::kSoftmax, node.inputs[1]);
                if (found.size() == before) continue;  // found before (another loss read it)
                Head& h = found.back().second;
                for (std::size_t i = 2; i < scores.rank(); ++i) h.spatial.push_back(scores.dims[i].value);
                if (node.attrs.contains("ignore_index"))
                    h.ignore_index = node.attrs.at("ignore_index").get<std::int64_t>();
            }
            continue;
        }
        if (node.op == "sub" && node.data_inputs == 2) {
            // prediction - target (or target - prediction): a regression's MSE, L1 or Huber.
            for (int side = 0; side < 2; ++side) {
                const std::string& target = node.inputs[static_cast<std::size_t>(side)];
                const std::string& other = node.inputs[static_cast<std::size_t>(1 - side)];
                const ValueInfo& x = model.value(other);
                if (per_example_scores(x) && float_target(model, target, x)) add(other, HeadKind::kValue, target);
            }
            continue;
        }
        if (node.op != "mul" || node.data_inputs != 2) continue;
        for (int side = 0; side < 2; ++side) {
            const std::string& target = node.inputs[static_cast<std::size_t>(side)];
            const std::string& other = node.inputs[static_cast<std::size_t>(1 - side)];
            if (model.input_index(target) <= 0) continue;
            // mul(t, log(sigmoid(X))): torch.onnx's binary_cross_entropy_with_logits.
            if (const Node* log = made_by(other, "log")) {
                if (const Node* sigmoid = made_by(log->inputs[0], "sigmoid")) {
                    const ValueInfo& x = model.value(sigmoid->inputs[0]);
                    if (per_example_scores(x) && float_target(model, target, x))
                        add(sigmoid->inputs[0], HeadKind::kSigmoid, target);
                }
                continue;
            }
            // mul(X, t) with softplus(X) beside it: the stable form softplus(X) - X * t.
            const ValueInfo& x = model.value(other);
            if (!per_example_scores(x) || !float_target(model, target, x)) continue;
            bool softplus = false;
            for (const auto& reader : model.nodes)
                softplus =
                    softplus || (reader.op == "softplus" && reader.data_inputs >= 1 && reader.inputs[0] == other);
            if (softplus) add(other, HeadKind::kSigmoid, target);
        }
    }
    std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<Head> heads;
    for (auto& [at, h] : found) heads.push_back(std::move(h));
    return heads;
}

}  // namespace

const char* to_string(HeadKind kind) {
    switch (kind) {
        case HeadKind::kSigmoid: return "sigmoid";
        case HeadKind::kValue: return "value";
        case HeadKind::kSoftmax: break;
    }
    return "softmax";
}

int ModelDescription::head_index(std::string_view value_name) const {
    for (std::size_t i = 0; i < heads.size(); ++i)
        if (heads[i].value == value_name) return static_cast<int>(i);
    return -1;
}

bool is_label_loss(const Node& node) {
    return (node.op == "softmax_cross_entropy_loss" || node.op == "nll_loss") && node.data_inputs >= 2;
}

Result<void> resolve_heads(ModelDescription& model, const std::vector<Head>* given) {
    model.heads.clear();
    model.heads_given = given != nullptr;
    if (given == nullptr) {
        model.heads = find_heads(model);
        return {};
    }
    for (std::size_t i = 0; i < given->size(); ++i) {
        Head h = (*given)[i];
        const std::string where = "heads[" + std::to_string(i) + "]: ";
        if (model.values.count(h.value) == 0)
            return tl::unexpected(
                graph_loss_error(where + "\"output\" \"" + h.value + "\" is not a value of the model"));
        const ValueInfo& scores = model.value(h.value);
        if (!per_example_scores(scores))
            return tl::unexpected(graph_loss_error(where + "\"output\" \"" + h.value + "\" is " +
                                                   to_string(scores.dims) +
                                                   (scores.type == ElementType::kInt ? " ids" : "") +
                                                   "; a head is N x C floats (one score per class or label)"));
        if (model.head_index(h.value) >= 0)
            return tl::unexpected(graph_loss_error(where + "\"output\" \"" + h.value + "\" is already heads[" +
                                                   std::to_string(model.head_index(h.value)) + "]"));
        const int t = model.input_index(h.target);
        if (t < 0)
            return tl::unexpected(
                graph_loss_error(where + "\"targets\" \"" + h.target + "\" is not one of the model's inputs"));
        if (t == 0)
            return tl::unexpected(graph_loss_error(where + "\"targets\" \"" + h.target +
                                                   "\" is the primary input (the data's images or features)"));
        const ValueInfo& target = model.inputs[static_cast<std::size_t>(t)].info;
        h.width = scores.dims[1].value;
        if (h.kind == HeadKind::kSoftmax && !label_target(model, h.target))
            return tl::unexpected(graph_loss_error(where + "\"targets\" \"" + h.target + "\" is " +
                                                   to_string(target.dims) +
                                                   (target.type == ElementType::kInt ? " ids" : " floats") +
                                                   "; a softmax head's targets are int class labels N (\"dims\": [])"));
        if (h.kind != HeadKind::kSoftmax && !float_target(model, h.target, scores))
            return tl::unexpected(
                graph_loss_error(where + "\"targets\" \"" + h.target + "\" is " + to_string(target.dims) +
                                 (target.type == ElementType::kInt ? " ids" : " floats") + "; a " + to_string(h.kind) +
                                 " head's targets are floats of its output's shape " + to_string(scores.dims)));
        model.heads.push_back(std::move(h));
    }
    return {};
}

Result<void> resolve_graph_loss(ModelDescription& model, const std::string& labels) {
    const ValueInfo& out = model.value(model.output);
    if (out.type != ElementType::kFloat || has_batch(out.dims) || elements_per_example(out.dims).value_or(0) != 1)
        return tl::unexpected(
            graph_loss_error("is " + to_string(out.dims) + (out.type == ElementType::kInt ? " ids" : "") +
                             "; a graph loss is a float scalar (end with a loss reduced over the batch: "
                             "softmax_cross_entropy_loss with reduction mean or sum, or reduce_mean over every axis)"));
    model.label_input = -1;
    model.head.clear();
    model.classes = 0;
    if (!labels.empty()) {
        model.label_input = model.input_index(labels);
        if (model.label_input < 0)
            return tl::unexpected(
                graph_loss_error("the loss's \"labels\" \"" + labels + "\" is not one of the model's inputs"));
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
        return tl::unexpected(
            graph_loss_error("the loss's labels cannot be the primary input \"" + input.name +
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
        return tl::unexpected(
            graph_loss_error("the labels input \"" + input.name + "\" is " + to_string(d) +
                             " ids; the data's labels are one class per example (N); feed per-position labels "
                             "as another input with --train-input NAME=FILE.npy"));
    for (const auto& h : model.heads) {
        if (h.kind != HeadKind::kSoftmax || h.target != input.name) continue;
        model.head = h.value;
        model.classes = h.width;
        return {};
    }
    if (model.heads_given)
        return tl::unexpected(graph_loss_error("the labels input \"" + input.name +
                                               "\" is the \"targets\" of no softmax head in the loss's \"heads\", so "
                                               "its classes are unknown: name the scores it labels there"));
    return tl::unexpected(
        graph_loss_error("the labels input \"" + input.name +
                         "\" is read as labels by no softmax_cross_entropy_loss or nll_loss over N x C scores, "
                         "so its classes are unknown"));
}

}  // namespace psrun::nn
