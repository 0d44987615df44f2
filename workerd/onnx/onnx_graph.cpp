#include "workerd/onnx/onnx_graph.h"

#include <algorithm>

#include <onnx/defs/schema.h>

#include <limits>

namespace psrun::onnx_io {

namespace {

Error graph_error(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message)}; }

std::string count_range(int low, int high) {
    if (low == high) return std::to_string(low);
    if (high == std::numeric_limits<int>::max()) return "at least " + std::to_string(low);
    return std::to_string(low) + " to " + std::to_string(high);
}

// The input and output counts ONNX's own schema (libonnx's registry, at the model's opset)
// allows the node. Operators ONNX does not know pass: the importer refuses them by name when
// the output needs them. At an opset newer than this libonnx knows (libonnx 1.12 knows 17), its
// schema is an older version's (opset 18's Reduce* take the axes as an input): no check.
Result<void> check_arity(const onnx::NodeProto& node, int index, std::int64_t opset) {
    const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
    if (const auto it = known.find(""); it != known.end() && opset > it->second.second) return {};
    const auto* schema = onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(opset), "");
    if (schema == nullptr) return {};
    const auto check = [&](const char* what, int count, int low, int high) -> Result<void> {
        if (count >= low && count <= high) return {};
        return tl::unexpected(graph_error(node_label(node, index) + " has " + std::to_string(count) + " " + what +
                                          (count == 1 ? "" : "s") + " where ONNX " + node.op_type() + " (opset " +
                                          std::to_string(opset) + ") takes " + count_range(low, high) +
                                          ": not a valid ONNX graph"));
    };
    if (auto ok = check("input", node.input_size(), schema->min_input(), schema->max_input()); !ok) return ok;
    return check("output", node.output_size(), schema->min_output(), schema->max_output());
}

// Appends every value the nodes of `graph` (and of the graphs nested in them) read.
void outer_reads(const onnx::GraphProto& graph, std::vector<std::string>& out) {
    for (const auto& node : graph.node()) {
        for (const auto& in : node.input())
            if (!in.empty()) out.push_back(in);
        for (const auto& a : node.attribute()) {
            if (a.has_g()) outer_reads(a.g(), out);
            for (const auto& g : a.graphs()) outer_reads(g, out);
        }
    }
}

}  // namespace

std::string node_label(const onnx::NodeProto& node, int index) {
    const std::string op = node.op_type().empty() ? "no op type" : node.op_type();
    if (node.name().empty()) return "node #" + std::to_string(index) + " (" + op + ")";
    return "node '" + node.name() + "' (" + op + ")";
}

const onnx::TensorProto* GraphIndex::initializer(const std::string& value) const {
    const auto it = initializers_.find(value);
    return it == initializers_.end() ? nullptr : it->second;
}

const onnx::TensorProto* GraphIndex::constant(const std::string& value) const {
    const auto it = constants_.find(value);
    return it == constants_.end() ? nullptr : it->second;
}

int GraphIndex::producer(const std::string& value) const {
    const auto it = producers_.find(value);
    return it == producers_.end() ? -1 : it->second;
}

bool GraphIndex::is_input(const std::string& value) const {
    for (const auto* in : inputs_)
        if (in->name() == value) return true;
    return false;
}

const std::vector<int>& GraphIndex::readers(const std::string& value) const {
    static const std::vector<int> kNone;
    const auto it = readers_.find(value);
    return it == readers_.end() ? kNone : it->second;
}

