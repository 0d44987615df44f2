// ONNX Einsum (workerd/nn/ops/einsum.h): the equation parser (implicit and explicit outputs,
// spaces, "..."), the lowering plan's letter roles and steps, and an Einsum node imported into
// the test CNN (and refused, naming the node, op Einsum and the equation). The plan's numbers:
// onnx_einsum_numbers_test.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "test/onnx/onnx_test_graph.h"
#include "workerd/nn/model_description.h"
#include "workerd/nn/ops/einsum.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

using namespace psrun;
using nn::Dim;
using nn::Dims;
using nn::EinsumRole;

namespace {

const Dim N = Dim::batch_times(1);
Dim d(std::int64_t v) { return Dim::of(v); }

std::string parsed_output(const std::string& eq, std::size_t operands) {
    auto p = nn::parse_einsum(eq, operands);
    INFO(eq << ": " << (p ? "" : p.error().message));
    REQUIRE(p);
    return p->output;
}

std::string einsum_refusal(const std::string& eq, const std::vector<Dims>& dims) {
    auto p = nn::plan_einsum(eq, dims);
    INFO(eq);
    REQUIRE_FALSE(p);
    return p.error().message;
}

nn::EinsumPlan planned(const std::string& eq, const std::vector<Dims>& dims) {
    auto p = nn::plan_einsum(eq, dims);
    INFO(eq << ": " << (p ? "" : p.error().message));
    REQUIRE(p);
    return std::move(*p);
}

std::string roles(const nn::EinsumPlan& p) {
    std::string out;
    for (const auto& l : p.labels) out += (out.empty() ? "" : " ") + l.name + ":" + nn::to_string(l.role);
    return out;
}

std::vector<std::string> step_kinds(const nn::EinsumPlan& p) {
    std::vector<std::string> out;
    for (const auto& s : p.steps) out.push_back(s.label);
    return out;
}

void set_equation(onnx::NodeProto& node, const std::string& eq) {
    auto* a = node.add_attribute();
    a->set_name("equation");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(eq);
}

}  // namespace

TEST_CASE("Einsum equations parse: explicit and implicit outputs, spaces, ellipsis; bad ones are refused",
          "[onnx][einsum]") {
    CHECK(parsed_output("ij,jk", 2) == "ik");
    CHECK(parsed_output("bij,bjk", 2) == "ik");  // b is seen twice: summed (numpy's rule)
    CHECK(parsed_output("ba", 1) == "ab");
    CHECK(parsed_output("Ba,a", 2) == "B");  // ASCII order: capitals first
    CHECK(parsed_output("...ij,...jk", 2) == ".ik");
    CHECK(parsed_output(" b i j , b j k -> b i k ", 2) == "bik");
    CHECK(parsed_output("...d, de -> ...e", 2) == ".e");
    CHECK(parsed_output("bij->", 1).empty());
    auto refused = [](const std::string& eq, std::size_t n) {
        auto p = nn::parse_einsum(eq, n);
        INFO(eq);
        REQUIRE_FALSE(p);
        return p.error().message;
    };
    CHECK_THAT(refused("ii->i", 1), Catch::Contains("repeats 'i' within operand 0 ('ii'): a diagonal or trace"));
    CHECK_THAT(refused("bij,bjj->bi", 2), Catch::Contains("repeats 'j' within operand 1 ('bjj')"));
    CHECK_THAT(refused("ij->ii", 1), Catch::Contains("repeats 'i' within the output ('ii')"));
    CHECK_THAT(refused("ij->k", 1), Catch::Contains("output letter 'k' in no operand"));
    CHECK_THAT(refused("ij->...i", 1), Catch::Contains("\"...\" in the output but in no operand"));
    CHECK_THAT(refused("ij,jk->ik", 1), Catch::Contains("has 2 input terms for 1 operand"));
    CHECK_THAT(refused("ij->j->i", 1), Catch::Contains("more than one \"->\""));
    CHECK_THAT(refused("i.j->i", 1), Catch::Contains("a '.' outside \"...\""));
    CHECK_THAT(refused("...i...->i", 1), Catch::Contains("more than one \"...\""));
    CHECK_THAT(refused("i1->i", 1), Catch::Contains("has '1' in operand 0"));
    CHECK_THAT(refused("i\x01->i", 1), Catch::Contains("byte 0x01"));
    CHECK_THAT(refused(std::string(2000, 'a'), 1), Catch::Contains("characters long"));
}

