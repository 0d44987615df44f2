// plan_einsum (einsum.h): an Einsum equation on operands of known dims as a list of description
// layers (reduce_sum, transpose, reshape, matmul, mul), each with its output's dims, so that the
// importer only emits them and the tests can check the plan without ONNX.
#include <algorithm>
#include <optional>
#include <string>

#include "workerd/nn/ops/einsum.h"
#include "workerd/nn/shape.h"

namespace psrun::nn {

namespace {

constexpr std::size_t kEinsumMaxRank = 6;  // the engine's kinds take at most 6 dims

Error einsum_plan_error(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message)}; }

// The labels (indexes into the plan's labels) of a value, and its dims.
struct EinsumValue {
    std::size_t id = 0;
    std::vector<int> labels;
    Dims dims;
};

// The product of `dims` as one dim (a batch axis merged with others is kN); 1 when empty.
Result<Dim> einsum_merge(const Dims& dims) {
    Dim out = Dim::of(1);
    for (const auto& d : dims) {
        if (d.batch && out.batch) return tl::unexpected(einsum_plan_error("would merge the batch axis with itself"));
        const auto v = checked_product({out.value, d.value});
        if (!v) return tl::unexpected(einsum_plan_error("has dims too large to merge"));
        out = Dim{*v, out.batch || d.batch};
    }
    return out;
}

class EinsumLowering {
  public:
    EinsumLowering(EinsumPlan& plan, std::size_t operands) : plan_(plan), next_(operands) {}

    Result<EinsumValue> step(std::string kind, std::string label, const std::vector<const EinsumValue*>& inputs,
                             nlohmann::json attrs, std::vector<int> labels, Dims dims) {
        if (dims.size() > kEinsumMaxRank)
            return tl::unexpected(einsum_plan_error("needs a " + kind + " of rank " + std::to_string(dims.size()) +
                                                    " (the engine's kinds take at most 6 dims)"));
        EinsumStep s{std::move(kind), std::move(label), {}, std::move(attrs), dims};
        for (const auto* v : inputs) s.inputs.push_back(v->id);
        plan_.steps.push_back(std::move(s));
        return EinsumValue{next_++, std::move(labels), std::move(dims)};
    }

    // reduce_sum over the axes whose label `drop` marks.
    Result<EinsumValue> sum(const EinsumValue& v, const std::vector<bool>& drop, const std::string& label) {
        std::vector<std::int64_t> axes;
        EinsumValue out{0, {}, {}};
        for (std::size_t a = 0; a < v.labels.size(); ++a) {
            if (drop[static_cast<std::size_t>(v.labels[a])]) {
                axes.push_back(static_cast<std::int64_t>(a));
            } else {
                out.labels.push_back(v.labels[a]);
                out.dims.push_back(v.dims[a]);
            }
        }
        if (axes.empty()) return v;
        return step("reduce_sum", label, {&v}, {{"axes", axes}, {"keepdims", false}}, out.labels, out.dims);
    }

    // transpose to `order` (a permutation of v's labels); none when it is v's.
    Result<EinsumValue> permute(const EinsumValue& v, const std::vector<int>& order, const std::string& label) {
        if (order == v.labels) return v;
        std::vector<std::int64_t> perm;
        Dims dims;
        for (const int l : order) {
            const auto at = static_cast<std::size_t>(std::find(v.labels.begin(), v.labels.end(), l) - v.labels.begin());
            perm.push_back(static_cast<std::int64_t>(at));
            dims.push_back(v.dims[at]);
        }
        return step("transpose", label, {&v}, {{"perm", perm}}, order, dims);
    }

    // reshape to `dims`; none when they are v's.
    Result<EinsumValue> reshape(const EinsumValue& v, Dims dims, std::vector<int> labels, const std::string& label) {
        if (dims == v.dims) return EinsumValue{v.id, std::move(labels), v.dims};
        nlohmann::json shape = nlohmann::json::array();
        for (const auto& d : dims) shape.push_back(d.batch ? nlohmann::json(d.to_string()) : nlohmann::json(d.value));
        return step("reshape", label, {&v}, {{"shape", shape}}, std::move(labels), std::move(dims));
    }

  private:
    EinsumPlan& plan_;
    std::size_t next_;
};

// The dims of `v` for the labels `which` (each one of v's).
Dims einsum_dims_of(const EinsumValue& v, const std::vector<int>& which) {
    Dims out;
    for (const int l : which)
        out.push_back(
            v.dims[static_cast<std::size_t>(std::find(v.labels.begin(), v.labels.end(), l) - v.labels.begin())]);
    return out;
}

}  // namespace

