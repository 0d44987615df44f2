// Split, Trilu, ScatterND, EyeLike and integer Mod/And/Or/Xor of known tensors at import
// (workerd/onnx/onnx_consts_select.cpp), against loops written here: Split by sizes (the input from opset 13, the
// attribute before) and into equal parts (opset 18's num_outputs, the last part smaller), along inner and outer axes;
// Trilu upper and lower with k of either sign, on floats and integers; malformed nodes refused.
#include <catch2/catch.hpp>

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "workerd/onnx/onnx_consts.h"

using namespace psrun;
using onnx_io::Known;

namespace {

Known ints(std::vector<std::int64_t> dims, const std::vector<std::int64_t>& values) {
    Known k;
    k.dims = std::move(dims);
    for (const auto v : values) k.i.push_back(nn::Dim{v});
    return k;
}

Known iota(std::vector<std::int64_t> dims) {
    std::int64_t n = 1;
    for (const auto d : dims) n *= d;
    Known k;
    k.dims = std::move(dims);
    k.is_float = true;
    for (std::int64_t e = 0; e < n; ++e) k.f.push_back(static_cast<double>(e));
    return k;
}

onnx::NodeProto node(const std::string& op, int outputs) {
    onnx::NodeProto n;
    n.set_op_type(op);
    n.set_name("n");
    for (int k = 0; k < outputs; ++k) n.add_output("o" + std::to_string(k));
    return n;
}

// Evaluates `n` with one named input per known value ("" for an absent optional one).
Result<std::optional<std::vector<Known>>> evaluate(onnx::NodeProto n, std::int64_t opset,
                                                   const std::vector<const Known*>& in) {
    n.clear_input();
    for (std::size_t k = 0; k < in.size(); ++k) n.add_input(in[k] ? "i" + std::to_string(k) : "");
    return onnx_io::evaluate(n, opset, in, nullptr);
}

std::vector<Known> run(const onnx::NodeProto& n, std::int64_t opset, const std::vector<const Known*>& in) {
    auto out = evaluate(n, opset, in);
    INFO((out ? std::string() : out.error().message));
    REQUIRE(out);
    REQUIRE(*out);
    return **out;
}

}  // namespace

TEST_CASE("Split of a known tensor by sizes and into equal parts", "[onnx][consts]") {
    const Known x = iota({2, 5, 3});
    auto n = node("Split", 2);
    onnx_io::set_int(n, "axis", 1);
    const Known sizes = ints({2}, {2, 3});
    auto parts = run(n, 13, {&x, &sizes});
    REQUIRE(parts.size() == 2);
    for (std::int64_t p = 0; p < 2; ++p) {
        const std::int64_t start = p == 0 ? 0 : 2, size = p == 0 ? 2 : 3;
        CHECK(parts[p].dims == std::vector<std::int64_t>{2, size, 3});
        std::vector<double> want;
        for (std::int64_t a = 0; a < 2; ++a)
            for (std::int64_t b = start; b < start + size; ++b)
                for (std::int64_t c = 0; c < 3; ++c) want.push_back(static_cast<double>(a * 15 + b * 3 + c));
        CHECK(parts[p].f == want);
    }
    // Opset 11: the sizes are an attribute; the same parts.
    auto old = node("Split", 2);
    onnx_io::set_int(old, "axis", -2);
    onnx_io::set_ints(old, "split", {2, 3});
    auto same = run(old, 11, {&x});
    CHECK(same[1].f == parts[1].f);
    // No sizes: 3 parts of the 5 rows are 2, 2 and 1 (opset 18's num_outputs).
    auto equal = node("Split", 3);
    onnx_io::set_int(equal, "axis", 1);
    auto thirds = run(equal, 18, {&x});
    CHECK(thirds[0].dims[1] == 2);
    CHECK(thirds[2].dims[1] == 1);
    CHECK(thirds[2].f == std::vector<double>{12, 13, 14, 27, 28, 29});
    // Integers (repeat_interleave's counts) keep their type.
    const Known counts = ints({4}, {2, 2, 2, 2});
    auto one = node("Split", 4);
    const Known ones = ints({4}, {1, 1, 1, 1});
    auto each = run(one, 13, {&counts, &ones});
    REQUIRE(each.size() == 4);
    CHECK_FALSE(each[3].is_float);
    CHECK(each[3].i.front().value == 2);
    // Sizes that do not add up, or do not match the outputs, are refused.
    const Known wrong = ints({2}, {2, 2});
    CHECK_FALSE(evaluate(n, 13, {&x, &wrong}));
    const Known three = ints({3}, {1, 1, 3});
    CHECK_FALSE(evaluate(n, 13, {&x, &three}));
}

