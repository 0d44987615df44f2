// PyTorch's nn.GroupNorm before opset 18 (symbolic_opset9.group_norm), recognised as one
// group_norm layer (onnx_importer.h: import_group_norm_pattern):
//   g = Reshape(x, [0, G, -1]); n = InstanceNormalization(g, ones [G], zeros [G], eps);
//   r = Reshape(n, Shape(x)); y = Add(Mul(r, Unsqueeze(weight, [1, ...])), Unsqueeze(bias, [1, ...]))
// weight and bias (float initializers of [C], bound by name so that exported weights load back
// into torch) or constant ones and zeros (affine=False: no scale or bias); the Mul and the Add
// are each optional. InstanceNormalization with per-group float initializers instead of the
// constants (psrun's export of "affine": "group") imports as such, without Mul or Add.
// Where the graph differs, the nodes import one by one (reshape, group_norm, reshape, mul, add),
// which computes the same.
#include <algorithm>
#include <optional>

#include "workerd/nn/ops/normalization.h"
#include "workerd/onnx/pattern_matcher.h"

namespace psrun::onnx_io {

namespace {

class NormMatcher : public PatternMatcher {
  public:
    using PatternMatcher::PatternMatcher;

    // Known floats, `size` of them, all equal to `v`.
    bool all_equal(const std::string& value, std::int64_t size, double v) const {
        if (is_tensor(value)) return false;
        const auto k = constant(value);
        return k && k->is_float && !k->symbolic_dims && static_cast<std::int64_t>(k->f.size()) == size &&
               std::all_of(k->f.begin(), k->f.end(), [&](double f) { return f == v; });
    }
    // An Unsqueeze's axes (input or, before opset 13, attribute).
    std::optional<std::vector<std::int64_t>> unsqueeze_axes(const onnx::NodeProto& n) const {
        if (n.input_size() >= 2) {
            const auto k = constant(n.input(1));
            return k ? k->plain_ints() : std::nullopt;
        }
        auto a = ints_attr(n, "axes");
        if (!a || !*a) return std::nullopt;
        return **a;
    }
};

// One affine operand of the decomposition: Unsqueeze(t, [1 .. rank-2]) of a [C] float
// initializer (bound) or of constants equal to `neutral`, [C] or [1] (dropped).
struct Operand {
    int unsqueeze = -1;
    bool on = false;
    std::string tensor;  // the initializer
};

// `value` is read by `reader` (op type `op`) alone.
std::optional<Operand> affine_operand(const NormMatcher& m, const std::string& value, const std::string& op,
                                      std::size_t rank, std::int64_t channels, double neutral) {
    const int u = value.empty() ? -1 : m.im_.graph().producer(value);
    if (u < 0 || m.node(u).op_type() != "Unsqueeze" || m.only_reader(value, op) < 0) return std::nullopt;
    const auto axes = m.unsqueeze_axes(m.node(u));
    if (!axes || axes->size() != rank - 2) return std::nullopt;
    std::vector<std::int64_t> sorted;
    for (const auto a : *axes) sorted.push_back(a < 0 ? a + static_cast<std::int64_t>(rank) - 1 : a);
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t k = 0; k < sorted.size(); ++k)
        if (sorted[k] != static_cast<std::int64_t>(k) + 1) return std::nullopt;
    Operand o;
    o.unsqueeze = u;
    const std::string& base = m.node(u).input(0);
    if (m.is_tensor(base)) {
        const auto* t = m.im_.graph().initializer(base);
        if (t->dims_size() != 1 || t->dims(0) != channels) return std::nullopt;
        o.on = true;
        o.tensor = base;
        return o;
    }
    // affine=False: Unsqueeze of a one-element constant.
    if (!m.all_equal(base, channels, neutral) && !m.all_equal(base, 1, neutral)) return std::nullopt;
    return o;
}

}  // namespace