Result<GraphIndex> GraphIndex::build(const onnx::GraphProto& graph, std::int64_t opset) {
    GraphIndex index;
    index.graph_ = &graph;
    if (graph.node_size() > kMaxNodes)
        return tl::unexpected(graph_error("the graph has " + std::to_string(graph.node_size()) + " nodes (at most " +
                                          std::to_string(kMaxNodes) + ")"));
    for (const auto& init : graph.initializer())
        if (!index.initializers_.emplace(init.name(), &init).second)
            return tl::unexpected(graph_error("two initializers are named '" + init.name() + "'"));
    for (const auto& in : graph.input()) {
        if (index.initializers_.count(in.name()) > 0) continue;  // an initializer listed as an input (IR < 4)
        for (const auto* seen : index.inputs_)
            if (seen->name() == in.name())
                return tl::unexpected(graph_error("two graph inputs are named '" + in.name() + "'"));
        index.inputs_.push_back(&in);
    }
    if (index.inputs_.empty()) return tl::unexpected(graph_error("the graph has no data input"));
    if (index.inputs_.size() > kMaxInputs)
        return tl::unexpected(graph_error("the graph has " + std::to_string(index.inputs_.size()) +
                                          " data inputs (at most " + std::to_string(kMaxInputs) + ")"));
    if (graph.output_size() < 1 || static_cast<std::size_t>(graph.output_size()) > kMaxOutputs)
        return tl::unexpected(graph_error("the graph has " + std::to_string(graph.output_size()) + " outputs (1 to " +
                                          std::to_string(kMaxOutputs) +
                                          ": the logits or probabilities, or a loss and its heads)"));
    index.output_ = graph.output(0).name();
    for (const auto& out : graph.output()) {
        if (std::find(index.outputs_.begin(), index.outputs_.end(), out.name()) != index.outputs_.end())
            return tl::unexpected(graph_error("the graph names output '" + out.name() + "' twice"));
        index.outputs_.push_back(out.name());
    }
    for (int i = 0; i < graph.node_size(); ++i) {
        const auto& node = graph.node(i);
        // psrun's own domain: StopGradient, which python/psrun_torch.py writes for x.detach().
        const bool psrun_op = node.domain() == "psrun" && node.op_type() == "StopGradient";
        if (!node.domain().empty() && node.domain() != "ai.onnx" && !psrun_op)
            return tl::unexpected(graph_error(node_label(node, i) + ": operator domain '" + node.domain() +
                                              "' is not ONNX's: the engine has no such operator"));
        PSRUN_TRY(check_arity(node, i, opset));
        for (const auto& in : node.input()) {
            if (in.empty()) continue;
            if (!index.is_input(in) && index.initializers_.count(in) == 0 && index.producers_.count(in) == 0)
                return tl::unexpected(
                    graph_error(node_label(node, i) + ": its input '" + in +
                                "' is not defined before it (the nodes must be in topological order)"));
            auto& r = index.readers_[in];
            if (r.empty() || r.back() != i) r.push_back(i);
        }
        for (const auto& out : node.output()) {
            if (out.empty()) continue;
            if (index.is_input(out) || index.initializers_.count(out) > 0 || !index.producers_.emplace(out, i).second)
                return tl::unexpected(graph_error(node_label(node, i) + ": its output '" + out +
                                                  "' is produced twice (not a valid ONNX graph)"));
        }
        if (node.op_type() == "Constant") {
            const auto* value = find_attribute(node, "value");
            if (node.output_size() != 1 || value == nullptr || !value->has_t())
                return tl::unexpected(
                    graph_error(node_label(node, i) + ": only a Constant with a tensor 'value' is supported"));
            index.constants_.emplace(node.output(0), &value->t());
        }
    }
    for (const auto& out : index.outputs_)
        if (!index.is_input(out) && index.producers_.count(out) == 0)
            return tl::unexpected(graph_error("the output '" + out + "' is produced by no node"));
    // The nodes the outputs need.
    index.needed_.assign(static_cast<std::size_t>(graph.node_size()), false);
    std::vector<std::string> pending = index.outputs_;
    while (!pending.empty()) {
        const std::string v = pending.back();
        pending.pop_back();
        const int p = index.producer(v);
        if (p < 0 || index.needed_[static_cast<std::size_t>(p)]) continue;
        index.needed_[static_cast<std::size_t>(p)] = true;
        for (const auto& in : graph.node(p).input())
            if (!in.empty()) pending.push_back(in);
        // A Loop's or If's body reads outer values by name (nn.EmbeddingBag's per-sample weights):
        // their producers are needed too. Names made inside a body have no producer here.
        for (const auto& a : graph.node(p).attribute()) {
            if (a.has_g()) outer_reads(a.g(), pending);
            for (const auto& g : a.graphs()) outer_reads(g, pending);
        }
    }
    return index;
}

}  // namespace psrun::onnx_io
