// ONNX Loop (workerd/onnx/onnx_inline_if.h: unroll_loop): test/onnx/onnx_test_graph.h's CNN with
// its Relu replaced by a Loop of a known trip count over the conv's output, carrying h = tanh(h)
// and scanning relu(h); its outputs against the same CNN with the three iterations written out
// by hand. Refused, naming the Loop: a body that computes its condition (a while loop), a trip
// count over the limit. ONNX sequences: SequenceAt of a known sequence, a position outside refused. torch's own
// scripted loops are test/onnx/lowered_ops_models.py's (scripted_loop, against torch).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "test/onnx/onnx_ops_test_util.h"
#include "test/onnx/onnx_test_graph.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

using namespace psrun;
using onnx_io::test::small_cnn;
using onnx_io::test::TestGraph;

namespace onnx_loop_test {

namespace {

const std::string kConv = "/0/Conv_output_0";

onnx::NodeProto* body_node(onnx::GraphProto& g, const std::string& op, const std::string& in, const std::string& out) {
    auto* n = g.add_node();
    n->set_op_type(op);
    n->set_name("/body/" + op);
    n->add_input(in);
    n->add_output(out);
    return n;
}

void set_int_attr(onnx::NodeProto& node, const std::string& name, std::int64_t v, bool list = false) {
    auto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(list ? onnx::AttributeProto::INTS : onnx::AttributeProto::INT);
    if (list) a->add_ints(v);
    else a->set_i(v);
}

// small_cnn whose Relu's place holds Loop(trips) over the conv output: h = tanh(h) carried,
// relu(h) scanned, then h + ReduceMean(scans, 0) for the MaxPool. `condition`: the body's
// condition output ("cond_in": passed through; anything else: computed by a Greater).
TestGraph cnn_with_loop(std::int64_t trips, const std::string& condition = "cond_in") {
    TestGraph g = small_cnn();
    g.add_int64_tensor("trips", {}, {trips});
    onnx::NodeProto* loop = g.node("/1/Relu");
    loop->set_op_type("Loop");
    loop->set_name("/loop");
    loop->clear_input();
    loop->clear_output();
    for (const auto* in : {"trips", "", kConv.c_str()}) TestGraph::add_input(*loop, in);
    loop->add_output("h_final");
    loop->add_output("scans");
    onnx::GraphProto body;
    body.set_name("body");
    for (const auto* in : {"i", "cond_in", "h_in"}) body.add_input()->set_name(in);
    body_node(body, "Tanh", "h_in", "h_next");
    body_node(body, "Relu", "h_in", "scan");
    if (condition == "cond_in") {
        body_node(body, "Identity", "cond_in", "cond_out");
    } else {  // a while loop: continue while the mean of h is positive
        body_node(body, "ReduceMean", "h_in", "m");
        body_node(body, "Cast", "m", "cond_out");
        set_int_attr(*body.mutable_node(body.node_size() - 1), "to", onnx::TensorProto::BOOL);
    }
    for (const auto* out : {"cond_out", "h_next", "scan"}) body.add_output()->set_name(out);
    auto* a = loop->add_attribute();
    a->set_name("body");
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = body;
    set_int_attr(*g.add_node("ReduceMean", "/mean", {"scans"}, "mean"), "keepdims", 0);
    set_int_attr(*g.node("/mean"), "axes", 0, true);
    g.add_node("Add", "/add", {"h_final", "mean"}, "/1/Relu_output_0");
    g.order({"/0/Conv", "/loop", "/mean", "/add", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    return g;
}

// The same, the three iterations written out: h3 + (relu(h0) + relu(h1) + relu(h2)) / 3.
TestGraph cnn_unrolled() {
    TestGraph g = small_cnn();
    onnx::NodeProto* first = g.node("/1/Relu");
    first->set_op_type("Tanh");
    first->set_name("/t1");
    first->set_output(0, "h1");
    g.add_node("Tanh", "/t2", {"h1"}, "h2");
    g.add_node("Tanh", "/t3", {"h2"}, "h3");
    g.add_node("Relu", "/r0", {kConv}, "s0");
    g.add_node("Relu", "/r1", {"h1"}, "s1");
    g.add_node("Relu", "/r2", {"h2"}, "s2");
    g.add_node("Add", "/sum01", {"s0", "s1"}, "s01");
    g.add_node("Add", "/sum", {"s01", "s2"}, "sum");
    onnx::TensorProto* third = g.model.mutable_graph()->add_initializer();
    third->set_name("third");
    third->set_data_type(onnx::TensorProto::FLOAT);
    third->add_float_data(1.0f / 3.0f);
    g.add_node("Mul", "/mean", {"sum", "third"}, "mean");
    g.add_node("Add", "/add", {"h3", "mean"}, "/1/Relu_output_0");
    g.order({"/0/Conv", "/t1", "/t2", "/t3", "/r0", "/r1", "/r2", "/sum01", "/sum", "/mean", "/add", "/2/MaxPool",
             "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    return g;
}

std::vector<std::string> kinds_of(const nn::ModelDescription& m) {
    std::vector<std::string> k;
    for (const auto& n : m.nodes) k.push_back(n.op);
    return k;
}

}  // namespace

TEST_CASE("a Loop of a known trip count imports as copies of its body: carried values and scans", "[onnx][loop]") {
    auto looped = onnx_io::import_onnx(cnn_with_loop(3).bytes(), "loop.onnx");
    INFO((looped ? std::string() : looped.error().message));
    REQUIRE(looped);
    const auto kinds = kinds_of(*looped);
    CHECK(std::count(kinds.begin(), kinds.end(), "tanh") == 3);
    CHECK(std::count(kinds.begin(), kinds.end(), "relu") == 3);
    auto unrolled = onnx_io::import_onnx(cnn_unrolled().bytes(), "unrolled.onnx");
    INFO((unrolled ? std::string() : unrolled.error().message));
    REQUIRE(unrolled);
    // The same conv and dense tensors (the unrolled graph's `third` is a constant, not trained).
    REQUIRE(looped->parameter_count + 1 == unrolled->parameter_count);
    const auto a = onnx_io::test::outputs(*looped, *looped->initial_parameters, 4);
    const auto b = onnx_io::test::outputs(*unrolled, *unrolled->initial_parameters, 4);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-5).margin(1e-6));
}

TEST_CASE("a Loop that computes its condition or runs too often is refused naming it", "[onnx][loop]") {
    auto refusal = [](const TestGraph& g) {
        auto m = onnx_io::import_onnx(g.bytes(), "t.onnx");
        REQUIRE_FALSE(m);
        return m.error().message;
    };
    CHECK_THAT(refusal(cnn_with_loop(3, "while")),
               Catch::Contains("node '/loop' (Loop)") && Catch::Contains("computes its condition"));
    CHECK_THAT(refusal(cnn_with_loop(5000)), Catch::Contains("runs 5000 times"));
    CHECK_THAT(refusal(cnn_with_loop(0)), Catch::Contains("runs 0 times"));
}

TEST_CASE("ONNX sequences known at import: SequenceAt picks an element, a position outside is refused",
          "[onnx][loop]") {
    // small_cnn's Relu reads SequenceAt(SequenceConstruct(conv, relu(conv)), at).
    auto with_at = [](std::int64_t at) {
        TestGraph g = small_cnn();
        g.node("/1/Relu")->set_output(0, "relu");
        g.add_node("SequenceConstruct", "/seq", {kConv, "relu"}, "seq");
        g.add_int64_tensor("at", {}, {at});
        g.add_node("SequenceAt", "/at", {"seq", "at"}, "/1/Relu_output_0");
        g.order({"/0/Conv", "/1/Relu", "/seq", "/at", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
        return onnx_io::import_onnx(g.bytes(), "t.onnx");
    };
    auto plain = onnx_io::import_onnx(small_cnn().bytes(), "plain.onnx");
    REQUIRE(plain);
    for (const std::int64_t at : {1, -1}) {
        auto m = with_at(at);
        INFO((m ? std::string() : m.error().message));
        REQUIRE(m);
        CHECK(kinds_of(*m) == kinds_of(*plain));  // the relu, as if the MaxPool read it directly
    }
    auto first = with_at(0);
    REQUIRE(first);
    // The max pool reads the conv itself.
    const auto& nodes = first->nodes;
    const auto pool = std::find_if(nodes.begin(), nodes.end(), [](const nn::Node& n) { return n.op == "max_pool"; });
    REQUIRE(pool != nodes.end());
    const auto conv = std::find_if(nodes.begin(), nodes.end(), [](const nn::Node& n) { return n.op == "conv2d"; });
    REQUIRE(conv != nodes.end());
    CHECK(pool->inputs[0] == conv->outputs[0]);
    auto outside = with_at(2);
    REQUIRE_FALSE(outside);
    CHECK_THAT(outside.error().message,
               Catch::Contains("node '/at' (SequenceAt)") && Catch::Contains("outside a sequence of 2"));
}

}  // namespace onnx_loop_test
