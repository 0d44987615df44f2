// The decompositions PyTorch's exporter writes for layers opset 13 has no operator for,
// recognised and imported as one fused layer (onnx_importer.h: import_pattern):
//   LayerNorm: m = ReduceMean(x, [-1]); d = Sub(x, m); v = ReduceMean(Pow(d, 2), [-1]);
//              y = Add(Mul(Div(d, Sqrt(Add(v, eps))), gamma), beta)          -> layer_norm
//   exact GELU: y = Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)             -> gelu
//   SiLU (nn.SiLU, x * torch.sigmoid(x)): y = Mul(x, Sigmoid(x)), either order -> swish
//   a linear layer on [..., F]: y = Add(MatMul(x, Transpose(W)), b)          -> dense
//   the same with W [F, U] as stored (TF's layout): MatMul(x, W) + b      -> transpose(W), dense
//   a Pad that pads nothing (PyTorch's AvgPool2d writes one before every AveragePool)
//                                                                           -> its input
// A pattern matches only where each inner value has its next node as its only reader.
#include <algorithm>
#include <cmath>

#include "workerd/nn/ops/normalization.h"
#include "workerd/onnx/pattern_matcher.h"

namespace psrun::onnx_io {

namespace {

class Matcher : public PatternMatcher {
  public:
    using PatternMatcher::PatternMatcher;

