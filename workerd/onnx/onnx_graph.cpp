#include "workerd/onnx/onnx_graph.h"

#include <set>

namespace psrun::onnx_io {

namespace {

Error graph_error(std::string message) {
    return Error{ErrorCode::kInvalidArgument, std::move(message)};
}

}  // namespace

std::string node_label(const onnx::NodeProto& node, int index) {
    const std::string op = node.op_type().empty() ? "no op type" : node.op_type();
    if (node.name().empty()) return "node #" + std::to_string(index) + " (" + op + ")";
    return "node '" + node.name() + "' (" + op + ")";
}

const onnx::TensorProto* GraphIndex::constant(const std::string& value) const {
    const auto it = constants_.find(value);
    return it == constants_.end() ? nullptr : it->second;
}

Result<GraphIndex> GraphIndex::build(const onnx::GraphProto& graph) {
    GraphIndex index;
    if (graph.node_size() > kMaxNodes)
        return tl::unexpected(graph_error("the graph has " + std::to_string(graph.node_size()) +
                                          " nodes (at most " + std::to_string(kMaxNodes) + ")"));
    for (const auto& init : graph.initializer()) {
        if (!index.constants_.emplace(init.name(), &init).second)
            return tl::unexpected(graph_error("two initializers are named '" + init.name() + "'"));
    }
    // Constant nodes' values; every other node's inputs counted as uses.
    std::map<std::string, std::vector<int>> consumers;
    std::map<std::string, int> producers;
    for (int i = 0; i < graph.node_size(); ++i) {
        const auto& node = graph.node(i);
        if (!node.domain().empty() && node.domain() != "ai.onnx")
            return tl::unexpected(graph_error(node_label(node, i) + ": operator domain '" +
                                              node.domain() +
                                              "' is not ONNX's: the engine has no such layer"));
        for (const auto& out : node.output()) {
            if (out.empty()) continue;
            if (index.constants_.count(out) > 0 || !producers.emplace(out, i).second)
                return tl::unexpected(graph_error(node_label(node, i) + ": its output '" + out +
                                                  "' is produced twice (not a valid ONNX graph)"));
        }
        if (node.op_type() == "Constant") {
            const auto* value = find_attribute(node, "value");
            if (node.output_size() != 1 || value == nullptr || !value->has_t())
                return tl::unexpected(graph_error(
                    node_label(node, i) + ": only a Constant with a tensor 'value' is supported"));
            index.constants_.emplace(node.output(0), &value->t());
            continue;
        }
        for (const auto& in : node.input())
            if (!in.empty()) consumers[in].push_back(i);
    }
    for (const auto& in : graph.input()) {
        if (index.constants_.count(in.name()) > 0)
            continue;  // an initializer listed as an input (IR < 4)
        if (index.input_ != nullptr)
            return tl::unexpected(graph_error("the graph has two data inputs ('" +
                                              index.input_->name() + "', '" + in.name() +
                                              "'): the engine takes one image input"));
        index.input_ = &in;
    }
    if (index.input_ == nullptr) return tl::unexpected(graph_error("the graph has no data input"));
    if (graph.output_size() != 1)
        return tl::unexpected(
            graph_error("the graph has " + std::to_string(graph.output_size()) +
                        " outputs: the engine's model has one (the logits or probabilities)"));
    index.output_ = graph.output(0).name();

    // Walk from the input: each value must have exactly one consumer until the output.
    std::string value = index.input_->name();
    std::set<int> visited;
    while (true) {
        auto it = consumers.find(value);
        if (it != consumers.end() &&
            it->second.size() > 1) {  // Shape readers aside (see the header)
            std::vector<int> others;
            for (const int c : it->second)
                if (graph.node(c).op_type() != "Shape") others.push_back(c);
            if (others.size() == 1) it->second = others;
        }
        const std::size_t uses = it == consumers.end() ? 0 : it->second.size();
        if (value == index.output_) {
            if (uses > 0)
                return tl::unexpected(
                    graph_error("the output '" + value + "' is also consumed by " +
                                node_label(graph.node(it->second[0]), it->second[0]) +
                                ": the engine trains a chain"));
            break;
        }
        if (uses == 0)
            return tl::unexpected(graph_error("value '" + value +
                                              "' leads nowhere: it is neither consumed nor the "
                                              "graph output ('" +
                                              index.output_ + "')"));
        if (uses > 1) {
            std::string names;
            for (const int c : it->second)
                names += (names.empty() ? "" : ", ") + node_label(graph.node(c), c);
            return tl::unexpected(graph_error("value '" + value + "' is consumed " +
                                              std::to_string(uses) + " times (" + names +
                                              "): a branch; the engine trains a chain of layers"));
        }
        const int n = it->second[0];
        const auto& node = graph.node(n);
        if (!visited.insert(n).second)
            return tl::unexpected(graph_error(node_label(node, n) + ": a cycle"));
        index.chain_.push_back(&node);
        index.indices_[&node] = n;
        // The next value: the node's first output; any other output must be unused.
        if (node.output_size() < 1 || node.output(0).empty())
            return tl::unexpected(graph_error(node_label(node, n) + ": has no output"));
        for (int o = 1; o < node.output_size(); ++o) {
            const auto& extra = node.output(o);
            if (!extra.empty() && (consumers.count(extra) > 0 || extra == index.output_))
                return tl::unexpected(
                    graph_error(node_label(node, n) + ": its output " + std::to_string(o) + " ('" +
                                extra + "') is used: the engine computes only the first output"));
        }
        value = node.output(0);
    }
    index.graph_ = &graph;
    return index;
}

Result<void> GraphIndex::check_all_on_chain() const {
    for (int i = 0; i < graph_->node_size(); ++i) {
        const auto& node = graph_->node(i);
        if (node.op_type() == "Constant" || indices_.count(&node) > 0) continue;
        return tl::unexpected(
            graph_error(node_label(node, i) +
                        " is not on the chain from the input to the output (a branch, a computed "
                        "shape or a dead node): the engine trains a chain of layers"));
    }
    return {};
}

}  // namespace psrun::onnx_io
