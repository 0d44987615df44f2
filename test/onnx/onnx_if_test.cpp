// ONNX If (workerd/onnx/onnx_inline_if.h): test/onnx/onnx_test_graph.h's CNN with its Relu
// replaced by an If on the conv output's channel count, as torch.onnx writes x.squeeze(d) for a
// dim it lost: the taken branch imports as if it had been written in the graph (then or else,
// nested Ifs, branch values named like the graph's own, a branch that returns an outer value);
// a condition computed from the data imports as both branches and a where; one from the batch
// size, a branch of the wrong arity, and a graph of too many Ifs are refused naming the node.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "test/onnx/onnx_ops_test_util.h"
#include "test/onnx/onnx_test_graph.h"
#include "workerd/nn/model_description.h"
#include "workerd/onnx/onnx_inline_if.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

using namespace psrun;
using onnx_io::test::refusal;
using onnx_io::test::small_cnn;
using onnx_io::test::TestGraph;

namespace onnx_if_test {

namespace {

// A branch graph: `op` (Relu, Tanh, ...) of `input` named `output`, or no node when op is empty
// (the branch returns `input` itself).
onnx::GraphProto branch(const std::string& op, const std::string& input, const std::string& output) {
    onnx::GraphProto g;
    g.set_name(op.empty() ? "identity" : op);
    if (!op.empty()) {
        auto* n = g.add_node();
        n->set_op_type(op);
        n->set_name("/1/" + op);
        n->add_input(input);
        n->add_output(output);
    }
    g.add_output()->set_name(op.empty() ? input : output);
    return g;
}

void set_graph(onnx::NodeProto& node, const std::string& name, const onnx::GraphProto& g) {
    auto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = g;
}

// small_cnn with its Relu node replaced by If(Shape(`of`)[axis] == equal_to, then, else), whose
// output the MaxPool reads.
TestGraph cnn_with_if(const onnx::GraphProto& then_branch, const onnx::GraphProto& else_branch, std::int64_t equal_to,
                      const std::string& of = "/0/Conv_output_0", std::int64_t axis = 1) {
    TestGraph g = small_cnn();
    g.node("/1/Relu")->set_op_type("Shape");
    g.node("/1/Relu")->clear_input();
    TestGraph::add_input(*g.node("/1/Relu"), of);
    g.node("/1/Relu")->set_output(0, "shape");
    g.node("/1/Relu")->set_name("/shape");
    g.add_int64_tensor("axis", {}, {axis});
    g.add_int64_tensor("size", {}, {equal_to});
    g.add_node("Gather", "/gather", {"shape", "axis"}, "dim");
    g.add_node("Equal", "/equal", {"dim", "size"}, "cond");
    auto* node = g.add_node("If", "/if", {"cond"}, "/1/Relu_output_0");
    set_graph(*node, "then_branch", then_branch);
    set_graph(*node, "else_branch", else_branch);
    g.order({"/0/Conv", "/shape", "/gather", "/equal", "/if", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    return g;
}

std::vector<std::string> kinds(const TestGraph& g) {
    auto m = onnx_io::import_onnx(g.bytes(), "t.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    std::vector<std::string> k;
    for (const auto& n : m->nodes) k.push_back(n.op);
    return k;
}

const std::string kConv = "/0/Conv_output_0";

}  // namespace

TEST_CASE("an If whose condition is a known shape imports as its taken branch", "[onnx][if]") {
    const auto plain = kinds(small_cnn());
    // The conv has 2 channels: Shape[1] == 2 takes the then branch (the Relu), == 3 the else.
    CHECK(kinds(cnn_with_if(branch("Relu", kConv, "relu"), branch("Tanh", kConv, "tanh"), 2)) == plain);
    auto other = kinds(cnn_with_if(branch("Relu", kConv, "relu"), branch("Tanh", kConv, "tanh"), 3));
    CHECK(std::count(other.begin(), other.end(), "tanh") == 1);
    CHECK(std::count(other.begin(), other.end(), "relu") == 0);
    // A branch that returns an outer value itself (torch's Identity without the node).
    auto none = kinds(cnn_with_if(branch("Relu", kConv, "relu"), branch("", kConv, ""), 3));
    CHECK(std::count(none.begin(), none.end(), "relu") == 0);
    CHECK(none.size() + 1 == plain.size());
}

TEST_CASE("a branch's values may share names with the graph's own and Ifs nest", "[onnx][if]") {
    // The then branch names its output as the graph names the Flatten's (ONNX scopes allow it
    // only in files that do not pass the checker, yet the rename keeps them apart).
    const auto plain = kinds(small_cnn());
    CHECK(kinds(cnn_with_if(branch("Relu", kConv, "/3/Flatten_output_0"), branch("Tanh", kConv, "t"), 2)) == plain);
    // An If inside the then branch, on a constant condition, whose then branch is the Relu.
    onnx::GraphProto outer;
    outer.set_name("outer");
    auto* c = outer.add_node();
    c->set_op_type("Constant");
    c->add_output("inner_cond");
    auto* t = c->add_attribute();
    t->set_name("value");
    t->set_type(onnx::AttributeProto::TENSOR);
    t->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
    t->mutable_t()->add_int32_data(1);
    auto* inner = outer.add_node();
    inner->set_op_type("If");
    inner->set_name("/inner_if");
    inner->add_input("inner_cond");
    inner->add_output("inner_out");
    set_graph(*inner, "then_branch", branch("Relu", kConv, "relu"));
    set_graph(*inner, "else_branch", branch("Sigmoid", kConv, "sigmoid"));
    outer.add_output()->set_name("inner_out");
    CHECK(kinds(cnn_with_if(outer, branch("Tanh", kConv, "tanh"), 2)) == plain);
}

TEST_CASE("an If on the data imports as both branches and a where of its condition", "[onnx][if]") {
    TestGraph data = small_cnn();
    data.add_node("ReduceMax", "/max", {kConv}, "m");
    data.add_node("Cast", "/cast", {"m"}, "cond");
    onnx_io::set_int(*data.node("/cast"), "to", onnx::TensorProto::BOOL);
    auto* node = data.add_node("If", "/if", {"cond"}, "relu_or_tanh");
    set_graph(*node, "then_branch", branch("Relu", kConv, "relu"));
    set_graph(*node, "else_branch", branch("Tanh", kConv, "tanh"));
    data.node("/2/MaxPool")->set_input(0, "relu_or_tanh");
    data.order({"/0/Conv", "/1/Relu", "/max", "/cast", "/if", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    auto model = onnx_io::import_onnx(data.bytes(), "if.onnx");
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    const auto& nodes = model->nodes;
    const auto where = std::find_if(nodes.begin(), nodes.end(), [](const nn::Node& n) { return n.op == "where"; });
    REQUIRE(where != nodes.end());
    CHECK(where->name == "/if/select_output_0");
    // Its inputs: the condition, the then branch's value (relu), the else branch's (tanh).
    REQUIRE(where->inputs.size() == 3);
    const auto op_of = [&nodes](const std::string& value) {
        for (const auto& n : nodes)
            if (std::find(n.outputs.begin(), n.outputs.end(), value) != n.outputs.end()) return n.op;
        return std::string();
    };
    CHECK(op_of(where->inputs[1]) == "relu");
    CHECK(op_of(where->inputs[2]) == "tanh");
    CHECK(op_of(where->inputs[0]) == "not");  // the Cast to bool: not(m == 0)
}

TEST_CASE("an If the import cannot decide or inline is refused naming it", "[onnx][if]") {
    // Shape[0] is the batch size: == 1 is true for some batches only (the Equal computing the
    // condition is where the import finds that out).
    auto batch = refusal(cnn_with_if(branch("Relu", kConv, "relu"), branch("Tanh", kConv, "t"), 1, kConv, 0));
    CHECK_THAT(batch, Catch::Contains("node '/equal' (Equal)") && Catch::Contains("depends on the batch size"));
    // A taken branch of two outputs for an If of one.
    auto two = branch("Relu", kConv, "relu");
    two.add_output()->set_name(kConv);
    CHECK_THAT(refusal(cnn_with_if(two, branch("Tanh", kConv, "t"), 2)),
               Catch::Contains("then_branch has 2 outputs where the If has 1"));
    // A taken branch that is missing.
    TestGraph missing = cnn_with_if(branch("Relu", kConv, "relu"), branch("Tanh", kConv, "t"), 3);
    missing.node("/if")->mutable_attribute()->RemoveLast();
    CHECK_THAT(refusal(missing), Catch::Contains("no graph attribute 'else_branch'"));
}

TEST_CASE("a graph of more Ifs than the import inlines is refused", "[onnx][if]") {
    // kMaxInlinedIfs + 1 Ifs in a chain, each on the channel count, each a branch that passes
    // the value through.
    TestGraph g = cnn_with_if(branch("Relu", kConv, "relu"), branch("Tanh", kConv, "t"), 2);
    std::vector<std::string> order = {"/0/Conv", "/shape", "/gather", "/equal", "/if"};
    std::string value = "/1/Relu_output_0";
    for (int k = 0; k < onnx_io::kMaxInlinedIfs; ++k) {
        const std::string out = "chain_" + std::to_string(k);
        auto* node = g.add_node("If", "/chain" + std::to_string(k), {"cond"}, out);
        set_graph(*node, "then_branch", branch("", value, ""));
        set_graph(*node, "else_branch", branch("", value, ""));
        order.push_back(node->name());
        value = out;
    }
    g.node("/2/MaxPool")->set_input(0, value);
    for (const auto* n : {"/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"}) order.push_back(n);
    g.order(order);
    CHECK_THAT(refusal(g),
               Catch::Contains("more than " + std::to_string(onnx_io::kMaxInlinedIfs) + " If and Loop nodes"));
}

}  // namespace onnx_if_test