Result<EinsumPlan> plan_einsum(std::string_view equation, const std::vector<Dims>& operands) {
    if (operands.empty() || operands.size() > 2)
        return tl::unexpected(einsum_plan_error("has " + std::to_string(operands.size()) +
                                                " operands: a plan takes 1 or 2 (pairwise_einsum chains more)"));
    PSRUN_TRY_ASSIGN(auto eq, parse_einsum(equation, operands.size()));
    // How many dims each operand's "..." covers; the ellipsis labels are right-aligned.
    std::vector<std::size_t> covered(operands.size(), 0);
    std::size_t ellipsis = 0;
    for (std::size_t i = 0; i < operands.size(); ++i) {
        const auto& term = eq.inputs[i];
        const bool has = term.find('.') != std::string::npos;
        const std::size_t letters = term.size() - (has ? 1 : 0);
        if (operands[i].size() < letters || (!has && operands[i].size() != letters))
            return tl::unexpected(einsum_plan_error(
                "gives operand " + std::to_string(i) + " ('" + term + "') " + std::to_string(letters) +
                " letters for its " + std::to_string(operands[i].size()) + " dims (" + to_string(operands[i]) + ")"));
        covered[i] = operands[i].size() - letters;
        ellipsis = std::max(ellipsis, covered[i]);
    }
    EinsumPlan plan;
    std::vector<std::vector<std::optional<Dim>>> sizes;  // per label, per operand
    auto label_of = [&](const std::string& name) {
        for (std::size_t l = 0; l < plan.labels.size(); ++l)
            if (plan.labels[l].name == name) return static_cast<int>(l);
        plan.labels.push_back(EinsumLabel{name, EinsumRole::kBatch, Dim::of(1)});
        sizes.emplace_back(operands.size());
        return static_cast<int>(plan.labels.size() - 1);
    };
    auto expand = [&](const std::string& term, std::size_t cover) {
        std::vector<int> ids;
        for (const char c : term) {
            if (c != '.') {
                ids.push_back(label_of(std::string(1, c)));
                continue;
            }
            for (std::size_t k = ellipsis - cover; k < ellipsis; ++k)
                ids.push_back(label_of("..." + std::to_string(k)));
        }
        return ids;
    };
    std::vector<EinsumValue> values;
    for (std::size_t i = 0; i < operands.size(); ++i) {
        values.push_back(EinsumValue{i, expand(eq.inputs[i], covered[i]), operands[i]});
        for (std::size_t a = 0; a < operands[i].size(); ++a)
            sizes[static_cast<std::size_t>(values[i].labels[a])][i] = operands[i][a];
    }
    const std::vector<int> out_labels = expand(eq.output, ellipsis);
    std::vector<bool> in_output(plan.labels.size(), false);
    for (const int l : out_labels) in_output[static_cast<std::size_t>(l)] = true;
    for (std::size_t l = 0; l < plan.labels.size(); ++l) {
        auto& label = plan.labels[l];
        const auto& s = sizes[l];
        const bool in0 = s[0].has_value(), in1 = s.size() > 1 && s[1].has_value();
        label.size = in0 ? *s[0] : *s[1];
        if (in0 && in1 && *s[0] != *s[1]) {
            if (!(*s[0] == Dim::of(1) || *s[1] == Dim::of(1)))
                return tl::unexpected(einsum_plan_error("gives '" + label.name + "' size " + s[0]->to_string() +
                                                        " in operand 0 and " + s[1]->to_string() + " in operand 1"));
            label.size = *s[0] == Dim::of(1) ? *s[1] : *s[0];
        }
        if (in0 && in1)
            label.role =
                in_output[l] ? EinsumRole::kBatch : (*s[0] == *s[1] ? EinsumRole::kContracted : EinsumRole::kSummed);
        else if (!in_output[l]) label.role = EinsumRole::kSummed;
        else label.role = in0 ? EinsumRole::kLeftFree : EinsumRole::kRightFree;
        const bool summed = label.role == EinsumRole::kSummed || label.role == EinsumRole::kContracted;
        if (label.size.batch && summed && (operands.size() == 2 || !out_labels.empty()))
            return tl::unexpected(einsum_plan_error("sums over the batch axis ('" + label.name + "' is " +
                                                    label.size.to_string() + "): each example must stay apart"));
    }
    for (const int l : out_labels) plan.dims.push_back(plan.labels[static_cast<std::size_t>(l)].size);
    EinsumLowering lower(plan, operands.size());
    std::vector<bool> drop(plan.labels.size(), false);
    for (std::size_t l = 0; l < plan.labels.size(); ++l) drop[l] = plan.labels[l].role == EinsumRole::kSummed;
    auto role_of = [&](int l) { return plan.labels[static_cast<std::size_t>(l)].role; };
    auto size_of = [&](int l) { return plan.labels[static_cast<std::size_t>(l)].size; };
    auto finish = [&](Result<EinsumValue> v) -> Result<EinsumPlan> {
        if (!v) return tl::unexpected(v.error());
        plan.result = v->id;
        return std::move(plan);
    };
    if (operands.size() == 1) {
        PSRUN_TRY_ASSIGN(auto v, lower.sum(values[0], drop, "sum"));
        return finish(lower.permute(v, out_labels, "transpose"));
    }
    // The model's batch axis leads the matmul's rows: operand 0's free labels.
    auto batch_in = [&](EinsumRole r) {
        return std::any_of(out_labels.begin(), out_labels.end(),
                           [&](int l) { return role_of(l) == r && size_of(l).batch; });
    };
    const bool swap = batch_in(EinsumRole::kRightFree) && !batch_in(EinsumRole::kLeftFree);
    const EinsumRole left = swap ? EinsumRole::kRightFree : EinsumRole::kLeftFree;
    const EinsumRole right = swap ? EinsumRole::kLeftFree : EinsumRole::kRightFree;
    PSRUN_TRY_ASSIGN(auto a, lower.sum(values[swap ? 1 : 0], drop, "a_sum"));
    PSRUN_TRY_ASSIGN(auto b, lower.sum(values[swap ? 0 : 1], drop, "b_sum"));
    std::vector<int> batch, free_a, free_b, contracted;
    for (const int l : out_labels) {
        if (role_of(l) == EinsumRole::kBatch) batch.push_back(l);
        if (role_of(l) == left) free_a.push_back(l);
        if (role_of(l) == right) free_b.push_back(l);
    }
    for (const int l : a.labels)
        if (role_of(l) == EinsumRole::kContracted) contracted.push_back(l);
    if (contracted.empty()) {
        // An element-wise product: each operand in the output's order, 1s where it lacks a label.
        for (auto* v : {&a, &b}) {
            std::vector<int> order;
            for (const int l : out_labels)
                if (std::find(v->labels.begin(), v->labels.end(), l) != v->labels.end()) order.push_back(l);
            auto moved = lower.permute(*v, order, v == &a ? "a_transpose" : "b_transpose");
            if (!moved) return tl::unexpected(moved.error());
            Dims target;
            for (const int l : out_labels) {
                const bool has = std::find(order.begin(), order.end(), l) != order.end();
                if (has || !target.empty()) target.push_back(has ? einsum_dims_of(*moved, {l})[0] : Dim::of(1));
            }
            PSRUN_TRY_ASSIGN(auto shaped, order.empty()
                                              ? moved
                                              : lower.reshape(*moved, target, {}, v == &a ? "a_reshape" : "b_reshape"));
            *v = shaped;
        }
        return finish(lower.step("mul", "mul", {&a, &b}, nlohmann::json::object(), out_labels, plan.dims));
    }
    // A matmul: [batch..., M, K] x [batch..., K, P] with M, K, P the merged free and contracted dims.
    auto operand = [&](const EinsumValue& v, const std::vector<int>& first, const std::vector<int>& second,
                       const std::string& side) -> Result<EinsumValue> {
        std::vector<int> order = batch;
        order.insert(order.end(), first.begin(), first.end());
        order.insert(order.end(), second.begin(), second.end());
        PSRUN_TRY_ASSIGN(auto moved, lower.permute(v, order, side + "_transpose"));
        Dims target = einsum_dims_of(moved, batch);
        for (const auto* group : {&first, &second}) {
            PSRUN_TRY_ASSIGN(auto merged, einsum_merge(einsum_dims_of(moved, *group)));
            target.push_back(merged);
        }
        return lower.reshape(moved, target, {}, side + "_reshape");
    };
    PSRUN_TRY_ASSIGN(auto ma, operand(a, free_a, contracted, "a"));
    PSRUN_TRY_ASSIGN(auto mb, operand(b, contracted, free_b, "b"));
    Dims product, unmerged;
    std::vector<int> order = batch;
    for (const int l : batch) product.push_back(size_of(l));
    unmerged = product;
    for (const auto* group : {&free_a, &free_b}) {
        Dims d;
        for (const int l : *group) d.push_back(size_of(l));
        PSRUN_TRY_ASSIGN(auto merged, einsum_merge(d));
        product.push_back(merged);
        unmerged.insert(unmerged.end(), d.begin(), d.end());
        order.insert(order.end(), group->begin(), group->end());
    }
    PSRUN_TRY_ASSIGN(auto m, lower.step("matmul", "matmul", {&ma, &mb}, nlohmann::json::object(), {}, product));
    if (order.empty())  // a scalar: [1, 1] summed to rank 0
        return finish(lower.step("reduce_sum", "out_sum", {&m}, {{"axes", {0, 1}}, {"keepdims", false}}, {}, {}));
    PSRUN_TRY_ASSIGN(auto split, lower.reshape(m, unmerged, order, "out_reshape"));
    return finish(lower.permute(split, out_labels, "out_transpose"));
}

}  // namespace psrun::nn