    // ReduceMean over the last axis of a rank-`rank` value, keeping it.
    // The axes are an attribute up to opset 17 and a constant second input from 18.
    bool reduces_last_axis(const onnx::NodeProto& n, std::size_t rank) const {
        auto keep = int_attr(n, "keepdims", 1);
        if (!keep || *keep != 1) return false;
        std::int64_t a = 0;
        if (n.input_size() >= 2 && !n.input(1).empty()) {
            const auto axis = scalar(n.input(1));
            if (!axis) return false;
            a = static_cast<std::int64_t>(*axis);
        } else {
            auto axes = ints_attr(n, "axes");
            if (!axes || !*axes || (*axes)->size() != 1) return false;
            a = (**axes)[0];
        }
        return a == -1 || a == static_cast<std::int64_t>(rank) - 1;
    }
};

Result<bool> layer_norm(Matcher& m, int i) {
    const auto& mean = m.node(i);
    if (mean.op_type() != "ReduceMean" || mean.input_size() < 1) return false;
    const std::string x = mean.input(0);
    const nn::ValueInfo* xi = m.im_.info(x);
    if (xi == nullptr || !m.reduces_last_axis(mean, xi->rank())) return false;
    const int sub = m.only_reader(mean.output(0), "Sub");
    if (sub < 0 || m.node(sub).input(0) != x || m.node(sub).input(1) != mean.output(0)) return false;
    const std::string d = m.node(sub).output(0);
    int pow = -1, div = -1;
    for (const int r : m.im_.graph().readers(d)) {
        if (m.node(r).op_type() == "Pow" && m.node(r).input(0) == d) pow = r;
        else if (m.node(r).op_type() == "Div" && m.node(r).input(0) == d) div = r;
        else return false;
    }
    if (pow < 0 || div < 0 || m.scalar(m.node(pow).input(1)) != 2.0) return false;
    const int var = m.only_reader(m.node(pow).output(0), "ReduceMean");
    if (var < 0 || !m.reduces_last_axis(m.node(var), xi->rank())) return false;
    const int add = m.only_reader(m.node(var).output(0), "Add");
    if (add < 0) return false;
    const auto eps = m.scalar(m.other(m.node(add), m.node(var).output(0)));
    const int sqrt = m.only_reader(m.node(add).output(0), "Sqrt");
    if (!eps || sqrt < 0 || m.node(div).input(1) != m.node(sqrt).output(0)) return false;
    const int mul = m.only_reader(m.node(div).output(0), "Mul");
    if (mul < 0) return false;
    const int add2 = m.only_reader(m.node(mul).output(0), "Add");
    if (add2 < 0) return false;
    const std::string gamma = m.other(m.node(mul), m.node(div).output(0));
    const std::string beta = m.other(m.node(add2), m.node(mul).output(0));
    if (gamma.empty() || beta.empty()) return false;
    // gamma and beta must be [F] (what nn.LayerNorm exports).
    for (const auto& v : {gamma, beta}) {
        const auto* t = m.im_.graph().initializer(v);
        if (t == nullptr || t->dims_size() != 1 || t->dims(0) != xi->dims.back().value) return false;
    }
    const std::string who = node_label(m.node(i), i) + " (LayerNorm)";
    PSRUN_TRY_ASSIGN(auto input, m.im_.data_value(x, who));
    auto scale = m.slot(gamma, who);
    auto bias = m.slot(beta, who);
    if (!scale || !bias) return tl::unexpected(!scale ? scale.error() : bias.error());
    const std::string name = m.node(add2).name().empty() ? m.node(add2).output(0) : m.node(add2).name();
    PSRUN_TRY_ASSIGN(auto out, m.im_.emit({{"kind", "layer_norm"},
                                           {"inputs", {input}},
                                           {"epsilon", nn::onnx_float(static_cast<float>(*eps))},
                                           {"tensors", {{"scale", *scale}, {"bias", *bias}}}},
                                          m.im_.unique_name(name), who));
    m.im_.bind(m.node(add2).output(0), out);
    for (const int n : {i, sub, pow, var, add, sqrt, div, mul, add2}) m.im_.consume(n);
    return true;
}

Result<bool> gelu(Matcher& m, int i) {
    const auto& div = m.node(i);
    if (div.op_type() != "Div" || div.input_size() != 2) return false;
    const auto root2 = m.scalar(div.input(1));
    if (!root2 || std::fabs(*root2 - std::sqrt(2.0)) > 1e-4) return false;
    const std::string x = div.input(0);
    const int erf = m.only_reader(div.output(0), "Erf");
    if (erf < 0) return false;
    const int add = m.only_reader(m.node(erf).output(0), "Add");
    if (add < 0 || m.scalar(m.other(m.node(add), m.node(erf).output(0))) != 1.0) return false;
    const int mul = m.only_reader(m.node(add).output(0), "Mul");
    if (mul < 0 || m.other(m.node(mul), m.node(add).output(0)) != x) return false;
    const int half = m.only_reader(m.node(mul).output(0), "Mul");
    if (half < 0 || m.scalar(m.other(m.node(half), m.node(mul).output(0))) != 0.5) return false;
    const std::string who = node_label(div, i) + " (GELU)";
    PSRUN_TRY_ASSIGN(auto input, m.im_.data_value(x, who));
    const auto& last = m.node(half);
    PSRUN_TRY_ASSIGN(auto out, m.im_.emit({{"kind", "gelu"}, {"inputs", {input}}, {"approximate", "none"}},
                                          m.im_.unique_name(last.name().empty() ? last.output(0) : last.name()), who));
    m.im_.bind(last.output(0), out);
    for (const int n : {i, erf, add, mul, half}) m.im_.consume(n);
    return true;
}

// One eltwise primitive (oneDNN's swish, forward and backward) instead of a sigmoid, a
// same-shape mul and the mul's two-sided backward.
Result<bool> silu(Matcher& m, int i) {
    const auto& sigmoid = m.node(i);
    if (sigmoid.op_type() != "Sigmoid" || sigmoid.input_size() != 1) return false;
    const std::string x = sigmoid.input(0);
    const nn::ValueInfo* xi = m.im_.info(x);
    if (xi == nullptr || xi->type != nn::ElementType::kFloat) return false;
    const int mul = m.only_reader(sigmoid.output(0), "Mul");
    if (mul < 0 || m.node(mul).input_size() != 2 || m.other(m.node(mul), sigmoid.output(0)) != x) return false;
    const std::string who = node_label(sigmoid, i) + " (SiLU)";
    PSRUN_TRY_ASSIGN(auto input, m.im_.data_value(x, who));
    const auto& last = m.node(mul);
    PSRUN_TRY_ASSIGN(auto out, m.im_.emit({{"kind", "swish"}, {"inputs", {input}}},
                                          m.im_.unique_name(last.name().empty() ? last.output(0) : last.name()), who));
    m.im_.bind(last.output(0), out);
    m.im_.consume(i);
    m.im_.consume(mul);
    return true;
}

Result<bool> linear(Matcher& m, int i) {
    const auto& t = m.node(i);
    if (t.op_type() != "Transpose" || t.input_size() != 1) return false;
    const auto* w = m.im_.graph().initializer(t.input(0));
    auto perm = ints_attr(t, "perm");
    if (w == nullptr || w->data_type() != onnx::TensorProto::FLOAT || w->dims_size() != 2 || !perm ||
        (*perm && **perm != std::vector<std::int64_t>{1, 0}))
        return false;
    const int mm = m.only_reader(t.output(0), "MatMul");
    if (mm < 0 || m.node(mm).input(1) != t.output(0)) return false;
    const std::string x = m.node(mm).input(0);
    const nn::ValueInfo* xi = m.im_.info(x);
    if (xi == nullptr || xi->rank() < 2 || xi->dims.back().value != w->dims(1) || xi->type != nn::ElementType::kFloat)
        return false;
    const std::string who = node_label(m.node(mm), mm) + " (linear)";
    int add = m.only_reader(m.node(mm).output(0), "Add");
    std::string bias;
    if (add >= 0) {
        bias = m.other(m.node(add), m.node(mm).output(0));
        const auto* b = m.im_.graph().initializer(bias);
        if (b == nullptr || b->data_type() != onnx::TensorProto::FLOAT || b->dims_size() != 1 ||
            b->dims(0) != w->dims(0)) {
            add = -1;
            bias.clear();
        }
    }
    PSRUN_TRY_ASSIGN(auto input, m.im_.data_value(x, who));
    nlohmann::json tensors = {{"w", m.im_.slot_tensor(t.input(0))}};
    if (add >= 0) tensors["b"] = m.im_.slot_tensor(bias);
    const auto& last = m.node(add >= 0 ? add : mm);
    nlohmann::json layer = {
        {"kind", "dense"}, {"inputs", {input}}, {"units", w->dims(0)}, {"bias", add >= 0}, {"tensors", tensors}};
    if (xi->rank() == 4) layer["last_axis"] = true;  // a 4-D input is not an image to flatten here
    PSRUN_TRY_ASSIGN(auto out, m.im_.emit(std::move(layer),
                                          m.im_.unique_name(last.name().empty() ? last.output(0) : last.name()), who));
    m.im_.bind(last.output(0), out);
    m.im_.consume(i);
    m.im_.consume(mm);
    if (add >= 0) m.im_.consume(add);
    return true;
}

// MatMul(x, W) + Add(b) with W a [F, U] initializer (TF's layout): the dense layer reads W
// transposed (a transpose layer on the parameter, so W keeps its name and layout).
Result<bool> linear_plain(Matcher& m, int i) {
    const auto& mm = m.node(i);
    if (mm.op_type() != "MatMul" || mm.input_size() != 2) return false;
    const auto* w = m.im_.graph().initializer(mm.input(1));
    const nn::ValueInfo* xi = m.im_.info(mm.input(0));
    if (w == nullptr || w->data_type() != onnx::TensorProto::FLOAT || w->dims_size() != 2 || xi == nullptr ||
        xi->rank() < 2 || xi->type != nn::ElementType::kFloat || xi->dims.back().value != w->dims(0))
        return false;
    const std::string who = node_label(mm, i) + " (linear)";
    int add = m.only_reader(mm.output(0), "Add");
    std::string bias;
    if (add >= 0) {
        bias = m.other(m.node(add), mm.output(0));
        const auto* b = m.im_.graph().initializer(bias);
        if (b == nullptr || b->data_type() != onnx::TensorProto::FLOAT || b->dims_size() != 1 ||
            b->dims(0) != w->dims(1)) {
            add = -1;
            bias.clear();
        }
    }
    PSRUN_TRY_ASSIGN(auto input, m.im_.data_value(mm.input(0), who));
    PSRUN_TRY_ASSIGN(auto weights, m.im_.data_value(mm.input(1), who));
    const auto& last = m.node(add >= 0 ? add : i);
    const std::string name = m.im_.unique_name(last.name().empty() ? last.output(0) : last.name());
    PSRUN_TRY_ASSIGN(auto transposed,
                     m.im_.emit({{"kind", "transpose"}, {"inputs", {weights}}, {"perm", {1, 0}}}, name + "/w_t", who));
    nlohmann::json tensors = {{"w", transposed}};
    if (add >= 0) tensors["b"] = m.im_.slot_tensor(bias);
    nlohmann::json layer = {
        {"kind", "dense"}, {"inputs", {input}}, {"units", w->dims(1)}, {"bias", add >= 0}, {"tensors", tensors}};
    if (xi->rank() == 4) layer["last_axis"] = true;
    PSRUN_TRY_ASSIGN(auto out, m.im_.emit(std::move(layer), name, who));
    m.im_.bind(last.output(0), out);
    m.im_.consume(i);
    if (add >= 0) m.im_.consume(add);
    return true;
}

// Pad with all pads 0 (from the pads input, opset >= 11, or the attribute before): no layer.
Result<bool> empty_pad(Matcher& m, int i) {
    const auto& n = m.node(i);
    if (n.op_type() != "Pad" || n.input_size() < 1) return false;
    std::optional<std::vector<std::int64_t>> pads;
    if (n.input_size() >= 2 && !n.input(1).empty()) {
        const Known* k = m.im_.known(n.input(1));
        if (k == nullptr) {
            const auto* t = m.im_.graph().initializer(n.input(1));
            if (t == nullptr) t = m.im_.graph().constant(n.input(1));
            if (t == nullptr) return false;
            auto c = known_from_tensor(*t);
            if (!c) return false;
            pads = c->plain_ints();
        } else {
            pads = k->plain_ints();
        }
    } else {
        auto a = ints_attr(n, "pads");
        if (!a || !*a) return false;
        pads = **a;
    }
    if (!pads || std::any_of(pads->begin(), pads->end(), [](std::int64_t p) { return p != 0; })) return false;
    PSRUN_TRY_ASSIGN(auto input, m.im_.data_value(n.input(0), node_label(n, i)));
    m.im_.bind(n.output(0), input);
    m.im_.consume(i);
    return true;
}

}  // namespace

Result<bool> import_pattern(Importer& importer, int i) {
    Matcher m(importer);
    if (auto group_norm = import_group_norm_pattern(importer, i); !group_norm || *group_norm) return group_norm;
    if (auto sorted = import_sort_permutation(importer, i); !sorted || *sorted) return sorted;
    for (auto* pattern : {layer_norm, gelu, silu, linear, linear_plain, empty_pad}) {
        auto matched = pattern(m, i);
        if (!matched || *matched) return matched;
    }
    return false;
}

}  // namespace psrun::onnx_io
