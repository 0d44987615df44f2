// ONNX Resize where oneDNN's resampling does not read what the node says (workerd/nn/ops/
// resize_import.cpp): imported as a matmul per resized axis with ONNX's interpolation weights.
// What torch.onnx cannot write is built here with the protobuf: cubic with its own coefficient
// and exclude_outside, against an independent reference in double; and the refusals.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "common/rng.h"
#include "test/onnx/onnx_test_graph.h"
#include "workerd/nn/network.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

using namespace psrun;

namespace {

void add_attr(onnx::NodeProto& node, const std::string& name, const std::string& s) {
    auto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(s);
}

void add_attr(onnx::NodeProto& node, const std::string& name, std::int64_t i) {
    auto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(i);
}

void add_attr(onnx::NodeProto& node, const std::string& name, float f) {
    auto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(f);
}

void add_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name,
               const std::vector<std::int64_t>& dims) {
    auto* v = list->Add();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param("N");
    for (const auto d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

// x [N, 1, 1, in] -> Resize (scales [1, 1, 1, out / in]) -> Flatten -> logits [N, out], opset 13.
// `configure` sets the Resize node's attributes.
// Nodes are added by TestGraph::add_node (out of line: GCC 12's -Wrestrict misfires on
// protobuf's inlined string setters).
template <typename Configure>
std::string resize_graph(std::int64_t in, std::int64_t out, Configure configure) {
    onnx_io::test::TestGraph graph;
    auto& model = graph.model;
    model.set_ir_version(7);
    auto* opset = model.add_opset_import();
    opset->set_version(13);
    auto& g = *model.mutable_graph();
    add_value(g.mutable_input(), "x", {1, 1, in});
    add_value(g.mutable_output(), "logits", {out});
    auto* scales = g.add_initializer();
    scales->set_name("scales");
    scales->set_data_type(onnx::TensorProto::FLOAT);
    scales->add_dims(4);
    for (const float s : {1.0f, 1.0f, 1.0f, static_cast<float>(out) / static_cast<float>(in)})
        scales->add_float_data(s);
    configure(*graph.add_node("Resize", "resize", {"x", "", "scales"}, "y"));
    graph.add_node("Flatten", "flatten", {"y"}, "logits");
    return graph.bytes();
}

// Keys' cubic kernel of coefficient a at distance t.
double keys(double t, double a) {
    t = std::fabs(t);
    if (t <= 1) return (a + 2) * t * t * t - (a + 3) * t * t + 1;
    if (t < 2) return a * t * t * t - 5 * a * t * t + 8 * a * t - 4 * a;
    return 0;
}

}  // namespace

TEST_CASE("Resize cubic with cubic_coeff_a and exclude_outside imports as interpolation matrices", "[onnx][resize]") {
    const std::int64_t in = 5, out = 9, batch = 3;
    const float a = -0.5f;
    const bool exclude = GENERATE(false, true);
    const std::string transform = GENERATE("half_pixel", "align_corners", "asymmetric");
    CAPTURE(exclude, transform);
    auto model = onnx_io::import_onnx(resize_graph(in, out,
                                                   [&](onnx::NodeProto& r) {
                                                       add_attr(r, "mode", std::string("cubic"));
                                                       add_attr(r, "coordinate_transformation_mode", transform);
                                                       add_attr(r, "cubic_coeff_a", a);
                                                       add_attr(r, "exclude_outside", std::int64_t{exclude});
                                                   }),
                                      "cubic.onnx");
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    bool matmul = false;
    for (const auto& n : model->nodes) matmul = matmul || n.op == "matmul";
    CHECK(matmul);
    std::vector<float> params(static_cast<std::size_t>(model->parameter_count)), grads;
    auto net = nn::Network::create(*model, nn::NetworkOptions{batch, nn::Precision::kF32, true}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    Rng rng(3);
    std::vector<double> x;
    for (auto& v : (*net)->input()) x.push_back(v = static_cast<float>(2.0 * rng.uniform() - 1.0));
    (*net)->forward(false);
    const auto got = (*net)->outputs();
    REQUIRE(got.size() == static_cast<std::size_t>(batch * out));
    const double scale = static_cast<double>(out) / static_cast<double>(in);
    for (std::int64_t n = 0; n < batch; ++n)
        for (std::int64_t o = 0; o < out; ++o) {
            const double c = transform == "half_pixel"      ? (o + 0.5) / scale - 0.5
                             : transform == "align_corners" ? o * static_cast<double>(in - 1) / (out - 1)
                                                            : o / scale;
            double sum = 0, weights = 0;
            for (auto j = static_cast<std::int64_t>(std::floor(c)) - 1;
                 j <= static_cast<std::int64_t>(std::floor(c)) + 2; ++j) {
                const bool inside = j >= 0 && j < in;
                if (exclude && !inside) continue;
                const double w = keys(c - static_cast<double>(j), a);
                sum += w * x[static_cast<std::size_t>(n * in + std::clamp<std::int64_t>(j, 0, in - 1))];
                weights += w;
            }
            const double want = exclude ? sum / weights : sum;
            CHECK(got[static_cast<std::size_t>(n * out + o)] == Approx(want).margin(1e-6));
        }
}

TEST_CASE("Resize refusals name what the importer cannot compute", "[onnx][resize]") {
    auto refused = [](std::int64_t in, std::int64_t out, auto configure) {
        auto m = onnx_io::import_onnx(resize_graph(in, out, configure), "r.onnx");
        REQUIRE_FALSE(m);
        return m.error().message;
    };
    CHECK_THAT(refused(4, 8,
                       [](onnx::NodeProto& r) {
                           add_attr(r, "mode", std::string("linear"));
                           add_attr(r, "coordinate_transformation_mode", std::string("tf_crop_and_resize"));
                       }),
               Catch::Contains("tf_crop_and_resize is not supported"));
    CHECK_THAT(refused(8, 4, [](onnx::NodeProto& r) { add_attr(r, "mode", std::string("area")); }),
               Catch::Contains("mode area is none of nearest, linear and cubic"));
}
