// ONNX Einsum (workerd/nn/ops/einsum.h): the equation parser (implicit and explicit outputs,
// spaces, "..."), the lowering plan's letter roles and steps, the plan run on doubles against a
// naive einsum for many equations (broadcast ellipsis, sums, outer and element-wise products,
// the batch as a free letter of either operand), and an Einsum node imported into the test CNN
// (and refused, naming the node, op Einsum and the equation).
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "common/rng.h"
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

// A dense row-major tensor of doubles.
struct Tensor {
    std::vector<std::int64_t> shape;
    std::vector<double> v;
};

std::int64_t count(const std::vector<std::int64_t>& s) {
    return std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
}

// Calls f(index) for every index of `shape`, in row-major order.
void each_index(const std::vector<std::int64_t>& shape, const std::function<void(const std::vector<std::int64_t>&)>& f) {
    std::vector<std::int64_t> i(shape.size(), 0);
    for (std::int64_t n = 0; n < count(shape); ++n) {
        f(i);
        for (std::size_t a = shape.size(); a-- > 0;)
            if (++i[a] < shape[a]) break;
            else i[a] = 0;
    }
}

// The offset of `index` in `shape`, numpy-broadcast: `index` may be longer (leading entries
// dropped) and a dim of 1 reads entry 0.
std::int64_t offset(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& index) {
    std::int64_t o = 0;
    const std::size_t skip = index.size() - shape.size();
    for (std::size_t a = 0; a < shape.size(); ++a) o = o * shape[a] + (shape[a] == 1 ? 0 : index[skip + a]);
    return o;
}

// One plan step on doubles, as the engine's kind computes it.
Tensor run_step(const nn::EinsumStep& s, const std::vector<const Tensor*>& in, std::int64_t batch) {
    Tensor out{nn::concrete(s.dims, batch), {}};
    out.v.assign(static_cast<std::size_t>(count(out.shape)), 0.0);
    const Tensor& x = *in[0];
    if (s.kind == "reshape") {
        out.v = x.v;
    } else if (s.kind == "transpose") {
        const auto perm = s.attrs.at("perm").get<std::vector<std::int64_t>>();
        std::size_t k = 0;
        each_index(out.shape, [&](const std::vector<std::int64_t>& i) {
            std::vector<std::int64_t> src(i.size());
            for (std::size_t a = 0; a < perm.size(); ++a) src[static_cast<std::size_t>(perm[a])] = i[a];
            out.v[k++] = x.v[static_cast<std::size_t>(offset(x.shape, src))];
        });
    } else if (s.kind == "reduce_sum") {
        const auto axes = s.attrs.at("axes").get<std::vector<std::int64_t>>();
        std::size_t k = 0;
        each_index(x.shape, [&](const std::vector<std::int64_t>& i) {
            std::vector<std::int64_t> kept;
            for (std::size_t a = 0; a < i.size(); ++a)
                if (std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(a)) == axes.end()) kept.push_back(i[a]);
            out.v[static_cast<std::size_t>(offset(out.shape, kept))] += x.v[k++];
        });
    } else if (s.kind == "mul") {
        std::size_t k = 0;
        each_index(out.shape, [&](const std::vector<std::int64_t>& i) {
            out.v[k++] = x.v[static_cast<std::size_t>(offset(x.shape, i))] *
                         in[1]->v[static_cast<std::size_t>(offset(in[1]->shape, i))];
        });
    } else if (s.kind == "matmul") {
        const Tensor& y = *in[1];
        const std::int64_t inner = x.shape.back();
        std::size_t k = 0;
        each_index(out.shape, [&](const std::vector<std::int64_t>& i) {
            double sum = 0;
            for (std::int64_t j = 0; j < inner; ++j) {
                auto xi = i, yi = i;
                xi.back() = j;
                yi[yi.size() - 2] = j;
                sum += x.v[static_cast<std::size_t>(offset(x.shape, xi))] * y.v[static_cast<std::size_t>(offset(y.shape, yi))];
            }
            out.v[k++] = sum;
        });
    } else {
        FAIL("unknown step kind " << s.kind);
    }
    return out;
}

