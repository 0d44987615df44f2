// The ONNX op tests' helpers (onnx_ops_test_util.h).
#include "test/onnx/onnx_ops_test_util.h"

#include <catch2/catch.hpp>

#include <stdexcept>

#include "common/rng.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::onnx_io::test {

using nlohmann::json;

nn::ModelDescription imported(const std::string& bytes) {
    auto m = import_onnx(bytes, "t.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    return std::move(*m);
}

std::string refusal(const TestGraph& g) {
    auto m = import_onnx(g.bytes(), "t.onnx");
    REQUIRE_FALSE(m);
    CHECK(m.error().code == ErrorCode::kInvalidArgument);
    CHECK(m.error().message.rfind("model t.onnx: ", 0) == 0);
    return m.error().message;
}

const nn::Node& node_named(const nn::ModelDescription& m, const std::string& name) {
    for (const auto& n : m.nodes)
        if (n.name == name) return n;
    FAIL("no node " << name);
    throw std::logic_error("unreachable");
}

void set_string(onnx::NodeProto& node, const std::string& name, const std::string& value) {
    for (auto& a : *node.mutable_attribute())
        if (a.name() == name) {
            a.set_s(value);
            return;
        }
    auto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(value);
}

std::vector<std::string> kinds(const nn::ModelDescription& m) {
    std::vector<std::string> out;
    for (const auto& n : m.nodes) out.push_back(n.op);
    return out;
}

// The outputs of `m` with `params` on a batch of 3 drawn from `seed` (inputs in [-1, 1]).
std::vector<float> outputs(const nn::ModelDescription& m, const std::vector<float>& params, std::uint64_t seed) {
    std::vector<float> p = params, grads;
    auto net = nn::Network::create(m, nn::NetworkOptions{3, nn::Precision::kF32, true}, p, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    psrun::Rng rng(seed);
    for (auto& x : (*net)->input()) x = static_cast<float>(2.0 * rng.uniform() - 1.0);
    (*net)->forward(false);
    return {(*net)->outputs().begin(), (*net)->outputs().end()};
}

// A description of `layers` on an input of `shape` (float), loss mean squared error.
nn::ModelDescription described(const json& layers, const std::vector<std::int64_t>& shape) {
    const json doc{{"input", {{"shape", shape}, {"type", "float"}}},
                   {"layers", layers},
                   {"loss", {{"kind", "mean_squared_error"}}}};
    auto m = nn::parse_model(doc, "t.json");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    return std::move(*m);
}

// Export (graph only) and import back: the same kinds, attributes and outputs.
void check_round_trip(const json& layers, const std::vector<std::int64_t>& shape) {
    const auto model = described(layers, shape);
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count));
    nn::initialize_parameters(model, 5, params);
    auto bytes = export_onnx(model, params);
    INFO((bytes ? std::string() : bytes.error().message));
    REQUIRE(bytes);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    proto.clear_metadata_props();
    const auto back = imported(proto.SerializeAsString());
    CHECK(kinds(back) == kinds(model));
    // A parameter layer comes back as a layer named after its initializer.
    for (const auto& n : model.nodes)
        if (n.op != "parameter") CHECK(node_named(back, n.name).attrs == n.attrs);
    const auto a = outputs(model, params, 9), b = outputs(back, *back.initial_parameters, 9);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == Approx(a[i]).epsilon(1e-5).margin(1e-6));
}

}  // namespace psrun::onnx_io::test
