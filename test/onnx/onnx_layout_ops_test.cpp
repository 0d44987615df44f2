// ONNX import and export of the layout ops (Split, Concat, Slice, Pad) and of the lowered ops
// (onnx_lowerings.h: DepthToSpace, SpaceToDepth, ReduceProd of shapes, ArgMax mid-graph as a
// top_k, and the refusals of Tile and CumSum of the batch), as in onnx_ops_test.cpp: inserted into the test CNN,
// imported to their layers with the same outputs or refused naming why, and round-tripped.
#include <catch2/catch.hpp>

#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "test/onnx/onnx_ops_test_util.h"
#include "test/onnx/onnx_test_graph.h"
#include "workerd/nn/model_description.h"
#include "workerd/onnx/onnx_lowerings.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

using namespace psrun;
using namespace psrun::onnx_io::test;
using nlohmann::json;

namespace onnx_layout_ops_test {

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
    // The whole batch axis (torch's index_add writes x[0:INT64_MAX] on axis 0) leaves the slice;
    // any other cut of it is refused.
    auto whole = g;
    whole.add_int64_tensor("/x/starts3", {3}, {0, 1, 1});
    whole.add_int64_tensor("/x/ends3", {3}, {big, big, big});
    whole.add_int64_tensor("/x/axes3", {3}, {0, 2, 3});
    whole.add_int64_tensor("/x/steps3", {3}, {1, 1, 1});
    for (int i = 1; i <= 4; ++i)
        whole.node("/x/Slice")
            ->set_input(i, std::vector<std::string>{"", "/x/starts3", "/x/ends3", "/x/axes3",
                                                    "/x/steps3"}[static_cast<std::size_t>(i)]);
    CHECK(node_named(imported(whole.bytes()), "/x/Slice").attrs ==
          json{{"axes", {2, 3}}, {"starts", {1, 1}}, {"ends", {8, 8}}, {"steps", {1, 1}}});
    whole.add_int64_tensor("/x/starts_cut", {3}, {1, 1, 1});
    whole.node("/x/Slice")->set_input(1, "/x/starts_cut");
    CHECK_THAT(refusal(whole), Catch::Contains("node '/x/Slice' (Slice): axis 0 is the batch dim"));
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
    "ReduceProd of a shape folds at import (x.std's count); ArgMax mid-graph is a top_k; Tile and CumSum of "
    "the batch are refused saying why",
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
    const auto with_arg = imported(arg.bytes());
    CHECK(node_named(with_arg, "/a/ArgMax").op == "top_k");
    CHECK(node_named(with_arg, "/a/ArgMax").attrs == json{{"axis", 1}, {"k", 1}, {"largest", true}});
    onnx_io::set_int(*arg.node("/a/ArgMax"), "select_last_index", 1);
    CHECK_THAT(refusal(arg), Catch::Contains("node '/a/ArgMax' (ArgMax): select_last_index 1"));

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

TEST_CASE("a dilated max pool exports MaxPool's dilations and imports back", "[onnx][onnx_ops]") {
    check_round_trip({{{"kind", "max_pool"}, {"name", "p"}, {"window", 2}, {"stride", 1}, {"dilation", {2, 3}}},
                      {{"kind", "flatten"}, {"name", "f"}}},
                     {2, 7, 8});
}

}  // namespace onnx_layout_ops_test
