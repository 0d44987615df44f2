// ONNX import and export of the tensor kinds (math, softmax, ...): a node as PyTorch 1.13 writes
// it at opset 13, inserted into test/onnx/onnx_test_graph.h's CNN, imports to the kind with its
// attributes; a description using the kind exports and imports back (without the embedded
// description, so the ONNX graph alone is read) to the same kinds and the same outputs. The
// lowered ops (onnx_lowerings.h) import to their layers with the same outputs, or refuse.
#include <catch2/catch.hpp>

#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "common/rng.h"
#include "test/onnx/onnx_test_graph.h"
#include "workerd/nn/model_description.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/onnx/onnx_lowerings.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

using namespace psrun;
using nlohmann::json;
using onnx_io::test::small_cnn;
using onnx_io::test::TestGraph;

namespace {

nn::ModelDescription imported(const std::string& bytes) {
    auto m = onnx_io::import_onnx(bytes, "t.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    return std::move(*m);
}

std::string refusal(const TestGraph& g) {
    auto m = onnx_io::import_onnx(g.bytes(), "t.onnx");
    REQUIRE_FALSE(m);
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
    auto bytes = onnx_io::export_onnx(model, params);
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

}  // namespace

TEST_CASE("Pow with a constant exponent and Erf import and round-trip", "[onnx][onnx_ops]") {
    auto g = small_cnn();
    // x ** 2 then erf, between the Relu and the pool, as PyTorch writes them (the exponent an
    // initializer-free Constant scalar is an initializer here).
    onnx_io::add_float_tensor(*g.model.mutable_graph(), "/p/Constant_output_0", {}, std::vector<float>{2.0f});
    g.add_node("Pow", "/p/Pow", {"/1/Relu_output_0", "/p/Constant_output_0"}, "pow_out");
    g.add_node("Erf", "/e/Erf", {"pow_out"}, "erf_out");
    g.node("/2/MaxPool")->set_input(0, "erf_out");
    g.order({"/0/Conv", "/1/Relu", "/p/Pow", "/e/Erf", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    const auto m = imported(g.bytes());
    CHECK(node_named(m, "/p/Pow").op == "pow");
    CHECK(node_named(m, "/p/Pow").attrs == json{{"exponent", 2.0}});
    CHECK(node_named(m, "/e/Erf").op == "erf");
    // A run-time exponent is refused.
    g.node("/p/Pow")->set_input(1, "/0/Conv_output_0");
    CHECK_THAT(refusal(g), Catch::Contains("node '/p/Pow' (Pow): the exponent must be a constant scalar"));

    check_round_trip({{{"kind", "pow"}, {"name", "p"}, {"exponent", 3.0}},
                      {{"kind", "erf"}, {"name", "e"}},
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

TEST_CASE("Split (sizes as an input) and Concat of values import and round-trip", "[onnx][onnx_ops]") {
    auto g = small_cnn();
    // The 32 features cut in 12 and 20 and joined the other way round before the Gemm.
    g.add_int64_tensor("/s/Constant_output_0", {2}, {12, 20});
    auto* split = g.add_node("Split", "/s/Split", {"/3/Flatten_output_0", "/s/Constant_output_0"}, "s0");
    split->add_output("s1");
    onnx_io::set_int(*split, "axis", 1);
    onnx_io::set_int(*g.add_node("Concat", "/c/Concat", {"s1", "s0"}, "cat_out"), "axis", 1);
    g.node("/4/Gemm")->set_input(0, "cat_out");
    g.order({"/0/Conv", "/1/Relu", "/2/MaxPool", "/3/Flatten", "/s/Split", "/c/Concat", "/4/Gemm", "/5/Softmax"});
    const auto m = imported(g.bytes());
    CHECK(node_named(m, "/s/Split").attrs == json{{"axis", 1}, {"sizes", {12, 20}}});
    CHECK(node_named(m, "/c/Concat").inputs == std::vector<std::string>{"/s/Split:1", "/s/Split"});
    // Sizes that do not add up are refused, naming the node.
    g.add_int64_tensor("/s/bad", {2}, {12, 21});
    g.node("/s/Split")->set_input(1, "/s/bad");
    CHECK_THAT(refusal(g), Catch::Contains("add up to 33"));

    check_round_trip({{{"kind", "split"}, {"name", "s"}, {"axis", -1}, {"sizes", {1, 3}}},
                      {{"kind", "tanh"}, {"name", "t"}, {"inputs", "s:1"}},
                      {{"kind", "concat"}, {"name", "c"}, {"inputs", {"t", "s", "input"}}, {"axis", 2}},
                      {{"kind", "flatten"}, {"name", "f"}}},
                     {3, 4});
}

TEST_CASE("Slice with constant bounds (x[:, :, 1:]) and a zero Pad import and round-trip", "[onnx][onnx_ops]") {
    auto g = small_cnn();
    const std::int64_t big = std::numeric_limits<std::int64_t>::max();
    g.add_int64_tensor("/x/starts", {2}, {1, 1});
    g.add_int64_tensor("/x/ends", {2}, {big, big});
    g.add_int64_tensor("/x/axes", {2}, {2, 3});
    g.add_int64_tensor("/x/steps", {2}, {1, 1});
    g.add_node("Slice", "/x/Slice", {"/1/Relu_output_0", "/x/starts", "/x/ends", "/x/axes", "/x/steps"}, "sl_out");
    g.add_int64_tensor("/x/pads", {8}, {0, 0, 1, 0, 0, 0, 0, 1});
    onnx_io::add_float_tensor(*g.model.mutable_graph(), "/x/value", {}, std::vector<float>{0.0f});
    set_string(*g.add_node("Pad", "/x/Pad", {"sl_out", "/x/pads", "/x/value"}, "pad_out"), "mode", "constant");
    g.node("/2/MaxPool")->set_input(0, "pad_out");
    g.order({"/0/Conv", "/1/Relu", "/x/Slice", "/x/Pad", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    const auto m = imported(g.bytes());
    CHECK(node_named(m, "/x/Slice").attrs ==
          json{{"axes", {2, 3}}, {"starts", {1, 1}}, {"ends", {8, 8}}, {"steps", {1, 1}}});
    CHECK(node_named(m, "/x/Pad").attrs == json{{"pads", {0, 0, 1, 0, 0, 0, 0, 1}}});
    // Reflect and edge padding (nn.ReflectionPad2d, nn.ReplicationPad2d) are a gather per padded
    // axis of the 7 x 7 slice: mirrored without the border entry, or the border entry repeated.
    auto reflect = g;
    set_string(*reflect.node("/x/Pad"), "mode", "reflect");
    const auto mirrored = imported(reflect.bytes());
    CHECK(node_named(mirrored, "/x/Pad").attrs == json{{"axis", 2}, {"indices", {1, 0, 1, 2, 3, 4, 5, 6}}});
    CHECK(node_named(mirrored, "/x/Pad_1").attrs == json{{"axis", 3}, {"indices", {0, 1, 2, 3, 4, 5, 6, 5}}});
    auto edge = g;
    set_string(*edge.node("/x/Pad"), "mode", "edge");
    const auto repeated = imported(edge.bytes());
    CHECK(node_named(repeated, "/x/Pad").attrs == json{{"axis", 2}, {"indices", {0, 0, 1, 2, 3, 4, 5, 6}}});
    CHECK(node_named(repeated, "/x/Pad_1").attrs == json{{"axis", 3}, {"indices", {0, 1, 2, 3, 4, 5, 6, 6}}});
    // Mirroring needs pads below the length; other modes are named.
    reflect.add_int64_tensor("/x/wide", {8}, {0, 0, 7, 0, 0, 0, 0, 1});
    reflect.node("/x/Pad")->set_input(1, "/x/wide");
    CHECK_THAT(refusal(reflect), Catch::Contains("node '/x/Pad' (Pad): mode \"reflect\" on axis 2 of length 7 pads 7 "
                                                 "and 0: each must be below the length"));
    edge.add_int64_tensor("/x/huge", {8}, {0, 0, 1, 0, 0, 0, 0, std::int64_t{1} << 40});
    edge.node("/x/Pad")->set_input(1, "/x/huge");
    CHECK_THAT(refusal(edge), Catch::Contains("mode \"edge\" on axis 3 would give more than 65536 entries"));
    auto odd = g;
    set_string(*odd.node("/x/Pad"), "mode", "circular");
    CHECK_THAT(refusal(odd),
               Catch::Contains("node '/x/Pad' (Pad): mode \"circular\" is none of constant, reflect, edge, wrap"));
    // A negative step reads from start down to end: from 1 up to INT64_MAX is empty, refused;
    // from -1 down to -INT64_MAX (x.flip(3)) is a slice of axis 2 and a gather of 7, 6, ..., 0.
    g.add_int64_tensor("/x/back", {2}, {1, -1});
    g.node("/x/Slice")->set_input(4, "/x/back");
    CHECK_THAT(refusal(g),
               Catch::Contains("node '/x/Slice' (Slice): axis 3 from 1 to 9223372036854775807 by -1 is empty"));
    g.add_int64_tensor("/x/flip_starts", {2}, {1, -1});
    g.add_int64_tensor("/x/flip_ends", {2}, {big, -big});
    g.node("/x/Slice")->set_input(1, "/x/flip_starts");
    g.node("/x/Slice")->set_input(2, "/x/flip_ends");
    const auto flipped = imported(g.bytes());
    CHECK(node_named(flipped, "/x/Slice").attrs ==
          json{{"axes", {2}}, {"starts", {1}}, {"ends", {big}}, {"steps", {1}}});
    CHECK(node_named(flipped, "/x/Slice_1").attrs == json{{"axis", 3}, {"indices", {7, 6, 5, 4, 3, 2, 1, 0}}});

    check_round_trip({{{"kind", "slice"}, {"name", "s"}, {"axes", {2}}, {"starts", {1}}, {"ends", {4}}, {"steps", {2}}},
                      {{"kind", "pad"}, {"name", "p"}, {"pads", {0, 1, 0, 0, 2, 1}}, {"value", 0.25}},
                      {{"kind", "flatten"}, {"name", "f"}}},
                     {3, 5});
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

TEST_CASE("Sin, Cos, Sign import and round-trip; SpaceToDepth then DepthToSpace (DCR) is the identity",
          "[onnx][onnx_ops][onnx_lowerings]") {
    auto g = small_cnn();
    const auto plain = imported(g.bytes());
    // SpaceToDepth(2) then DepthToSpace(2, DCR) between the Relu and the pool: [N, 2, 8, 8] ->
    // [N, 8, 4, 4] -> [N, 2, 8, 8], the same values: the same outputs as without them.
    onnx_io::set_int(*g.add_node("SpaceToDepth", "/s/SpaceToDepth", {"/1/Relu_output_0"}, "s2d_out"), "blocksize", 2);
    auto* d2s = g.add_node("DepthToSpace", "/d/DepthToSpace", {"s2d_out"}, "d2s_out");
    onnx_io::set_int(*d2s, "blocksize", 2);
    set_string(*d2s, "mode", "DCR");
    g.node("/2/MaxPool")->set_input(0, "d2s_out");
    g.order({"/0/Conv", "/1/Relu", "/s/SpaceToDepth", "/d/DepthToSpace", "/2/MaxPool", "/3/Flatten", "/4/Gemm",
             "/5/Softmax"});
    const auto m = imported(g.bytes());
    CHECK(node_named(m, "/s/SpaceToDepth_1").op == "transpose");
    CHECK(node_named(m, "/d/DepthToSpace_1").attrs == json{{"perm", {0, 3, 4, 1, 5, 2}}});
    const auto a = outputs(plain, *plain.initial_parameters, 3), b = outputs(m, *m.initial_parameters, 3);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == a[i]);
    // A mode ONNX does not define is refused naming it.
    set_string(*g.node("/d/DepthToSpace"), "mode", "XYZ");
    CHECK_THAT(refusal(g), Catch::Contains("node '/d/DepthToSpace' (DepthToSpace): mode 'XYZ' is none of DCR and CRD"));

    check_round_trip({{{"kind", "sin"}, {"name", "s"}},
                      {{"kind", "cos"}, {"name", "c"}},
                      {{"kind", "sign"}, {"name", "g"}},
                      {{"kind", "flatten"}, {"name", "f"}}},
                     {2, 3});
}

TEST_CASE(
    "ReduceProd of a shape folds at import (x.std's count); ArgMax mid-graph, Tile and CumSum of the batch "
    "are refused saying why",
    "[onnx][onnx_ops][onnx_lowerings]") {
    auto g = small_cnn();
    const auto plain = imported(g.bytes());
    // Flatten written as Reshape(x, Concat(Shape(x)[0:1], ReduceProd(Shape(x)[1:], keepdims))).
    g.add_node("Shape", "/r/Shape", {"/2/MaxPool_output_0"}, "shape");
    g.add_int64_tensor("zero", {1}, {0});
    g.add_int64_tensor("one", {1}, {1});
    g.add_int64_tensor("big", {1}, {100});
    g.add_node("Slice", "/r/Head", {"shape", "zero", "one"}, "head");
    g.add_node("Slice", "/r/Tail", {"shape", "one", "big"}, "tail");
    onnx_io::set_int(*g.add_node("ReduceProd", "/r/ReduceProd", {"tail"}, "count"), "keepdims", 1);
    onnx_io::set_int(*g.add_node("Concat", "/r/Concat", {"head", "count"}, "target"), "axis", 0);
    g.add_node("Reshape", "/r/Reshape", {"/2/MaxPool_output_0", "target"}, "flat");
    g.node("/4/Gemm")->set_input(0, "flat");
    g.order({"/0/Conv", "/1/Relu", "/2/MaxPool", "/r/Shape", "/r/Head", "/r/Tail", "/r/ReduceProd", "/r/Concat",
             "/r/Reshape", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    const auto m = imported(g.bytes());
    CHECK(node_named(m, "/r/Reshape").attrs == json{{"shape", {"N", 32}}});
    const auto a = outputs(plain, *plain.initial_parameters, 4), b = outputs(m, *m.initial_parameters, 4);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == a[i]);

    // ArgMax of the Relu's output, not the graph's final node.
    auto arg = small_cnn();
    onnx_io::set_int(*arg.add_node("ArgMax", "/a/ArgMax", {"/1/Relu_output_0"}, "ids"), "axis", 1);
    arg.add_node("Cast", "/a/Cast", {"ids"}, "idsf");
    onnx_io::set_int(*arg.node("/a/Cast"), "to", 1);
    arg.add_node("Mul", "/a/Mul", {"/1/Relu_output_0", "idsf"}, "scaled");
    arg.node("/2/MaxPool")->set_input(0, "scaled");
    arg.order(
        {"/0/Conv", "/1/Relu", "/a/ArgMax", "/a/Cast", "/a/Mul", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    CHECK_THAT(refusal(arg), Catch::Contains("node '/a/ArgMax' (ArgMax): ArgMax returns int64 indices, which training "
                                             "cannot differentiate through"));

    for (const std::string op : {"Tile", "CumSum"}) {
        auto t = small_cnn();
        if (op == "Tile") t.add_int64_tensor("reps", {4}, {2, 1, 1, 1});
        else t.add_int64_tensor("reps", {}, {0});
        t.add_node(op, "/t/" + op, {"/1/Relu_output_0", "reps"}, "tiled");
        t.node("/2/MaxPool")->set_input(0, "tiled");
        t.order({"/0/Conv", "/1/Relu", "/t/" + op, "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
        CHECK_THAT(refusal(t),
                   Catch::Contains(op == "Tile" ? "node '/t/Tile' (Tile): it repeats the batch axis 2 times"
                                                : "node '/t/CumSum' (CumSum): axis 0 of N x 2 x 8 x 8 is the "
                                                  "batch axis"));
    }
}

TEST_CASE("the fuzz dictionary names every op type the lowerings import", "[onnx][onnx_ops][onnx_lowerings]") {
    std::ifstream in("test/fuzz/onnx.dict");
    REQUIRE(in);
    std::set<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.insert(l);
    for (const auto op : onnx_io::lowered_onnx_ops()) {
        std::string entry = "\"";  // appended piecewise: GCC 12's -Wrestrict misfires on a + b + c
        entry += op;
        entry += '"';
        INFO("test/fuzz/onnx.dict lacks " << entry);
        CHECK(lines.count(entry) == 1);
    }
}
