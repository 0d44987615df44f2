// Importing a PyTorch-style graph (test/onnx/onnx_test_graph.h): the description, the
// parameters in the engine's layouts, and a refusal naming the node for each thing the
// engine cannot train; never a crash on a damaged file.
#include <catch2/catch.hpp>
#include <string>

#include "test/onnx/onnx_test_graph.h"
#include "workerd/nn/model_summary.h"
#include "workerd/onnx/onnx_model.h"

using namespace psrun;
using onnx_io::test::small_cnn;

namespace {

std::vector<float> floats(const onnx::TensorProto& t) {
    auto v = onnx_io::read_floats(t);
    REQUIRE(v);
    return *v;
}

// The import's error message; FAILs when the import succeeds.
std::string refusal(const onnx_io::test::TestGraph& g) {
    auto m = onnx_io::import_onnx(g.bytes(), "t.onnx");
    REQUIRE_FALSE(m);
    CHECK(m.error().code == ErrorCode::kInvalidArgument);
    CHECK(m.error().message.rfind("model t.onnx: ", 0) == 0);
    return m.error().message;
}

}  // namespace

TEST_CASE("a PyTorch-style CNN imports as the engine's layers with its weights", "[onnx]") {
    auto g = small_cnn();
    auto m = onnx_io::import_onnx(g.bytes(), "dir/small.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    CHECK(m->name == "small");
    CHECK(m->input == nn::ActivationShape{1, 8, 8, false});
    CHECK(m->classes == 3);
    REQUIRE(m->layers.size() == 4);  // conv, relu, max_pool, dense (Flatten and Softmax go)
    CHECK(m->layers[0].kind == nn::LayerKind::kConv2d);
    CHECK(m->layers[0].padding == nn::Padding::kSame);
    CHECK(m->layers[2].output == nn::ActivationShape{2, 4, 4, false});
    CHECK(m->layers[3].units == 3);
    REQUIRE(m->initial_parameters);
    const auto& p = *m->initial_parameters;
    REQUIRE(p.size() == 18 + 2 + 96 + 3);
    const auto conv_w = floats(g.model.graph().initializer(0));
    const auto dense_w = floats(g.model.graph().initializer(2));
    CHECK(std::vector<float>(p.begin(), p.begin() + 18) == conv_w);
    // Dense column (h*4 + x)*2 + c in psrun is ONNX's column (c*4 + h)*4 + x.
    for (int u = 0; u < 3; ++u)
        for (int c = 0; c < 2; ++c)
            for (int h = 0; h < 4; ++h)
                for (int x = 0; x < 4; ++x)
                    CHECK(p[static_cast<std::size_t>(20 + u * 32 + (h * 4 + x) * 2 + c)] ==
                          dense_w[static_cast<std::size_t>(u * 32 + (c * 4 + h) * 4 + x)]);
    CHECK(p.back() == floats(g.model.graph().initializer(3)).back());
}

TEST_CASE("opset 11 and 12 graphs, Identity and Dropout import", "[onnx]") {
    for (const std::int64_t opset : {11, 12}) {
        auto g = small_cnn(opset);
        CHECK(onnx_io::import_onnx(g.bytes(), "t.onnx"));
    }
    auto g = small_cnn();
    g.node("/1/Relu")->set_op_type("Identity");
    auto m = onnx_io::import_onnx(g.bytes(), "t.onnx");
    REQUIRE(m);
    CHECK(m->layers.size() == 3);
    g = small_cnn();
    g.node("/1/Relu")->set_op_type("Dropout");
    onnx_io::add_float_tensor(*g.model.mutable_graph(), "ratio", {}, std::vector<float>{0.25f});
    g.add_input(*g.node("/1/Relu"), "ratio");
    m = onnx_io::import_onnx(g.bytes(), "t.onnx");
    REQUIRE(m);
    CHECK(m->layers[1].kind == nn::LayerKind::kDropout);
    CHECK(m->layers[1].keep_prob == Approx(0.75));
}

TEST_CASE("MatMul + Add imports as the Gemm it is equivalent to", "[onnx]") {
    auto gemm = small_cnn();
    auto expected = onnx_io::import_onnx(gemm.bytes(), "t.onnx");
    REQUIRE(expected);
    auto g = small_cnn();
    auto* node = g.node("/4/Gemm");
    node->set_op_type("MatMul");
    node->clear_attribute();
    node->mutable_input()->RemoveLast();  // the bias goes to the Add
    node->set_output(0, "mm");
    g.add_node("Add", "/4/Add", {"4.bias", "mm"}, "/4/Gemm_output_0");
    auto& w = *g.model.mutable_graph()->mutable_initializer(2);  // [3, 32] -> [32, 3]
    const auto values = floats(w);
    std::vector<float> t(values.size());
    for (int u = 0; u < 3; ++u)
        for (int f = 0; f < 32; ++f)
            t[static_cast<std::size_t>(f * 3 + u)] = values[static_cast<std::size_t>(u * 32 + f)];
    w.clear_dims();
    w.add_dims(32);
    w.add_dims(3);
    w.set_raw_data(std::string(reinterpret_cast<const char*>(t.data()), t.size() * sizeof(float)));
    auto m = onnx_io::import_onnx(g.bytes(), "t.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    CHECK(nn::architecture_hash(*m) == nn::architecture_hash(*expected));
    CHECK(*m->initial_parameters == *expected->initial_parameters);
}

TEST_CASE("refusals name the node, its op and what the engine cannot honour", "[onnx]") {
    SECTION("unsupported op") {
        auto g = small_cnn();
        g.node("/1/Relu")->set_op_type("LeakyRelu");
        const auto msg = refusal(g);
        CHECK_THAT(msg,
                   Catch::Contains("node '/1/Relu' (LeakyRelu): the engine has no such layer"));
    }
    SECTION("a branch: a value consumed twice") {
        auto g = small_cnn();
        g.add_node("Relu", "side", {"/1/Relu_output_0"}, "side_out");
        const auto msg = refusal(g);
        CHECK_THAT(msg, Catch::Contains("'/1/Relu_output_0' is consumed 2 times"));
        CHECK_THAT(msg, Catch::Contains("node 'side' (Relu)"));
    }
    SECTION("a computed Reshape shape") {
        auto g = small_cnn();
        auto* flat = g.node("/3/Flatten");
        flat->set_op_type("Reshape");
        flat->clear_attribute();
        g.add_input(*flat, "s");  // the shape PyTorch computes for x.view(x.size(0), -1)
        g.add_node("Shape", "shape_of", {"/2/MaxPool_output_0"}, "s");
        CHECK_THAT(refusal(g),
                   Catch::Contains(
                       "node '/3/Flatten' (Reshape): its shape 's' is computed, not a constant"));
    }
    SECTION("ceil_mode=1") {
        auto g = small_cnn();
        onnx_io::set_int(*g.node("/2/MaxPool"), "ceil_mode", 1);
        g.node("/2/MaxPool")->mutable_attribute()->DeleteSubrange(0, 1);  // the old ceil_mode=0
        CHECK_THAT(refusal(g), Catch::Contains("node '/2/MaxPool' (MaxPool): ceil_mode=1"));
    }
    SECTION("dilations and groups") {
        auto g = small_cnn();
        g.node("/0/Conv")->mutable_attribute(0)->set_ints(0, 2);
        CHECK_THAT(refusal(g), Catch::Contains("node '/0/Conv' (Conv): dilations [2, 1]"));
        g = small_cnn();
        g.node("/0/Conv")->mutable_attribute(1)->set_i(2);
        CHECK_THAT(refusal(g), Catch::Contains("node '/0/Conv' (Conv): group 2"));
    }
    SECTION("pads that are neither valid nor TF's same") {
        auto g = small_cnn();
        g.node("/0/Conv")->mutable_attribute(3)->set_ints(0, 0);
        CHECK_THAT(refusal(g), Catch::Contains("node '/0/Conv' (Conv): pads [0, 1, 1, 1]"));
    }
    SECTION("Gemm alpha and transA") {
        auto g = small_cnn();
        g.node("/4/Gemm")->mutable_attribute(0)->set_f(2.0f);
        CHECK_THAT(refusal(g), Catch::Contains("node '/4/Gemm' (Gemm): alpha"));
        g = small_cnn();
        onnx_io::set_int(*g.node("/4/Gemm"), "transA", 1);
        CHECK_THAT(refusal(g), Catch::Contains("transA=1"));
    }
    SECTION("a missing initializer") {
        auto g = small_cnn();
        g.model.mutable_graph()->mutable_initializer()->DeleteSubrange(2, 1);
        CHECK_THAT(
            refusal(g),
            Catch::Contains("node '/4/Gemm' (Gemm): weight '4.weight' is a missing initializer"));
    }
    SECTION("a Softmax that is not last, a dead node, two inputs, another opset") {
        auto g = small_cnn();
        g.node("/1/Relu")->set_op_type("Softmax");
        CHECK_THAT(refusal(g), Catch::Contains("node '/1/Relu' (Softmax): only a final Softmax"));
        g = small_cnn();
        g.add_node("Relu", "dead", {"4.bias"}, "dead_out");
        CHECK_THAT(refusal(g), Catch::Contains("node 'dead' (Relu) is not on the chain"));
        g = small_cnn(14);
        CHECK_THAT(refusal(g), Catch::Contains("opset 14"));
    }
}

TEST_CASE("damaged files are refused, never a crash", "[onnx]") {
    const std::string bytes = small_cnn().bytes();
    CHECK_THAT(onnx_io::import_onnx("", "e.onnx").error().message,
               Catch::Contains("not an ONNX model"));
    CHECK_THAT(onnx_io::import_onnx("{\"format\": 1}", "j.onnx").error().message,
               Catch::Contains("not an ONNX model"));
    int accepted = 0;
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        auto m = onnx_io::import_onnx(std::string_view(bytes).substr(0, n), "t.onnx");
        if (m)
            ++accepted;
        else
            CHECK(m.error().message.rfind("model t.onnx: ", 0) == 0);
    }
    CHECK(accepted == 0);
    std::string flipped = bytes;
    for (std::size_t i = 0; i < flipped.size(); i += 7) {
        flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
        (void)onnx_io::import_onnx(flipped, "t.onnx");
    }
    CHECK(onnx_io::import_onnx_file("/nonexistent/x.onnx").error().code == ErrorCode::kIo);
}