TEST_CASE("Trilu of a known tensor keeps one triangle of the last two axes", "[onnx][consts]") {
    const Known x = iota({2, 3, 4});
    for (const int upper : {0, 1}) {
        for (const std::int64_t k : {-1, 0, 2}) {
            auto n = node("Trilu", 1);
            onnx_io::set_int(n, "upper", upper);
            const Known kk = ints({}, {k});
            auto out = run(n, 14, {&x, &kk});
            std::vector<double> want;
            for (std::int64_t b = 0; b < 2; ++b)
                for (std::int64_t r = 0; r < 3; ++r)
                    for (std::int64_t c = 0; c < 4; ++c) {
                        const bool keep = upper ? c - r >= k : c - r <= k;
                        want.push_back(keep ? static_cast<double>(b * 12 + r * 4 + c) : 0.0);
                    }
            INFO("upper " << upper << " k " << k);
            CHECK(out[0].f == want);
        }
    }
    // Integers, k absent (0), upper by default.
    const Known ones = ints({2, 2}, {1, 1, 1, 1});
    auto tri = run(node("Trilu", 1), 14, {&ones, nullptr});
    CHECK(tri[0].i[2].value == 0);
    CHECK(tri[0].i[3].value == 1);
    const Known row = iota({4});
    CHECK_FALSE(evaluate(node("Trilu", 1), 14, {&row}));
}

TEST_CASE("ScatterND and EyeLike of known tensors fold at import", "[onnx][onnx_consts]") {
    // Swin's mask: a [3, 4] buffer, rows 1.. of column 2 set to 7 (none) then +1 at (0, 0) (add).
    const Known data = iota({3, 4});
    const Known tuples = ints({2, 2}, {1, 2, -1, 2});
    const Known sevens = ints({2}, {7, 7});
    Known updates;
    updates.dims = {2};
    updates.is_float = true;
    updates.f = {7.0, 7.0};
    auto out = run(node("ScatterND", 1), 17, {&data, &tuples, &updates});
    std::vector<double> want = data.f;
    want[6] = want[10] = 7.0;
    CHECK(out[0].f == want);
    auto add = node("ScatterND", 1);
    auto* a = add.add_attribute();
    a->set_name("reduction");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s("add");
    const Known rows = ints({1, 1}, {0});
    Known ones;
    ones.dims = {1, 4};
    ones.is_float = true;
    ones.f = {1, 1, 1, 1};
    out = run(add, 16, {&data, &rows, &ones});
    want = data.f;
    for (int e = 0; e < 4; ++e) want[static_cast<std::size_t>(e)] += 1;
    CHECK(out[0].f == want);
    // Integers mixed with float updates, or a tuple outside the data: not folded / refused.
    CHECK_FALSE(*evaluate(node("ScatterND", 1), 17, {&data, &tuples, &sevens}));
    const Known outside = ints({1, 2}, {3, 0});
    CHECK_FALSE(evaluate(node("ScatterND", 1), 17, {&data, &outside, &ones}));

    auto eye = node("EyeLike", 1);
    auto* k = eye.add_attribute();
    k->set_name("k");
    k->set_type(onnx::AttributeProto::INT);
    k->set_i(-1);
    out = run(eye, 17, {&data});
    REQUIRE(out[0].dims == std::vector<std::int64_t>{3, 4});
    CHECK(out[0].f == std::vector<double>{0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0});
}

TEST_CASE("Mod, And, Or, Xor of known integers as ONNX says; integer arithmetic wraps", "[onnx][onnx_consts]") {
    // The floor division torch.div(a, b, rounding_mode="floor") is written as: Div, Mod, Less,
    // Xor, Not, And, Where; a U-Net's padding to its skip's size folds only when all do.
    const Known a = ints({4}, {-7, 7, -7, 7}), b = ints({4}, {2, 2, -2, -2});
    auto values = [](const Known& k) {
        std::vector<std::int64_t> v;
        for (const auto& d : k.i) v.push_back(d.value);
        return v;
    };
    CHECK(values(run(node("Mod", 1), 13, {&a, &b})[0]) == std::vector<std::int64_t>{1, 1, -1, -1});  // Python's %
    auto c_mod = node("Mod", 1);
    auto* f = c_mod.add_attribute();
    f->set_name("fmod");
    f->set_type(onnx::AttributeProto::INT);
    f->set_i(1);
    CHECK(values(run(c_mod, 13, {&a, &b})[0]) == std::vector<std::int64_t>{-1, 1, -1, 1});           // C's %
    CHECK(values(run(node("Div", 1), 13, {&a, &b})[0]) == std::vector<std::int64_t>{-3, 3, 3, -3});  // truncates
    const Known p = ints({4}, {0, 1, 0, 1}), q = ints({4}, {0, 0, 1, 1});
    CHECK(values(run(node("And", 1), 13, {&p, &q})[0]) == std::vector<std::int64_t>{0, 0, 0, 1});
    CHECK(values(run(node("Or", 1), 13, {&p, &q})[0]) == std::vector<std::int64_t>{0, 1, 1, 1});
    CHECK(values(run(node("Xor", 1), 13, {&p, &q})[0]) == std::vector<std::int64_t>{0, 1, 1, 0});
    // Float Mod: the divisor's sign (fmod 0), the dividend's (fmod 1); never a power.
    Known x;
    x.dims = {1};
    x.is_float = true;
    x.f = {-7.5};
    Known y = x;
    y.f = {2.0};
    CHECK(run(node("Mod", 1), 13, {&x, &y})[0].f == std::vector<double>{0.5});
    CHECK(run(c_mod, 13, {&x, &y})[0].f == std::vector<double>{-1.5});
    // int64 overflow wraps (two's complement) rather than being undefined.
    const Known big = ints({1}, {std::numeric_limits<std::int64_t>::max()}), one = ints({1}, {1});
    CHECK(values(run(node("Add", 1), 13, {&big, &one})[0]) ==
          std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min()});
}
