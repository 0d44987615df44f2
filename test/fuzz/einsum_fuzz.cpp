// libFuzzer target for ONNX Einsum equations (workerd/nn/ops/einsum.h: parse_einsum and
// plan_einsum, the lowering the ONNX importer emits). Input: one byte of operand count (1 or 2,
// low bit), per operand a rank byte (0-6) and one byte per dim (1-4, the high bit of an
// operand's first dim byte: that dim is the batch N), then the equation text.
// Contract checked: never a crash or hang; a refusal has a message; an accepted plan refers only
// to values made before each step, every step's dims follow from its inputs by the kind's shape
// rule (transpose, reshape, reduce_sum, matmul, mul), no value exceeds rank 6, its output is the
// plan's dims, and planning again gives the same plan.
// Built and run by test/fuzz/fuzz.sh einsum.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "workerd/nn/ops/einsum.h"

namespace {

using psrun::nn::Dim;
using psrun::nn::Dims;

void require(bool ok) {
    if (!ok) __builtin_trap();
}

// Elements as (batch power, constant factor).
std::pair<int, std::int64_t> elements(const Dims& dims) {
    int power = 0;
    std::int64_t value = 1;
    for (const auto& d : dims) {
        power += d.batch ? 1 : 0;
        value *= d.value;
    }
    return {power, value};
}

// numpy broadcasting of two dims lists (right-aligned; 1 stretches).
Dims broadcast(const Dims& a, const Dims& b) {
    Dims out(std::max(a.size(), b.size()), Dim::of(1));
    for (std::size_t i = 0; i < out.size(); ++i) {
        const Dim x = i < a.size() ? a[a.size() - 1 - i] : Dim::of(1);
        const Dim y = i < b.size() ? b[b.size() - 1 - i] : Dim::of(1);
        require(x == y || x == Dim::of(1) || y == Dim::of(1));
        out[out.size() - 1 - i] = x == Dim::of(1) ? y : x;
    }
    return out;
}

void check_step(const psrun::nn::EinsumStep& s, const std::vector<Dims>& values) {
    require(!s.inputs.empty() && s.dims.size() <= 6);
    for (const auto i : s.inputs) require(i < values.size());
    const Dims& x = values[s.inputs[0]];
    if (s.kind == "transpose") {
        const auto perm = s.attrs.at("perm").get<std::vector<std::int64_t>>();
        require(perm.size() == x.size());
        Dims out;
        for (const auto p : perm) out.push_back(x.at(static_cast<std::size_t>(p)));
        require(out == s.dims);
    } else if (s.kind == "reshape") {
        require(s.attrs.at("shape").size() == s.dims.size() && elements(x) == elements(s.dims));
    } else if (s.kind == "reduce_sum") {
        const auto axes = s.attrs.at("axes").get<std::vector<std::int64_t>>();
        Dims out;
        for (std::size_t a = 0; a < x.size(); ++a)
            if (std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(a)) == axes.end()) out.push_back(x[a]);
        require(out == s.dims);
    } else if (s.kind == "matmul") {
        const Dims& y = values.at(s.inputs.at(1));
        require(x.size() >= 2 && y.size() >= 2 && x.back() == y[y.size() - 2] && !x.back().batch);
        Dims out = broadcast(Dims(x.begin(), x.end() - 2), Dims(y.begin(), y.end() - 2));
        out.push_back(x[x.size() - 2]);
        out.push_back(y.back());
        require(out == s.dims);
    } else if (s.kind == "mul") {
        require(broadcast(x, values.at(s.inputs.at(1))) == s.dims);
    } else {
        require(false);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    std::size_t at = 0;
    const std::size_t count = 1 + (data[at++] & 1);
    std::vector<Dims> operands(count);
    for (auto& dims : operands) {
        if (at >= size) return 0;
        const std::size_t rank = data[at++] % 7;
        for (std::size_t k = 0; k < rank; ++k) {
            if (at >= size) return 0;
            const std::uint8_t b = data[at++];
            dims.push_back(Dim{1 + (b & 3), k == 0 && (b & 0x80) != 0});
        }
    }
    const std::string_view equation(reinterpret_cast<const char*>(data + at), size - at);
    const auto plan = psrun::nn::plan_einsum(equation, operands);
    if (!plan) {
        require(!plan.error().message.empty());
        return 0;
    }
    std::vector<Dims> values = operands;
    for (const auto& s : plan->steps) {
        check_step(s, values);
        values.push_back(s.dims);
    }
    require(plan->result < values.size() && values[plan->result] == plan->dims);
    require(plan->steps.empty() || plan->result + 1 == values.size());
    const auto again = psrun::nn::plan_einsum(equation, operands);
    require(again && again->steps.size() == plan->steps.size() && again->dims == plan->dims);
    for (std::size_t i = 0; i < plan->steps.size(); ++i) require(again->steps[i].attrs == plan->steps[i].attrs);
    return 0;
}
