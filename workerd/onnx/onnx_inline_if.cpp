// inline_branch (onnx_inline_if.h): the taken branch's nodes (or both branches' and a Where)
// take the If's place, renamed where they would clash with the graph's own values.
#include "workerd/onnx/onnx_inline_if.h"

#include <algorithm>
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

Result<void> unroll_loop(onnx::GraphProto& graph, const LoopUnroll& unroll) {
    const onnx::NodeProto loop = graph.node(unroll.node);  // a copy: the graph's nodes are replaced
    const std::string label = node_label(loop, unroll.node);
    auto fail = [&label](const std::string& what) {
        return make_error(ErrorCode::kInvalidArgument, label + ": " + what);
    };
    const auto* attribute = find_attribute(loop, "body");
    if (attribute == nullptr || !attribute->has_g()) return fail("it has no graph attribute 'body'");
    const onnx::GraphProto& body = attribute->g();
    const int carried_count = loop.input_size() - 2;
    if (carried_count < 0 || body.input_size() != 2 + carried_count || body.output_size() < 1 + carried_count ||
        loop.output_size() > body.output_size() - 1)
        return fail("its body's inputs and outputs do not match the Loop's (2 + " +
                    std::to_string(std::max(carried_count, 0)) + " inputs, 1 + as many outputs and the scans)");
    const int scan_count = body.output_size() - 1 - carried_count;

    std::set<std::string> taken;
    collect_names(graph, unroll.node, taken);
    auto fresh = [&taken](const std::string& base) {
        std::string name = base;
        for (int k = 2; taken.count(name) != 0; ++k) name = base + "_" + std::to_string(k);
        taken.insert(name);
        return name;
    };
    const std::string prefix = !loop.name().empty() ? loop.name() : loop.output_size() > 0 ? loop.output(0) : "loop";
    std::vector<onnx::TensorProto> initializers;
    auto int64_initializer = [&](const std::string& base, std::vector<std::int64_t> dims, std::int64_t value) {
        onnx::TensorProto t;
        t.set_name(fresh(base));
        t.set_data_type(onnx::TensorProto::INT64);
        for (const auto d : dims) t.add_dims(d);
        t.add_int64_data(value);
        initializers.push_back(t);
        return t.name();
    };
    Renames shared;  // the body's initializers, added once; its condition input, always true
    for (const auto& t : body.initializer()) {
        shared[t.name()] = fresh(t.name());
        initializers.push_back(t);
        initializers.back().set_name(shared[t.name()]);
    }
    onnx::TensorProto always;
    always.set_name(fresh(prefix + "/cond"));
    always.set_data_type(onnx::TensorProto::BOOL);
    always.add_int32_data(1);
    initializers.push_back(always);
    shared[body.input(1).name()] = always.name();

    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (int i = 0; i < unroll.node; ++i) *nodes.Add() = graph.node(i);
    std::vector<std::string> carried(loop.input().begin() + 2, loop.input().end());
    std::vector<std::vector<std::string>> scans(static_cast<std::size_t>(scan_count));
    for (std::int64_t t = 0; t < unroll.trips; ++t) {
        const std::string suffix = "/iter_" + std::to_string(t);
        Renames renames = shared;
        renames[body.input(0).name()] = int64_initializer(prefix + suffix, {}, t);
        for (int k = 0; k < carried_count; ++k)
            renames[body.input(2 + k).name()] = carried[static_cast<std::size_t>(k)];
        for (const auto& n : body.node())
            for (const auto& out : n.output())
                if (!out.empty()) renames[out] = fresh(out + suffix);
        onnx::GraphProto copy = body;
        rename_references(copy, renames);
        for (auto& n : *copy.mutable_node()) {
            for (auto& out : *n.mutable_output()) rename(out, renames);
            if (!n.name().empty()) n.set_name(n.name() + suffix);
            *nodes.Add() = std::move(n);
        }
        auto result = [&](int k) {
            std::string v = body.output(k).name();
            rename(v, renames);
            return v;
        };
        for (int k = 0; k < carried_count; ++k) carried[static_cast<std::size_t>(k)] = result(1 + k);
        for (int s = 0; s < scan_count; ++s)
            scans[static_cast<std::size_t>(s)].push_back(result(1 + carried_count + s));
    }
    for (int k = 0; k < loop.output_size(); ++k) {
        if (loop.output(k).empty()) continue;
        if (k < carried_count) {
            auto* identity = nodes.Add();
            identity->set_op_type("Identity");
            identity->set_name(prefix + "/output_" + std::to_string(k));
            identity->add_input(carried[static_cast<std::size_t>(k)]);
            identity->add_output(loop.output(k));
            continue;
        }
        // A scan output: the copies' values stacked on a new axis 0.
        const std::string axes = unroll.opset >= 13 ? int64_initializer(prefix + "/axis_0", {1}, 0) : "";
        std::vector<std::string> stacked;
        for (const auto& v : scans[static_cast<std::size_t>(k - carried_count)]) {
            auto* unsqueeze = nodes.Add();
            unsqueeze->set_op_type("Unsqueeze");
            unsqueeze->set_name(fresh(v + "/stacked"));
            unsqueeze->add_input(v);
            if (!axes.empty()) {
                unsqueeze->add_input(axes);
            } else {
                auto* a = unsqueeze->add_attribute();
                a->set_name("axes");
                a->set_type(onnx::AttributeProto::INTS);
                a->add_ints(0);
            }
            unsqueeze->add_output(unsqueeze->name());
            stacked.push_back(unsqueeze->name());
        }
        auto* concat = nodes.Add();
        concat->set_op_type("Concat");
        concat->set_name(prefix + "/output_" + std::to_string(k));
        for (const auto& v : stacked) concat->add_input(v);
        auto* a = concat->add_attribute();
        a->set_name("axis");
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(0);
        concat->add_output(loop.output(k));
    }
    for (int i = unroll.node + 1; i < graph.node_size(); ++i) *nodes.Add() = graph.node(i);
    for (auto& t : initializers) *graph.add_initializer() = std::move(t);
    graph.mutable_node()->Swap(&nodes);
    return {};
}

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
