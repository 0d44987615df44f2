#include "workerd/onnx/onnx_graph_digest.h"

#include <cstdio>

#include "common/fnv1a.h"

namespace psrun::onnx_io {

namespace {

// Strings are added with their length first, so that ("ab", "c") and ("a", "bc") differ.
void add_field(Fnv1a& h, const std::string& s) { h.add_u64(s.size()).add(s); }

void add_value_info(Fnv1a& h, const onnx::ValueInfoProto& v) {
    add_field(h, v.name());
    const auto& type = v.type();
    if (!type.has_tensor_type()) return h.add_byte(0), void();
    h.add_byte(1).add_u64(static_cast<std::uint64_t>(type.tensor_type().elem_type()));
    const auto& shape = type.tensor_type().shape();
    h.add_u64(static_cast<std::uint64_t>(shape.dim_size()));
    for (const auto& d : shape.dim()) {
        if (d.has_dim_value()) h.add_byte(1).add_u64(static_cast<std::uint64_t>(d.dim_value()));
        else h.add_byte(2);  // symbolic: its name (N, batch) is cosmetic
    }
}

}  // namespace

std::string graph_digest(const onnx::GraphProto& graph, const std::set<std::string>& parameters) {
    Fnv1a h;
    h.add_u64(static_cast<std::uint64_t>(graph.input_size()));
    for (const auto& in : graph.input()) add_value_info(h, in);
    h.add_u64(static_cast<std::uint64_t>(graph.output_size()));
    for (const auto& out : graph.output()) add_field(h, out.name());
    h.add_u64(static_cast<std::uint64_t>(graph.node_size()));
    for (const auto& node : graph.node()) {
        add_field(h, node.domain());
        add_field(h, node.op_type());
        h.add_u64(static_cast<std::uint64_t>(node.input_size()));
        for (const auto& in : node.input()) add_field(h, in);
        h.add_u64(static_cast<std::uint64_t>(node.output_size()));
        for (const auto& out : node.output()) add_field(h, out);
        h.add_u64(static_cast<std::uint64_t>(node.attribute_size()));
        // An attribute has no map fields, so its serialization is a function of its contents.
        for (const auto& attr : node.attribute()) add_field(h, attr.SerializeAsString());
    }
    for (const auto& init : graph.initializer()) {
        if (parameters.count(init.name()) != 0) continue;
        add_field(h, init.SerializeAsString());
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h.value()));
    return std::string("fnv1a64:") + hex;
}

}  // namespace psrun::onnx_io
