// inline_branch (onnx_inline_if.h): the taken branch's nodes take the If's place, renamed
// where they would clash with the graph's own values.
#include "workerd/onnx/onnx_inline_if.h"

#include <map>
#include <set>
#include <string>
#include <utility>

#include "workerd/onnx/onnx_graph.h"

namespace psrun::onnx_io {

namespace {

using Renames = std::map<std::string, std::string>;

// Every value name `graph` and the graphs nested in its nodes use, except those of node `skip`.
void collect_names(const onnx::GraphProto& graph, int skip, std::set<std::string>& names) {
    for (const auto& v : graph.input()) names.insert(v.name());
    for (const auto& v : graph.output()) names.insert(v.name());
    for (const auto& t : graph.initializer()) names.insert(t.name());
    for (int i = 0; i < graph.node_size(); ++i) {
        if (i == skip) continue;
        const auto& node = graph.node(i);
        names.insert(node.input().begin(), node.input().end());
        names.insert(node.output().begin(), node.output().end());
        for (const auto& a : node.attribute()) {
            if (a.has_g()) collect_names(a.g(), -1, names);
            for (const auto& g : a.graphs()) collect_names(g, -1, names);
        }
    }
}

void rename(std::string& name, const Renames& renames) {
    const auto it = renames.find(name);
    if (it != renames.end()) name = it->second;
}

// Applies `renames` to every reference in `graph`'s nodes, in nested graphs too.
void rename_references(onnx::GraphProto& graph, const Renames& renames) {
    for (auto& node : *graph.mutable_node()) {
        for (auto& in : *node.mutable_input()) rename(in, renames);
        for (auto& a : *node.mutable_attribute()) {
            if (a.has_g()) rename_references(*a.mutable_g(), renames);
            for (auto& g : *a.mutable_graphs()) rename_references(g, renames);
        }
    }
}

}  // namespace

Result<void> inline_branch(onnx::GraphProto& graph, const StaticIf& choice) {
    const onnx::NodeProto& node = graph.node(choice.node);
    const std::string label = node_label(node, choice.node);
    auto fail = [&label](const std::string& what) {
        return make_error(ErrorCode::kInvalidArgument, label + ": " + what);
    };
    const char* which = choice.then_branch ? "then_branch" : "else_branch";
    const auto* attribute = find_attribute(node, which);
    if (attribute == nullptr || !attribute->has_g())
        return fail(std::string("its condition is known at import, but it has no graph attribute '") + which + "'");
    onnx::GraphProto branch = attribute->g();
    if (branch.input_size() != 0 || branch.sparse_initializer_size() != 0)
        return fail(std::string(which) + " has inputs or sparse initializers, which an If's branch cannot have");
    if (branch.output_size() != node.output_size())
        return fail(std::string(which) + " has " + std::to_string(branch.output_size()) + " outputs where the If has " +
                    std::to_string(node.output_size()));

    std::set<std::string> taken;
    collect_names(graph, choice.node, taken);
    Renames renames;
    auto claim = [&](const std::string& local) {
        if (local.empty() || renames.count(local) != 0) return;
        std::string name = local;
        for (int k = 2; taken.count(name) != 0; ++k) name = local + "/" + which + "_" + std::to_string(k);
        taken.insert(name);
        if (name != local) renames.emplace(local, name);
    };
    for (const auto& t : branch.initializer()) claim(t.name());
    for (const auto& n : branch.node())
        for (const auto& out : n.output()) claim(out);
    rename_references(branch, renames);
    for (auto& n : *branch.mutable_node())
        for (auto& out : *n.mutable_output()) rename(out, renames);
    for (auto& t : *branch.mutable_initializer()) rename(*t.mutable_name(), renames);

    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (int i = 0; i < choice.node; ++i) *nodes.Add() = graph.node(i);
    for (auto& n : *branch.mutable_node()) *nodes.Add() = std::move(n);
    for (int k = 0; k < node.output_size(); ++k) {
        if (node.output(k).empty()) continue;
        std::string result = branch.output(k).name();
        rename(result, renames);
        auto* identity = nodes.Add();
        identity->set_op_type("Identity");
        identity->set_name(node.name() + "/" + which + "_output_" + std::to_string(k));
        identity->add_input(result);
        identity->add_output(node.output(k));
    }
    for (int i = choice.node + 1; i < graph.node_size(); ++i) *nodes.Add() = graph.node(i);
    for (auto& t : *branch.mutable_initializer()) *graph.add_initializer() = std::move(t);
    graph.mutable_node()->Swap(&nodes);
    return {};
}

}  // namespace psrun::onnx_io
