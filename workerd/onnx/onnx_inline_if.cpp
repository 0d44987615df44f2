// inline_branch (onnx_inline_if.h): the taken branch's nodes (or both branches' and a Where)
// take the If's place, renamed where they would clash with the graph's own values.
#include "workerd/onnx/onnx_inline_if.h"

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

namespace {

// A branch of an If, its values renamed where their names are taken (in `taken`, which grows).
struct Branch {
    onnx::GraphProto graph;            // its nodes and initializers, renamed
    std::vector<std::string> outputs;  // its outputs' names, renamed
};

Result<Branch> take_branch(const onnx::NodeProto& node, const std::string& label, const char* which,
                           std::set<std::string>& taken) {
    auto fail = [&label](const std::string& what) {
        return make_error(ErrorCode::kInvalidArgument, label + ": " + what);
    };
    const auto* attribute = find_attribute(node, which);
    if (attribute == nullptr || !attribute->has_g())
        return fail(std::string("it has no graph attribute '") + which + "'");
    Branch b{attribute->g(), {}};
    onnx::GraphProto& branch = b.graph;
    if (branch.input_size() != 0 || branch.sparse_initializer_size() != 0)
        return fail(std::string(which) + " has inputs or sparse initializers, which an If's branch cannot have");
    if (branch.output_size() != node.output_size())
        return fail(std::string(which) + " has " + std::to_string(branch.output_size()) + " outputs where the If has " +
                    std::to_string(node.output_size()));
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
    for (const auto& out : branch.output()) {
        std::string result = out.name();
        rename(result, renames);
        b.outputs.push_back(result);
    }
    return b;
}

}  // namespace

Result<void> inline_branch(onnx::GraphProto& graph, const StaticIf& choice) {
    const onnx::NodeProto& node = graph.node(choice.node);
    const std::string label = node_label(node, choice.node);
    std::set<std::string> taken;
    collect_names(graph, choice.node, taken);
    std::vector<Branch> branches;
    for (const char* which : {"then_branch", "else_branch"}) {
        if (!choice.both && (std::string_view(which) == "then_branch") != choice.then_branch) continue;
        PSRUN_TRY_ASSIGN(auto b, take_branch(node, label, which, taken));
        branches.push_back(std::move(b));
    }

    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (int i = 0; i < choice.node; ++i) *nodes.Add() = graph.node(i);
    for (auto& b : branches)
        for (auto& n : *b.graph.mutable_node()) *nodes.Add() = std::move(n);
    for (int k = 0; k < node.output_size(); ++k) {
        if (node.output(k).empty()) continue;
        auto* result = nodes.Add();
        if (choice.both) {  // the condition picks the then branch's value or the else branch's
            result->set_op_type("Where");
            result->set_name(node.name() + "/select_output_" + std::to_string(k));
            for (const auto& in : {node.input(0), branches[0].outputs[static_cast<std::size_t>(k)],
                                   branches[1].outputs[static_cast<std::size_t>(k)]})
                result->add_input(in);
        } else {
            result->set_op_type("Identity");
            result->set_name(node.name() + "/" + (choice.then_branch ? "then_branch" : "else_branch") + "_output_" +
                             std::to_string(k));
            result->add_input(branches[0].outputs[static_cast<std::size_t>(k)]);
        }
        result->add_output(node.output(k));
    }
    for (int i = choice.node + 1; i < graph.node_size(); ++i) *nodes.Add() = graph.node(i);
    for (auto& b : branches)
        for (auto& t : *b.graph.mutable_initializer()) *graph.add_initializer() = std::move(t);
    graph.mutable_node()->Swap(&nodes);
    return {};
}

}  // namespace psrun::onnx_io
