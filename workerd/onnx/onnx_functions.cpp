// Model-local functions inlined into the main graph (onnx_functions.h).
#include "workerd/onnx/onnx_functions.h"

#include <map>
#include <set>
#include <string>
#include <utility>

#include "workerd/onnx/onnx_graph.h"

namespace psrun::onnx_io {

namespace {

Error function_error(const std::string& what) { return Error{ErrorCode::kInvalidArgument, what}; }

class Inliner {
  public:
    Inliner(const onnx::ModelProto& model, std::int64_t opset) : opset_(opset) {
        for (const auto& f : model.functions()) functions_.emplace(std::pair{f.domain(), f.name()}, &f);
    }

    // Appends `node` to `out`, or the body it calls, inlined.
    Result<void> expand(const onnx::NodeProto& node, int depth,
                        google::protobuf::RepeatedPtrField<onnx::NodeProto>& out) {
        const auto found = functions_.find({node.domain(), node.op_type()});
        if (found == functions_.end()) {
            if (out.size() >= kMaxNodes)
                return tl::unexpected(function_error("more than " + std::to_string(kMaxNodes) +
                                                     " nodes once the model's functions are inlined"));
            *out.Add() = node;
            return {};
        }
        const onnx::FunctionProto& f = *found->second;
        const std::string call =
            "call of function '" + f.name() + "' (domain '" + f.domain() + "') by node '" + node.name() + "'";
        if (depth >= kMaxFunctionDepth)
            return tl::unexpected(function_error(call + ": calls nested deeper than " +
                                                 std::to_string(kMaxFunctionDepth) + " (a function calling itself?)"));
        if (node.input_size() > f.input_size() || node.output_size() > f.output_size())
            return tl::unexpected(
                function_error(call + ": " + std::to_string(node.input_size()) + " inputs and " +
                               std::to_string(node.output_size()) + " outputs where the function declares " +
                               std::to_string(f.input_size()) + " and " + std::to_string(f.output_size())));
        PSRUN_TRY(check_opset(f, call));
        const std::string prefix = unique_prefix(node);
        std::map<std::string, std::string> names;
        for (int i = 0; i < f.input_size(); ++i) names[f.input(i)] = i < node.input_size() ? node.input(i) : "";
        for (int o = 0; o < f.output_size(); ++o)
            names[f.output(o)] =
                o < node.output_size() && !node.output(o).empty() ? node.output(o) : prefix + f.output(o);
        const auto rename = [&](const std::string& v) {
            if (v.empty()) return v;
            const auto it = names.find(v);
            return it != names.end() ? it->second : prefix + v;
        };
        std::map<std::string, const onnx::AttributeProto*> given;
        for (const auto& a : node.attribute()) given[a.name()] = &a;
        for (int k = 0; k < f.node_size(); ++k) {
            onnx::NodeProto body = f.node(k);
            body.set_name(prefix + (body.name().empty() ? body.op_type() + "_" + std::to_string(k) : body.name()));
            for (auto& in : *body.mutable_input()) in = rename(in);
            for (auto& out_name : *body.mutable_output()) out_name = rename(out_name);
            google::protobuf::RepeatedPtrField<onnx::AttributeProto> attrs;
            for (const auto& a : body.attribute()) {
                if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS)
                    return tl::unexpected(function_error(call + ": its node '" + f.node(k).name() + "' (" +
                                                         body.op_type() +
                                                         ") holds a subgraph, which the import does not "
                                                         "inline inside a function"));
                if (a.ref_attr_name().empty()) {
                    *attrs.Add() = a;
                    continue;
                }
                const auto value = given.find(a.ref_attr_name());
                if (value == given.end()) continue;  // the attribute's default
                onnx::AttributeProto* copy = attrs.Add();
                *copy = *value->second;
                copy->set_name(a.name());
            }
            *body.mutable_attribute() = std::move(attrs);
            PSRUN_TRY(expand(body, depth + 1, out));
        }
        return {};
    }

  private:
    Result<void> check_opset(const onnx::FunctionProto& f, const std::string& call) const {
        for (const auto& o : f.opset_import())
            if ((o.domain().empty() || o.domain() == "ai.onnx") && o.version() != opset_)
                return tl::unexpected(function_error(call + ": the function reads ONNX opset " +
                                                     std::to_string(o.version()) + ", the graph opset " +
                                                     std::to_string(opset_) + " (export the model with one opset)"));
        return {};
    }

    // "<call name>/", made unique where calls share a name or have none.
    std::string unique_prefix(const onnx::NodeProto& node) {
        std::string base = node.name().empty() ? node.op_type() : node.name();
        std::string prefix = base + "/";
        for (int k = 2; !prefixes_.insert(prefix).second; ++k) prefix = base + "_" + std::to_string(k) + "/";
        return prefix;
    }

    std::int64_t opset_;
    std::map<std::pair<std::string, std::string>, const onnx::FunctionProto*> functions_;
    std::set<std::string> prefixes_;
};

}  // namespace

Result<void> inline_functions(onnx::ModelProto& model, std::int64_t opset) {
    if (model.functions_size() == 0) return {};
    Inliner inliner(model, opset);
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (const auto& node : model.graph().node()) PSRUN_TRY(inliner.expand(node, 0, nodes));
    *model.mutable_graph()->mutable_node() = std::move(nodes);
    return {};
}

}  // namespace psrun::onnx_io