TEST_CASE("the Einsum plan classifies each letter and lowers to matmul, mul, reduce_sum, transpose, reshape",
          "[onnx][einsum]") {
    const Dims q{N, d(2), d(4), d(8)};
    auto scores = planned("bhqd,bhkd->bhqk", {q, q});
    CHECK(roles(scores) == "b:batch h:batch q:left_free d:contracted k:right_free");
    CHECK(step_kinds(scores) == std::vector<std::string>{"b_transpose", "matmul"});
    CHECK(scores.dims == Dims{N, d(2), d(4), d(4)});
    auto context = planned("bhqk,bhkd->bhqd", {{N, d(2), d(4), d(4)}, q});
    CHECK(step_kinds(context) == std::vector<std::string>{"matmul"});
    auto linear = planned("bi,ij->bj", {{N, d(5)}, {d(5), d(3)}});
    CHECK(step_kinds(linear) == std::vector<std::string>{"matmul"});
    // The batch as operand 1's free letter: the operands swap, so it leads the matmul's rows.
    auto swapped = planned("ij,bjk->bik", {{d(4), d(5)}, {N, d(5), d(3)}});
    CHECK(roles(swapped) == "i:left_free j:contracted b:right_free k:right_free");
    CHECK(swapped.steps[1].label == "a_reshape");
    CHECK(swapped.steps[1].dims == Dims{Dim::batch_times(3), d(5)});
    CHECK(swapped.dims == Dims{N, d(4), d(3)});
    auto ellipsis = planned("...d,de->...e", {{N, d(3), d(8)}, {d(8), d(5)}});
    CHECK(roles(ellipsis) == "...0:left_free ...1:left_free d:contracted e:right_free");
    CHECK(step_kinds(ellipsis) == std::vector<std::string>{"a_reshape", "matmul", "out_reshape"});
    CHECK(ellipsis.dims == Dims{N, d(3), d(5)});
    auto dot = planned("bd,bd->b", {{N, d(8)}, {N, d(8)}});
    CHECK(step_kinds(dot) == std::vector<std::string>{"a_reshape", "b_reshape", "matmul", "out_reshape"});
    CHECK(dot.dims == Dims{N});
    auto summed = planned("bij,bk->bk", {{N, d(3), d(4)}, {N, d(5)}});
    CHECK(roles(summed) == "b:batch i:summed j:summed k:right_free");
    CHECK(step_kinds(summed).front() == "a_sum");
    auto hadamard = planned("bi,bi->bi", {{N, d(6)}, {N, d(6)}});
    CHECK(step_kinds(hadamard) == std::vector<std::string>{"mul"});
    auto transpose = planned("bij->bji", {{N, d(3), d(4)}});
    CHECK(step_kinds(transpose) == std::vector<std::string>{"transpose"});
    CHECK(transpose.steps[0].attrs == nlohmann::json{{"perm", {0, 2, 1}}});
    auto identity = planned("...ij->...ij", {{N, d(3), d(4)}});
    CHECK(identity.steps.empty());
    CHECK(identity.result == 0);
    auto reduce = planned("bij->bj", {{N, d(3), d(4)}});
    CHECK(reduce.steps[0].attrs == nlohmann::json{{"axes", {1}}, {"keepdims", false}});

    CHECK_THAT(einsum_refusal("bi,bi->i", {{N, d(4)}, {N, d(4)}}),
               Catch::Contains("sums over the batch axis ('b' is N)"));
    CHECK_THAT(einsum_refusal("bi->i", {{N, d(4)}}), Catch::Contains("sums over the batch axis"));
    CHECK_THAT(einsum_refusal("bij,bjk->bik", {{N, d(3), d(4)}, {N, d(5), d(6)}}),
               Catch::Contains("gives 'j' size 4 in operand 0 and 5 in operand 1"));
    CHECK_THAT(einsum_refusal("bij->bji", {{N, d(3)}}),
               Catch::Contains("gives operand 0 ('bij') 3 letters for its 2 dims"));
    CHECK_THAT(einsum_refusal("ij,jk,kl->il", {{d(2), d(2)}, {d(2), d(2)}, {d(2), d(2)}}),
               Catch::Contains("has 3 operands: a plan takes 1 or 2"));
    // Three or more operands chain as pairs, each result keeping what later terms read.
    auto chain = [](const std::string& eq, std::size_t operands) {
        auto parsed = nn::parse_einsum(eq, operands);
        REQUIRE(parsed);
        return nn::pairwise_einsum(*parsed);
    };
    CHECK(chain("bi,oij,bj->bo", 3) == std::vector<std::string>{"bi,oij->boj", "boj,bj->bo"});
    CHECK(chain("ij,jk,kl", 3) == std::vector<std::string>{"ij,jk->ik", "ik,kl->il"});
    CHECK(chain("...i,ij,jk->...k", 3) == std::vector<std::string>{"...i,ij->...j", "...j,jk->...k"});
    CHECK(chain("bi,ij,bj,j->b", 4) == std::vector<std::string>{"bi,ij->bj", "bj,bj->bj", "bj,j->b"});
    CHECK_THAT(einsum_refusal("abcdex,abcdexy->abcdey", {Dims(6, d(2)), Dims(7, d(2))}),
               Catch::Contains("at most 6 dims"));
}