Result<bool> import_group_norm_pattern(Importer& importer, int i) {
    NormMatcher m(importer);
    const auto& reshape = m.node(i);
    if (reshape.op_type() != "Reshape" || reshape.input_size() != 2) return false;
    const std::string x = reshape.input(0);
    const nn::ValueInfo* xi = m.im_.info(x);
    if (xi == nullptr || xi->rank() < 3 || xi->rank() > 5 || xi->type != nn::ElementType::kFloat ||
        xi->dims[0] != nn::Dim::batch_times(1))
        return false;
    const std::int64_t channels = xi->dims[1].value;
    // [0 or N, G, -1]
    const auto target = m.constant(reshape.input(1));
    if (!target || target->is_float || target->symbolic_dims || target->i.size() != 3) return false;
    const auto& t = target->i;
    const auto allowzero = int_attr(reshape, "allowzero", 0);  // opset 14+: 1 makes the 0 a size
    const bool batch_first =
        (!t[0].batch && t[0].value == 0 && allowzero && *allowzero == 0) || t[0] == nn::Dim::batch_times(1);
    const std::int64_t groups = t[1].value;
    if (!batch_first || t[1].batch || groups < 1 || channels % groups != 0 || t[2].batch || t[2].value != -1)
        return false;
    const int inorm = m.only_reader(reshape.output(0), "InstanceNormalization");
    if (inorm < 0 || m.node(inorm).input(0) != reshape.output(0) || m.node(inorm).input_size() != 3) return false;
    const auto& in_node = m.node(inorm);
    const int back = m.only_reader(in_node.output(0), "Reshape");
    if (back < 0 || m.node(back).input(0) != in_node.output(0)) return false;
    const int shape = m.im_.graph().producer(m.node(back).input(1));
    if (shape < 0 || m.node(shape).op_type() != "Shape" || m.node(shape).input(0) != x ||
        m.node(shape).attribute_size() != 0)
        return false;
    // The InstanceNormalization's scale and B: neutral constants, or per-group tensors.
    const std::string& inner_scale = in_node.input(1);
    const std::string& inner_bias = in_node.input(2);
    const bool scale_neutral = m.all_equal(inner_scale, groups, 1.0),
               bias_neutral = m.all_equal(inner_bias, groups, 0.0);
    auto per_group_tensor = [&](const std::string& v) {
        const auto* init = m.im_.graph().initializer(v);
        return m.is_tensor(v) && init->dims_size() == 1 && init->dims(0) == groups;
    };
    if ((!scale_neutral && !per_group_tensor(inner_scale)) || (!bias_neutral && !per_group_tensor(inner_bias)))
        return false;
    const bool per_group = !scale_neutral || !bias_neutral;
    auto eps = float_attr(in_node, "epsilon", 1e-5f);
    if (!eps) return false;
    // Mul and Add by the per-channel tensors (only after a neutral InstanceNormalization).
    int last = back, mul = -1, add = -1;
    std::optional<Operand> scale, bias;
    // The input of binary node `n` other than `from`.
    auto operand_of = [&](int n, const std::string& from) {
        const auto& b = m.node(n);
        if (b.input_size() != 2) return std::string();
        return b.input(0) == from ? b.input(1) : b.input(1) == from ? b.input(0) : std::string();
    };
    if (!per_group) {
        mul = m.only_reader(m.node(last).output(0), "Mul");
        if (mul >= 0)
            scale = affine_operand(m, operand_of(mul, m.node(last).output(0)), "Mul", xi->rank(), channels, 1.0);
        if (scale) last = mul;
        else mul = -1;
        add = m.only_reader(m.node(last).output(0), "Add");
        if (add >= 0)
            bias = affine_operand(m, operand_of(add, m.node(last).output(0)), "Add", xi->rank(), channels, 0.0);
        if (bias) last = add;
        else add = -1;
    }
    const std::string who = node_label(reshape, i) + " (GroupNorm)";
    PSRUN_TRY_ASSIGN(auto input, m.im_.data_value(x, who));
    nlohmann::json tensors = nlohmann::json::object();
    bool has_scale = false, has_bias = false;
    if (per_group) {
        if ((has_scale = !scale_neutral)) tensors["scale"] = m.im_.slot_tensor(inner_scale);
        if ((has_bias = !bias_neutral)) tensors["bias"] = m.im_.slot_tensor(inner_bias);
    } else {
        if ((has_scale = scale && scale->on)) tensors["scale"] = m.im_.slot_tensor(scale->tensor);
        if ((has_bias = bias && bias->on)) tensors["bias"] = m.im_.slot_tensor(bias->tensor);
    }
    const auto& end = m.node(last);
    PSRUN_TRY_ASSIGN(auto out, m.im_.emit({{"kind", "group_norm"},
                                           {"inputs", {input}},
                                           {"groups", groups},
                                           {"epsilon", nn::onnx_float(*eps)},
                                           {"scale", has_scale},
                                           {"center", has_bias},
                                           {"affine", per_group ? "group" : "channel"},
                                           {"tensors", tensors}},
                                          m.im_.unique_name(end.name().empty() ? end.output(0) : end.name()), who));
    m.im_.bind(end.output(0), out);
    for (const int n : {i, inorm, back, mul, add})
        if (n >= 0) m.im_.consume(n);
    for (const auto* o : {&scale, &bias})
        if (*o) m.im_.consume((*o)->unsqueeze);  // read by the Mul or Add alone (affine_operand)
    return true;
}

}  // namespace psrun::onnx_io
