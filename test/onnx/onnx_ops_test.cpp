// ONNX import and export of the tensor kinds (math, softmax, matmul, reductions, swish): a node
// as PyTorch 1.13 writes it at opset 13, inserted into test/onnx/onnx_test_graph.h's CNN, imports
// to the kind with its attributes; a description using the kind exports and imports back (without
// the embedded description, so the ONNX graph alone is read) to the same kinds and the same
// outputs. The layout ops and the lowerings: onnx_layout_ops_test.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "test/onnx/onnx_ops_test_util.h"
#include "test/onnx/onnx_test_graph.h"
#include "workerd/nn/model_description.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

using namespace psrun;
using namespace psrun::onnx_io::test;
using nlohmann::json;

TEST_CASE("Pow with a constant exponent and Erf import and round-trip", "[onnx][onnx_ops]") {
    auto g = small_cnn();
    // x ** 2 then erf, between the Relu and the pool, as PyTorch writes them (the exponent a
    // Constant node's scalar).
    auto* c = g.add_node("Constant", "/p/Constant", {}, "/p/Constant_output_0");
    auto* value = c->add_attribute();
    value->set_name("value");
    value->set_type(onnx::AttributeProto::TENSOR);
    value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    value->mutable_t()->add_float_data(2.0f);
    g.add_node("Pow", "/p/Pow", {"/1/Relu_output_0", "/p/Constant_output_0"}, "pow_out");
    g.add_node("Erf", "/e/Erf", {"pow_out"}, "erf_out");
    g.node("/2/MaxPool")->set_input(0, "erf_out");
    g.order(
        {"/0/Conv", "/1/Relu", "/p/Constant", "/p/Pow", "/e/Erf", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    const auto m = imported(g.bytes());
    CHECK(node_named(m, "/p/Pow").op == "pow");
    CHECK(node_named(m, "/p/Pow").attrs == json{{"exponent", 2.0}});
    CHECK(node_named(m, "/e/Erf").op == "erf");
    // A run-time exponent: the power kind, of the two values.
    auto run_time = g;
    run_time.node("/p/Pow")->set_input(1, "/0/Conv_output_0");
    CHECK(node_named(imported(run_time.bytes()), "/p/Pow").op == "power");
    // An exponent held in a float initializer is a parameter, as every float initializer read as
    // data: it trains (GeM pooling's p), so the power kind reads it.
    auto learned = g;
    onnx_io::add_float_tensor(*learned.model.mutable_graph(), "p", {1}, std::vector<float>{3.0f});
    learned.node("/p/Pow")->set_input(1, "p");
    const auto lm = imported(learned.bytes());
    CHECK(node_named(lm, "/p/Pow").op == "power");
    CHECK(std::any_of(lm.tensors.begin(), lm.tensors.end(),
                      [](const nn::TensorDef& t) { return t.name == "p" && t.cls == nn::TensorClass::kTrainable; }));

    check_round_trip({{{"kind", "pow"}, {"name", "p"}, {"exponent", 3.0}},
                      {{"kind", "erf"}, {"name", "e"}},
                      {{"kind", "flatten"}, {"name", "f"}}},
                     {2, 3});
    check_round_trip({{{"kind", "parameter"}, {"name", "q"}, {"shape", {3}}},
                      {{"kind", "abs"}, {"name", "a"}, {"inputs", {"input"}}},
                      {{"kind", "power"}, {"name", "w"}, {"inputs", {"a", "q"}}},
                      {{"kind", "flatten"}, {"name", "f"}}},
                     {2, 3});
}

TEST_CASE("Softmax and LogSoftmax mid-graph import with their axis; a final Softmax stays the loss's",
          "[onnx][onnx_ops]") {
    auto g = small_cnn();
    onnx_io::set_int(*g.add_node("Softmax", "/a/Softmax", {"/1/Relu_output_0"}, "sm_out"), "axis", 1);
    g.add_node("LogSoftmax", "/a/LogSoftmax", {"sm_out"}, "lsm_out");  // opset 13: axis -1
    g.node("/2/MaxPool")->set_input(0, "lsm_out");
    g.order({"/0/Conv", "/1/Relu", "/a/Softmax", "/a/LogSoftmax", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    const auto m = imported(g.bytes());
    CHECK(kinds(m) ==
          std::vector<std::string>{"conv2d", "relu", "softmax", "log_softmax", "max_pool", "flatten", "dense"});
    CHECK(node_named(m, "/a/Softmax").attrs == json{{"axis", 1}});
    CHECK(node_named(m, "/a/LogSoftmax").attrs == json{{"axis", -1}});
    // Opset 12's axis 1 flattens the dims after it: refused unless it is the last dim.
    auto old = g;
    old.model.mutable_opset_import(0)->set_version(12);
    CHECK_THAT(refusal(old), Catch::Contains("node '/a/Softmax' (Softmax): axis 1 at opset 12"));

    check_round_trip({{{"kind", "softmax"}, {"name", "s"}, {"axis", 1}},
                      {{"kind", "log_softmax"}, {"name", "l"}, {"axis", -1}},
                      {{"kind", "flatten"}, {"name", "f"}}},
                     {3, 4});
}

TEST_CASE("MatMul of two values (x @ x^T) imports as matmul; MatMul with a weight stays dense", "[onnx][onnx_ops]") {
    auto g = small_cnn();
    onnx_io::set_ints(*g.add_node("Transpose", "/t/Transpose", {"/1/Relu_output_0"}, "t_out"), "perm", {0, 1, 3, 2});
    g.add_node("MatMul", "/m/MatMul", {"/1/Relu_output_0", "t_out"}, "mm_out");
    g.node("/2/MaxPool")->set_input(0, "mm_out");
    g.order({"/0/Conv", "/1/Relu", "/t/Transpose", "/m/MatMul", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    const auto m = imported(g.bytes());
    CHECK(kinds(m) ==
          std::vector<std::string>{"conv2d", "relu", "transpose", "matmul", "max_pool", "flatten", "dense"});
    CHECK(m.value("/m/MatMul").dims ==
          nn::Dims{nn::Dim::batch_times(1), nn::Dim::of(2), nn::Dim::of(8), nn::Dim::of(8)});

    check_round_trip({{{"kind", "parameter"}, {"name", "w"}, {"shape", {2, 4, 3}}},
                      {{"kind", "matmul"}, {"name", "mm"}, {"inputs", {"input", "w"}}},
                      {{"kind", "flatten"}, {"name", "f"}}},
                     {1, 5, 4});
}

TEST_CASE("ReduceMean (axes attribute) and ReduceSum (axes input) import and round-trip", "[onnx][onnx_ops]") {
    auto g = small_cnn();
    // relu - mean over channels + sum over the last axis, both kept as 1s (broadcast back).
    auto* mean = g.add_node("ReduceMean", "/r/ReduceMean", {"/1/Relu_output_0"}, "mean_out");
    onnx_io::set_ints(*mean, "axes", {1});
    g.add_node("Sub", "/r/Sub", {"/1/Relu_output_0", "mean_out"}, "sub_out");
    g.add_int64_tensor("/r/axes", {1}, {-1});
    g.add_node("ReduceSum", "/r/ReduceSum", {"sub_out", "/r/axes"}, "sum_out");
    g.add_node("Add", "/r/Add", {"sub_out", "sum_out"}, "add_out");
    g.node("/2/MaxPool")->set_input(0, "add_out");
    g.order({"/0/Conv", "/1/Relu", "/r/ReduceMean", "/r/Sub", "/r/ReduceSum", "/r/Add", "/2/MaxPool", "/3/Flatten",
             "/4/Gemm", "/5/Softmax"});
    const auto m = imported(g.bytes());
    CHECK(node_named(m, "/r/ReduceMean").attrs == json{{"axes", {1}}, {"keepdims", true}});
    CHECK(node_named(m, "/r/ReduceSum").attrs == json{{"axes", {-1}}, {"keepdims", true}});
    // Without axes every dim, the batch's included, is reduced (a loss's mean): a value with
    // no batch axis, broadcast back here.
    g.node("/r/ReduceSum")->mutable_input()->RemoveLast();
    const auto every = imported(g.bytes());
    CHECK(node_named(every, "/r/ReduceSum").attrs == json{{"axes", {0, 1, 2, 3}}, {"keepdims", true}});
    CHECK(every.value(node_named(every, "/r/ReduceSum").outputs.front()).dims == nn::Dims(4, nn::Dim::of(1)));

    check_round_trip({{{"kind", "reduce_mean"}, {"name", "m"}, {"axes", {1}}, {"keepdims", true}},
                      {{"kind", "mul"}, {"name", "x"}, {"inputs", {"m", "input"}}},
                      {{"kind", "reduce_sum"}, {"name", "s"}, {"axes", {-1}}, {"keepdims", false}}},
                     {3, 4});
}

TEST_CASE("SiLU's Sigmoid + Mul imports as one swish; a sigmoid read elsewhere too stays apart", "[onnx][onnx_ops]") {
    auto g = small_cnn();
    // x * sigmoid(x) after the Relu, the Mul's inputs in either order, as nn.SiLU exports.
    g.add_node("Sigmoid", "/s/Sigmoid", {"/1/Relu_output_0"}, "sig_out");
    g.add_node("Mul", "/s/Mul", {"/1/Relu_output_0", "sig_out"}, "silu_out");
    g.node("/2/MaxPool")->set_input(0, "silu_out");
    g.order({"/0/Conv", "/1/Relu", "/s/Sigmoid", "/s/Mul", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    const auto m = imported(g.bytes());
    CHECK(kinds(m) == std::vector<std::string>{"conv2d", "relu", "swish", "max_pool", "flatten", "dense"});
    g.node("/s/Mul")->set_input(0, "sig_out");
    g.node("/s/Mul")->set_input(1, "/1/Relu_output_0");
    CHECK(kinds(imported(g.bytes())) ==
          std::vector<std::string>{"conv2d", "relu", "swish", "max_pool", "flatten", "dense"});
    // sigmoid(x) * conv(x): not SiLU.
    g.node("/s/Mul")->set_input(1, "/0/Conv_output_0");
    CHECK(kinds(imported(g.bytes())) ==
          std::vector<std::string>{"conv2d", "relu", "sigmoid", "mul", "max_pool", "flatten", "dense"});

    // swish exports as Sigmoid + Mul and comes back as swish with the same outputs.
    check_round_trip({{{"kind", "swish"}, {"name", "s"}}, {{"kind", "flatten"}, {"name", "f"}}}, {2, 3});
}