TEST_CASE("an Einsum node imports as its lowering; a diagonal of unequal axes is refused naming the node",
          "[onnx][einsum]") {
    // A per-channel scale "nchw,c->nchw" (mul with a [C] weight broadcast) between the Relu and
    // the pool of the test CNN, then "nchw->nchw" (no layer at all).
    auto g = onnx_io::test::small_cnn();
    onnx_io::add_float_tensor(*g.model.mutable_graph(), "scale", {2}, std::vector<float>{0.5f, 2.0f});
    set_equation(*g.add_node("Einsum", "/e/Einsum", {"/1/Relu_output_0", "scale"}, "e_out"), "nchw,c->nchw");
    set_equation(*g.add_node("Einsum", "/e/Einsum_1", {"e_out"}, "e1_out"), "nchw->nchw");
    g.node("/2/MaxPool")->set_input(0, "e1_out");
    g.order({"/0/Conv", "/1/Relu", "/e/Einsum", "/e/Einsum_1", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    auto m = onnx_io::import_onnx(g.bytes(), "t.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    std::vector<std::string> kinds;
    for (const auto& n : m->nodes) kinds.push_back(n.op + " " + n.name);
    CHECK(kinds == std::vector<std::string>{"conv2d /0/Conv", "relu /1/Relu", "parameter scale_param",
                                            "reshape /e/Einsum/b_reshape", "mul /e/Einsum", "max_pool /2/MaxPool",
                                            "flatten /3/Flatten", "dense /4/Gemm"});

    auto diagonal = onnx_io::test::small_cnn();
    // A diagonal needs two axes of one size (onnx_einsum's diagonal network imports those).
    set_equation(*diagonal.add_node("Einsum", "/d/Einsum", {"/1/Relu_output_0"}, "d_out"), "ncch->nchh");
    diagonal.node("/2/MaxPool")->set_input(0, "d_out");
    diagonal.order({"/0/Conv", "/1/Relu", "/d/Einsum", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    auto refused = onnx_io::import_onnx(diagonal.bytes(), "t.onnx");
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message,
               Catch::Contains("node '/d/Einsum' (Einsum): equation \"ncch->nchh\": 'c' is repeated within an "
                               "operand over axes of sizes 2 and 8"));
    // More letters than the operand has axes (the fuzzer's find: the diagonal's second axis was
    // read past the operand's dims).
    set_equation(*diagonal.node("/d/Einsum"), "nchww->nchw");
    diagonal.node("/d/Einsum")->mutable_attribute()->DeleteSubrange(0, 1);
    auto long_term = onnx_io::import_onnx(diagonal.bytes(), "t.onnx");
    REQUIRE_FALSE(long_term);
    CHECK_THAT(long_term.error().message,
               Catch::Contains("equation \"nchww->nchw\": the operand term names 5 axes for an operand of rank 4"));
    // A contraction over the batch axis: refused before any layer is emitted.
    set_equation(*diagonal.node("/d/Einsum"), "nchw->chw");
    diagonal.node("/d/Einsum")->mutable_attribute()->DeleteSubrange(0, 1);
    auto batch = onnx_io::import_onnx(diagonal.bytes(), "t.onnx");
    REQUIRE_FALSE(batch);
    CHECK_THAT(batch.error().message,
               Catch::Contains("(Einsum): equation \"nchw->chw\" sums over the batch axis ('n' is N)"));
}
