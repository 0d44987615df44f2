// Importing a PyTorch-style graph (test/onnx/onnx_test_graph.h): the description, the
// parameters in the engine's layouts, and a refusal naming the node for each thing the
// engine cannot train; never a crash on a damaged file.
#include <algorithm>
#include <catch2/catch.hpp>
#include <limits>
#include <string>

#include "common/rng.h"
#include "test/onnx/onnx_ops_test_util.h"
#include "test/onnx/onnx_test_graph.h"
#include "workerd/nn/model_summary.h"
#include "workerd/nn/network.h"
#include "workerd/nn/op_schema.h"
#include "workerd/onnx/onnx_model.h"

using namespace psrun;
using onnx_io::test::kinds;
using onnx_io::test::refusal;
using onnx_io::test::small_cnn;

namespace {

std::vector<float> floats(const onnx::TensorProto& t) {
    auto v = onnx_io::read_floats(t);
    REQUIRE(v);
    return *v;
}

// The model's outputs on a fixed batch (forward, no dropout).
std::vector<float> outputs(const nn::ModelDescription& m, std::uint64_t seed) {
    std::vector<float> params = *m.initial_parameters, grads;
    auto net = nn::Network::create(m, nn::NetworkOptions{4, nn::Precision::kF32, true}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    psrun::Rng rng(seed);
    for (auto& x : (*net)->input()) x = static_cast<float>(rng.uniform());
    (*net)->forward(false);
    return {(*net)->outputs().begin(), (*net)->outputs().end()};
}

// Dimension d of the graph's first input.
onnx::TensorShapeProto_Dimension* input_dim(onnx_io::test::TestGraph& g, int d) {
    return g.model.mutable_graph()
        ->mutable_input(0)
        ->mutable_type()
        ->mutable_tensor_type()
        ->mutable_shape()
        ->mutable_dim(d);
}

}  // namespace

TEST_CASE("a PyTorch-style CNN imports node by node with its weights under their names", "[onnx]") {
    auto g = small_cnn();
    auto m = onnx_io::import_onnx(g.bytes(), "dir/small.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    CHECK(m->name == "small");
    CHECK(m->image_input() == nn::ActivationShape{1, 8, 8, false});
    CHECK(m->classes == 3);
    // conv, relu, max_pool, flatten, dense (the final Softmax is the loss's)
    CHECK(kinds(*m) == std::vector<std::string>{"conv2d", "relu", "max_pool", "flatten", "dense"});
    CHECK(m->nodes[0].attrs.at("padding") == nlohmann::json({1, 1, 1, 1}));
    CHECK(m->nodes[2].output_info[0].dims ==
          nn::Dims{nn::Dim::batch_times(1), nn::Dim::of(2), nn::Dim::of(4), nn::Dim::of(4)});
    CHECK(m->nodes[4].attrs.at("units") == 3);
    REQUIRE(m->tensors.size() == 4);
    CHECK(m->tensors[0].name == "0.weight");
    CHECK(m->tensors[3].name == "4.bias");
    REQUIRE(m->initial_parameters);
    const auto& p = *m->initial_parameters;
    REQUIRE(p.size() == 18 + 2 + 96 + 3);
    CHECK(std::vector<float>(p.begin(), p.begin() + 18) == floats(g.model.graph().initializer(0)));
    // Flatten's CHW order is the dense layer's: the weights are used as stored.
    CHECK(std::vector<float>(p.begin() + 20, p.begin() + 116) == floats(g.model.graph().initializer(2)));
    CHECK(p.back() == floats(g.model.graph().initializer(3)).back());
    CHECK(m->import_warnings.empty());
}

TEST_CASE("a convolution weight PyTorch's constant folding computed is imported with a warning", "[onnx]") {
    // An eval-mode export folds a BatchNormalization into the Conv before it; the folded weight
    // gets the exporter's name for a computed constant ("onnx::Conv_<n>").
    auto g = small_cnn();
    g.model.mutable_graph()->mutable_initializer(0)->set_name("onnx::Conv_7");
    g.node("/0/Conv")->set_input(1, "onnx::Conv_7");
    auto m = onnx_io::import_onnx(g.bytes(), "folded.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    CHECK(kinds(*m) == std::vector<std::string>{"conv2d", "relu", "max_pool", "flatten", "dense"});
    REQUIRE(m->import_warnings.size() == 1);
    CHECK_THAT(m->import_warnings[0], Catch::StartsWith("1 convolution weight (onnx::Conv_7) was computed"));
    CHECK_THAT(m->import_warnings[0], Catch::Contains("training=torch.onnx.TrainingMode.TRAINING"));
    // A Gemm's folded weight (a Linear's transposed weight) trains as the same function, under
    // the exporter's name: the warning says so (the trained file no longer loads by name).
    g = small_cnn();
    g.model.mutable_graph()->mutable_initializer(2)->set_name("onnx::Gemm_9");
    g.node("/4/Gemm")->set_input(1, "onnx::Gemm_9");
    m = onnx_io::import_onnx(g.bytes(), "gemm.onnx");
    REQUIRE(m);
    REQUIRE(m->import_warnings.size() == 1);
    CHECK_THAT(m->import_warnings[0], Catch::StartsWith("1 trained tensor ('onnx__Gemm_9') is a constant the "
                                                        "exporter's constant folding computed"));
    CHECK_THAT(m->import_warnings[0], Catch::Contains("do_constant_folding=False"));
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
    CHECK(kinds(*m) == std::vector<std::string>{"conv2d", "max_pool", "flatten", "dense"});
    g = small_cnn();
    g.node("/1/Relu")->set_op_type("Dropout");
    onnx_io::add_float_tensor(*g.model.mutable_graph(), "ratio", {}, std::vector<float>{0.25f});
    g.add_input(*g.node("/1/Relu"), "ratio");
    m = onnx_io::import_onnx(g.bytes(), "t.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    CHECK(m->nodes[1].op == "dropout");
    CHECK(m->nodes[1].attrs.at("keep_prob").get<double>() == Approx(0.75));
}

TEST_CASE("MatMul + Add computes what the equivalent Gemm does, the weights kept as stored", "[onnx]") {
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
    g.order({"/0/Conv", "/1/Relu", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/4/Add", "/5/Softmax"});
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
    CHECK(m->tensor("4.weight")->shape == std::vector<std::int64_t>{32, 3});
    const auto a = outputs(*m, 3), b = outputs(*expected, 3);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-5).margin(1e-6));
}

TEST_CASE("x.view(x.size(0), -1): the shape computed from Shape is evaluated at import", "[onnx]") {
    auto g = small_cnn();
    auto* flat = g.node("/3/Flatten");
    flat->set_op_type("Reshape");
    flat->clear_attribute();
    g.add_input(*flat, "s");
    // s = Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]) as PyTorch writes it.
    g.add_node("Shape", "shape_of", {"/2/MaxPool_output_0"}, "shp");
    g.add_int64_tensor("zero", {}, {0});
    g.add_node("Gather", "batch_of", {"shp", "zero"}, "n");
    g.add_int64_tensor("axes0", {1}, {0});
    g.add_node("Unsqueeze", "n1", {"n", "axes0"}, "n_1");
    g.add_int64_tensor("minus1", {1}, {-1});
    onnx_io::set_int(*g.add_node("Concat", "cat", {"n_1", "minus1"}, "s"), "axis", 0);
    g.order({"/0/Conv", "/1/Relu", "/2/MaxPool", "shape_of", "batch_of", "n1", "cat", "/3/Flatten", "/4/Gemm",
             "/5/Softmax"});
    auto m = onnx_io::import_onnx(g.bytes(), "view.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    CHECK(kinds(*m) == std::vector<std::string>{"conv2d", "relu", "max_pool", "reshape", "dense"});
    CHECK(m->nodes[3].output_info[0].dims == nn::Dims{nn::Dim::batch_times(1), nn::Dim::of(32)});
    auto expected = onnx_io::import_onnx(small_cnn().bytes(), "t.onnx");
    REQUIRE(expected);
    CHECK(outputs(*m, 5) == outputs(*expected, 5));
}

TEST_CASE("a file exported with a fixed batch size: x.view(x.size(0), -1) keeps the batch; other shapes refused",
          "[onnx]") {
    // torch.onnx.export without dynamic_axes: the input's batch is 2, and x.view(x.size(0), -1)
    // is written as a Reshape to the constant [2, 32]. Its leading 2 reads as the batch: the
    // model computes at a batch of 4 what the file with a symbolic batch does, with a warning.
    auto g = small_cnn();
    input_dim(g, 0)->set_dim_value(2);
    auto* flat = g.node("/3/Flatten");
    flat->set_op_type("Reshape");
    flat->clear_attribute();
    g.add_int64_tensor("shape", {2}, {2, 32});
    g.add_input(*flat, "shape");
    auto m = onnx_io::import_onnx(g.bytes(), "t.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    CHECK(m->nodes[3].output_info[0].dims == nn::Dims{nn::Dim::batch_times(1), nn::Dim::of(32)});
    auto expected = onnx_io::import_onnx(small_cnn().bytes(), "t.onnx");
    REQUIRE(expected);
    CHECK(outputs(*m, 5) == outputs(*expected, 5));
    REQUIRE(m->import_warnings.size() == 1);
    CHECK_THAT(m->import_warnings[0], Catch::StartsWith("the file's inputs have a fixed batch size of 2 "
                                                        "(exported without dynamic_axes)"));
    // A target that does not hold the batch's values ([2, 33]) is refused, saying to export with
    // dynamic_axes.
    g.model.mutable_graph()->mutable_initializer()->rbegin()->clear_int64_data();
    for (const std::int64_t d : {2, 33}) g.model.mutable_graph()->mutable_initializer()->rbegin()->add_int64_data(d);
    const std::string why = refusal(g);
    CHECK_THAT(why, Catch::Contains("node '/3/Flatten' (Reshape)"));
    CHECK_THAT(why, Catch::Contains("(the file's inputs have a fixed batch size of 2: exported without dynamic_axes"));
    // With a symbolic batch, the same refusal has no such hint.
    input_dim(g, 0)->set_dim_param("N");
    CHECK_THAT(refusal(g), !Catch::Contains("dynamic_axes"));
}

TEST_CASE("a residual branch, explicit strided pads, groups and dilation import", "[onnx]") {
    auto g = small_cnn();
    // A depthwise 3x3 conv (groups 2 after a 2-filter conv) with dilation 2 and pads 2, added to its input.
    auto* conv2 = g.add_node("Conv", "dw", {"/1/Relu_output_0", "dw.weight"}, "dw_out");
    onnx_io::set_ints(*conv2, "kernel_shape", {3, 3});
    onnx_io::set_ints(*conv2, "pads", {2, 2, 2, 2});
    onnx_io::set_ints(*conv2, "dilations", {2, 2});
    onnx_io::set_int(*conv2, "group", 2);
    onnx_io::add_float_tensor(*g.model.mutable_graph(), "dw.weight", {2, 1, 3, 3}, std::vector<float>(18, 0.05f));
    g.add_node("Add", "res", {"dw_out", "/1/Relu_output_0"}, "res_out");
    // The pool reads the sum: the Relu's output is read twice (a branch).
    g.node("/2/MaxPool")->set_input(0, "res_out");
    // Put the new nodes before the pool (topological order).
    g.order({"/0/Conv", "/1/Relu", "dw", "res", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    auto m = onnx_io::import_onnx(g.bytes(), "t.onnx");
    INFO((m ? std::string() : m.error().message));
    if (!nn::find_op("add")) {
        REQUIRE_FALSE(m);
        CHECK_THAT(m.error().message, Catch::Contains("(Add): the engine has no operator for ONNX Add"));
        return;
    }
    REQUIRE(m);
    CHECK(m->nodes[2].attrs.at("groups") == 2);
    CHECK(m->nodes[2].attrs.at("dilation") == nlohmann::json({2, 2}));
}

TEST_CASE("refusals name the node, its op and what the engine cannot honour", "[onnx]") {
    SECTION("unsupported op") {
        auto g = small_cnn();
        g.node("/1/Relu")->set_op_type("Hardmax");
        CHECK_THAT(refusal(g),
                   Catch::Contains("node '/1/Relu' (Hardmax): the engine has no operator for ONNX Hardmax"));
        g = small_cnn();
        g.node("/1/Relu")->set_op_type("NoSuchOp");
        CHECK_THAT(refusal(g),
                   Catch::Contains("node '/1/Relu' (NoSuchOp): the engine has no operator for ONNX NoSuchOp"));
    }
    SECTION("more or fewer inputs or outputs than ONNX's schema allows") {
        auto g = small_cnn();
        g.node("/1/Relu")->set_op_type("NonMaxSuppression");
        CHECK_THAT(refusal(g), Catch::Contains("node '/1/Relu' (NonMaxSuppression) has 1 input where ONNX "
                                               "NonMaxSuppression (opset 13) takes 2 to 5: not a valid ONNX graph"));
        g = small_cnn();
        g.node("/0/Conv")->mutable_input()->DeleteSubrange(1, 2);
        CHECK_THAT(refusal(g),
                   Catch::Contains("node '/0/Conv' (Conv) has 1 input where ONNX Conv (opset 13) takes 2 to 3"));
        // The final Softmax (the loss's own) without its input: fuzz_onnx's crash (protobuf's
        // CHECK on input(0)).
        g = small_cnn();
        g.node("/5/Softmax")->clear_input();
        CHECK_THAT(refusal(g), Catch::Contains("(Softmax) has 0 inputs where ONNX Softmax (opset 13) takes 1"));
        g = small_cnn();
        g.node("/1/Relu")->add_output("extra");
        CHECK_THAT(refusal(g), Catch::Contains("(Relu) has 2 outputs where ONNX Relu (opset 13) takes 1"));
    }
    SECTION("a Reshape shape only known at run time") {
        auto g = small_cnn();
        auto* flat = g.node("/3/Flatten");
        flat->set_op_type("Reshape");
        flat->clear_attribute();
        g.add_input(*flat, "/1/Relu_output_0");  // a float activation as the shape
        CHECK_THAT(refusal(g), Catch::Contains("node '/3/Flatten' (Reshape): its shape is computed at run time"));
    }
    SECTION("an output that is no N x C scores: the classes are unknown, the message says what is needed") {
        auto g = small_cnn();
        auto* graph = g.model.mutable_graph();
        const std::string relu = g.node("/1/Relu")->output(0);
        while (graph->node(graph->node_size() - 1).name() != "/1/Relu") graph->mutable_node()->RemoveLast();
        graph->mutable_output(0)->set_name(relu);
        graph->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
        const std::string why = refusal(g);
        CHECK_THAT(why, Catch::Contains("the loss needs the logits: N x C floats, one score per class"));
        CHECK_THAT(why, !Catch::Contains("N x 0"));
        // Scores per position (the Relu's N x C x H x W): the way a segmentation network trains.
        CHECK_THAT(why, Catch::Contains("for scores per position (segmentation), put the loss in the graph"));
    }
    SECTION("groups that do not divide the channels") {
        auto g = small_cnn();
        g.node("/0/Conv")->mutable_attribute(1)->set_i(2);
        CHECK_THAT(refusal(g), Catch::Contains("node '/0/Conv' (Conv): groups 2 must divide the input channels (1)"));
    }
    SECTION("Gemm alpha and transA") {
        auto g = small_cnn();  // any finite alpha imports (a mul after the product: lowered_ops addmm)
        g.node("/4/Gemm")->mutable_attribute(0)->set_f(std::numeric_limits<float>::infinity());
        CHECK_THAT(refusal(g), Catch::Contains("node '/4/Gemm' (Gemm): alpha and beta must be finite numbers"));
        g = small_cnn();
        onnx_io::set_int(*g.node("/4/Gemm"), "transA", 1);
        CHECK_THAT(refusal(g), Catch::Contains("transA=1"));
    }
    SECTION("a missing initializer") {
        auto g = small_cnn();
        g.model.mutable_graph()->mutable_initializer()->DeleteSubrange(2, 1);
        CHECK_THAT(refusal(g), Catch::Contains("node '/4/Gemm' (Gemm): its input '4.weight' is not defined before it"));
    }
    SECTION("an unread second input, another opset, an input without fixed dims") {
        auto g = small_cnn();
        auto* extra = g.model.mutable_graph()->add_input();
        *extra = g.model.graph().input(0);
        extra->set_name("second");
        // Several inputs import (test/onnx/onnx_multi_input_test.cpp); one that no node reads is refused.
        CHECK_THAT(refusal(g), Catch::Contains("input \"second\" (inputs[1]) is read by no layer"));
        g = small_cnn(19);  // beyond what PyTorch's exporter writes today (11 to 18 import)
        CHECK_THAT(refusal(g), Catch::Contains("opset 19: the importer reads opsets 11 to 18"));
        g = small_cnn(10);
        CHECK_THAT(refusal(g), Catch::Contains("opset 10: the importer reads opsets 11 to 18"));
        for (const std::int64_t opset : {14, 15, 17, 18}) {
            INFO("opset " << opset);
            CHECK(onnx_io::import_onnx(small_cnn(opset).bytes(), "t.onnx"));
        }
        g = small_cnn();
        input_dim(g, 2)->set_dim_param("h");
        CHECK_THAT(refusal(g), Catch::Contains("input 'input': dimension 2 ('h') is symbolic: the engine trains "
                                               "inputs of one size past the batch, so export with dynamic_axes "
                                               "naming axis 0 alone (e.g. {'input': {0: 'N'}})"));
        input_dim(g, 2)->set_dim_value(0);
        CHECK_THAT(refusal(g), Catch::Contains("dimension 2 is not a fixed positive size"));
    }
}

TEST_CASE("damaged files are refused, never a crash", "[onnx]") {
    const std::string bytes = small_cnn().bytes();
    CHECK_THAT(onnx_io::import_onnx("", "e.onnx").error().message, Catch::Contains("not an ONNX model"));
    CHECK_THAT(onnx_io::import_onnx("{\"format\": 1}", "j.onnx").error().message, Catch::Contains("not an ONNX model"));
    int accepted = 0;
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        auto m = onnx_io::import_onnx(std::string_view(bytes).substr(0, n), "t.onnx");
        if (m) ++accepted;
        else CHECK(m.error().message.rfind("model t.onnx: ", 0) == 0);
    }
    CHECK(accepted == 0);
    std::string flipped = bytes;
    for (std::size_t i = 0; i < flipped.size(); i += 7) {
        flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
        (void)onnx_io::import_onnx(flipped, "t.onnx");
    }
    CHECK(onnx_io::import_onnx_file("/nonexistent/x.onnx").error().code == ErrorCode::kIo);
}