// The plan of `eq` run on random operands of `dims` at batch 2 against a naive einsum over every
// assignment of the labels.
void check_numbers(const std::string& eq, const std::vector<Dims>& dims) {
    INFO(eq);
    const auto plan = planned(eq, dims);
    const std::int64_t batch = 2;
    psrun::Rng rng(11);
    std::vector<Tensor> values;
    for (const auto& dd : dims) {
        Tensor t{nn::concrete(dd, batch), {}};
        for (std::int64_t i = 0; i < count(t.shape); ++i) t.v.push_back(2.0 * rng.uniform() - 1.0);
        values.push_back(std::move(t));
    }
    for (const auto& s : plan.steps) {
        std::vector<const Tensor*> in;
        for (const auto i : s.inputs) in.push_back(&values.at(i));
        values.push_back(run_step(s, in, batch));
    }
    const Tensor& got = values.at(plan.result);
    REQUIRE(got.shape == nn::concrete(plan.dims, batch));
    // The reference: labels by name; each operand's axes and the output's map to labels.
    const auto eqp = nn::parse_einsum(eq, dims.size());
    REQUIRE(eqp);
    std::vector<std::string> names;
    for (const auto& l : plan.labels) names.push_back(l.name);
    std::vector<std::int64_t> extent;
    for (const auto& l : plan.labels) extent.push_back(l.size.at(batch));
    auto axes_of = [&](const std::string& term, std::size_t rank) {
        std::vector<std::size_t> out;
        const std::size_t covered = rank - (term.size() - (term.find('.') == std::string::npos ? 0 : 1));
        std::size_t ellipsis = 0;
        for (const auto& n : names) ellipsis += n.rfind("...", 0) == 0;
        for (const char c : term) {
            if (c != '.') {
                out.push_back(static_cast<std::size_t>(std::find(names.begin(), names.end(), std::string(1, c)) - names.begin()));
                continue;
            }
            for (std::size_t k = ellipsis - covered; k < ellipsis; ++k)
                out.push_back(static_cast<std::size_t>(std::find(names.begin(), names.end(), "..." + std::to_string(k)) - names.begin()));
        }
        return out;
    };
    std::vector<std::vector<std::size_t>> operand_axes;
    for (std::size_t i = 0; i < dims.size(); ++i) operand_axes.push_back(axes_of(eqp->inputs[i], dims[i].size()));
    std::size_t ellipsis = 0;
    for (const auto& n : names) ellipsis += n.rfind("...", 0) == 0;
    const auto out_axes = axes_of(eqp->output, plan.dims.size());
    std::vector<double> want(got.v.size(), 0.0);
    each_index(extent, [&](const std::vector<std::int64_t>& at) {
        double p = 1;
        for (std::size_t i = 0; i < dims.size(); ++i) {
            std::vector<std::int64_t> idx;
            for (const auto l : operand_axes[i]) idx.push_back(at[l]);
            p *= values[i].v[static_cast<std::size_t>(offset(values[i].shape, idx))];
        }
        std::vector<std::int64_t> o;
        for (const auto l : out_axes) o.push_back(at[l]);
        want[static_cast<std::size_t>(offset(got.shape, o))] += p;
    });
    // A label summed from a dim of 1 in every operand adds its one term once: the same.
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(got.v[i] == Approx(want[i]).margin(1e-12));
}

void set_equation(onnx::NodeProto& node, const std::string& eq) {
    auto* a = node.add_attribute();
    a->set_name("equation");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(eq);
}

}  // namespace

TEST_CASE("Einsum equations parse: explicit and implicit outputs, spaces, ellipsis; bad ones are refused", "[onnx][einsum]") {
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

TEST_CASE("the Einsum plan classifies each letter and lowers to matmul, mul, reduce_sum, transpose, reshape", "[onnx][einsum]") {
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

    CHECK_THAT(einsum_refusal("bi,bi->i", {{N, d(4)}, {N, d(4)}}), Catch::Contains("sums over the batch axis ('b' is N)"));
    CHECK_THAT(einsum_refusal("bi->i", {{N, d(4)}}), Catch::Contains("sums over the batch axis"));
    CHECK_THAT(einsum_refusal("bij,bjk->bik", {{N, d(3), d(4)}, {N, d(5), d(6)}}),
               Catch::Contains("gives 'j' size 4 in operand 0 and 5 in operand 1"));
    CHECK_THAT(einsum_refusal("bij->bji", {{N, d(3)}}), Catch::Contains("gives operand 0 ('bij') 3 letters for its 2 dims"));
    CHECK_THAT(einsum_refusal("ij,jk,kl->il", {{d(2), d(2)}, {d(2), d(2)}, {d(2), d(2)}}),
               Catch::Contains("has 3 operands: the importer lowers 1 or 2"));
    CHECK_THAT(einsum_refusal("abcdex,abcdexy->abcdey", {Dims(6, d(2)), Dims(7, d(2))}), Catch::Contains("at most 6 dims"));
}

TEST_CASE("the Einsum plan computes what a naive einsum computes", "[onnx][einsum]") {
    const std::vector<std::pair<std::string, std::vector<Dims>>> cases = {
        {"bhqd,bhkd->bhqk", {{N, d(2), d(3), d(4)}, {N, d(2), d(5), d(4)}}},
        {"bhqk,bhkd->bhqd", {{N, d(2), d(3), d(5)}, {N, d(2), d(5), d(4)}}},
        {"bij,jk->bik", {{N, d(3), d(4)}, {d(4), d(5)}}},
        {"bi,ij->bj", {{N, d(4)}, {d(4), d(3)}}},
        {"ij,bjk->bik", {{d(3), d(4)}, {N, d(4), d(2)}}},
        {"kj,bij->bki", {{d(3), d(4)}, {N, d(2), d(4)}}},
        {"...d,de->...e", {{N, d(3), d(4)}, {d(4), d(2)}}},
        {"...ij,...jk->...ik", {{N, d(1), d(3), d(4)}, {d(2), d(4), d(2)}}},  // broadcast batch letters
        {"bd,bd->b", {{N, d(5)}, {N, d(5)}}},
        {"bi,bj->bij", {{N, d(3)}, {N, d(4)}}},
        {"bi,j->bji", {{N, d(3)}, {d(4)}}},
        {"bij,bk->bk", {{N, d(3), d(4)}, {N, d(5)}}},
        {"bij,bjk", {{N, d(3), d(4)}, {N, d(4), d(2)}}},  // implicit "ik" sums b: refused, below
        {"bjd,bjd->bd", {{N, d(3), d(1)}, {N, d(3), d(4)}}},
        {"bij,bj->bi", {{N, d(3), d(1)}, {N, d(4)}}},  // j: 1 against 4, summed in both
        {"bij->bji", {{N, d(3), d(4)}}},
        {"bij->bj", {{N, d(3), d(4)}}},
        {"...ij->...ji", {{N, d(2), d(3), d(4)}}},
        {"bij->", {{N, d(3), d(4)}}},
        {"Bi,iJ->BJ", {{N, d(3)}, {d(3), d(2)}}},
    };
    for (const auto& [eq, dims] : cases) {
        if (eq == "bij,bjk") {
            CHECK_THAT(einsum_refusal(eq, dims), Catch::Contains("sums over the batch axis"));
            continue;
        }
        check_numbers(eq, dims);
    }
}

TEST_CASE("an Einsum node imports as its lowering; a diagonal is refused naming the node and the equation", "[onnx][einsum]") {
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
    CHECK(kinds == std::vector<std::string>{"conv2d /0/Conv", "relu /1/Relu", "parameter scale_param", "reshape /e/Einsum/b_reshape",
                                            "mul /e/Einsum", "max_pool /2/MaxPool", "flatten /3/Flatten", "dense /4/Gemm"});

    auto diagonal = onnx_io::test::small_cnn();
    set_equation(*diagonal.add_node("Einsum", "/d/Einsum", {"/1/Relu_output_0"}, "d_out"), "nchh->nch");
    diagonal.node("/2/MaxPool")->set_input(0, "d_out");
    diagonal.order({"/0/Conv", "/1/Relu", "/d/Einsum", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    auto refused = onnx_io::import_onnx(diagonal.bytes(), "t.onnx");
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message,
               Catch::Contains("node '/d/Einsum' (Einsum): equation \"nchh->nch\" repeats 'h' within operand 0 ('nchh'): "
                               "a diagonal or trace"));
    // A contraction over the batch axis: refused before any layer is emitted.
    set_equation(*diagonal.node("/d/Einsum"), "nchw->chw");
    diagonal.node("/d/Einsum")->mutable_attribute()->DeleteSubrange(0, 1);
    auto batch = onnx_io::import_onnx(diagonal.bytes(), "t.onnx");
    REQUIRE_FALSE(batch);
    CHECK_THAT(batch.error().message, Catch::Contains("(Einsum): equation \"nchw->chw\" sums over the batch axis ('n' is N)"));
}
