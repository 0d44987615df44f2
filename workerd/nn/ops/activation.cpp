// Element-wise activations, output shape = input shape, no tensors:
//   {"kind": "relu"}, "tanh", "sigmoid", "exp", "log", "sqrt", "abs", "neg",
//   "softplus" (log(1 + e^x)), "swish" (x * sigmoid(x), PyTorch's SiLU), "hard_swish",
//   {"kind": "leaky_relu", "alpha": 0.01}, {"kind": "elu", "alpha": 1.0},
//   {"kind": "clip", "min": a, "max": b} (ReLU6: min 0, max 6),
//   {"kind": "gelu", "approximate": "none" (erf, PyTorch's default) | "tanh"},
//   {"kind": "selu", "alpha": 1.6732632, "gamma": 1.0507010} (gamma * elu(x, alpha)),
//   {"kind": "hard_sigmoid", "alpha": 1/6, "beta": 0.5} (clip(alpha x + beta, 0, 1); the
//   defaults are PyTorch's nn.Hardsigmoid, ONNX's are 0.2 and 0.5), "mish" (x tanh(softplus x)),
//   "reciprocal" (1 / x).
// ONNX: Relu, Tanh, Sigmoid, Exp, Log, Sqrt, Abs, Neg, Softplus, HardSwish, LeakyRelu, Elu,
// Clip (constant min/max; of integers: maximum and minimum, ops/select.cpp), Gelu (opset 20; opset 13's
// Div/Erf/Add/Mul/Mul is recognised by the importer), Selu, HardSigmoid, Mish, Reciprocal. Export writes opset 13:
// hard_swish as HardSigmoid(1/6, 0.5) * x, mish as x * Tanh(Softplus(x)).
#include "workerd/nn/ops/activation.h"

#include <cfloat>
#include <map>
#include <string>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

// ONNX's Selu defaults (PyTorch's nn.SELU constants).
constexpr double kSeluAlpha = 1.67326319217681884765625, kSeluGamma = 1.05070102214813232421875;

struct Entry {
    Activation activation;
    std::string_view onnx;  // "" when exported otherwise
};

const std::map<std::string_view, Entry>& table() {
    static const std::map<std::string_view, Entry> t = {
        {"relu", {Activation::kRelu, "Relu"}},
        {"tanh", {Activation::kTanh, "Tanh"}},
        {"sigmoid", {Activation::kSigmoid, "Sigmoid"}},
        {"leaky_relu", {Activation::kLeakyRelu, "LeakyRelu"}},
        {"elu", {Activation::kElu, "Elu"}},
        {"clip", {Activation::kClip, "Clip"}},
        {"gelu", {Activation::kGelu, ""}},
        {"exp", {Activation::kExp, "Exp"}},
        {"log", {Activation::kLog, "Log"}},
        {"sqrt", {Activation::kSqrt, "Sqrt"}},
        {"abs", {Activation::kAbs, "Abs"}},
        {"softplus", {Activation::kSoftplus, "Softplus"}},
        {"swish", {Activation::kSwish, ""}},
        {"hard_swish", {Activation::kHardSwish, "HardSwish"}},
        {"neg", {Activation::kNeg, "Neg"}},
        {"selu", {Activation::kSelu, "Selu"}},
        {"hard_sigmoid", {Activation::kHardSigmoid, "HardSigmoid"}},
        {"mish", {Activation::kMish, "Mish"}},
        {"reciprocal", {Activation::kReciprocal, "Reciprocal"}},
    };
    return t;
}

Result<void> parse_alpha(FieldReader& reader, nlohmann::json& attrs, double fallback) {
    PSRUN_TRY_ASSIGN(auto alpha, reader.number("alpha", fallback));
    attrs["alpha"] = alpha;
    return {};
}
Result<void> parse_leaky(FieldReader& reader, nlohmann::json& attrs) { return parse_alpha(reader, attrs, 0.01); }
Result<void> parse_elu(FieldReader& reader, nlohmann::json& attrs) { return parse_alpha(reader, attrs, 1.0); }

Result<void> parse_clip(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto lo, reader.number("min", std::nullopt));
    PSRUN_TRY_ASSIGN(auto hi, reader.number("max", std::nullopt));
    if (!(lo < hi)) return tl::unexpected(reader.fail("max", "must be larger than \"min\""));
    attrs["min"] = lo;
    attrs["max"] = hi;
    return {};
}

Result<void> parse_two(FieldReader& reader, nlohmann::json& attrs, const char* a, double fa, const char* b, double fb) {
    PSRUN_TRY_ASSIGN(auto x, reader.number(a, fa));
    PSRUN_TRY_ASSIGN(auto y, reader.number(b, fb));
    attrs[a] = x;
    attrs[b] = y;
    return {};
}
Result<void> parse_selu(FieldReader& reader, nlohmann::json& attrs) {
    return parse_two(reader, attrs, "alpha", kSeluAlpha, "gamma", kSeluGamma);
}
Result<void> parse_hard_sigmoid(FieldReader& reader, nlohmann::json& attrs) {
    return parse_two(reader, attrs, "alpha", 1.0 / 6.0, "beta", 0.5);
}

Result<void> parse_gelu(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto approximate, reader.choice("approximate", 0, {"none", "tanh"}));
    attrs["approximate"] = approximate == 1 ? "tanh" : "none";
    return {};
}

Result<void> infer_activation(InferContext& context) {
    const ValueInfo& in = context.input(0);
    if (in.type != ElementType::kFloat) return tl::unexpected(op_error("expects floats, got integer ids"));
    context.set_output(0, in);
    context.add_flops(static_cast<double>(elements_per_example(in.dims).value_or(0)));
    return {};
}

Result<void> import_activation(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const auto op = node.op_type();
    nlohmann::json layer = {{"inputs", {x}}};
    if (op == "LeakyRelu" || op == "Elu") {
        PSRUN_TRY_ASSIGN(auto alpha, node.float_attr("alpha", op == "Elu" ? 1.0f : 0.01f));
        layer["kind"] = op == "Elu" ? "elu" : "leaky_relu";
        layer["alpha"] = alpha;
    } else if (op == "Selu" || op == "HardSigmoid") {
        const bool selu = op == "Selu";
        auto alpha = node.float_attr("alpha", selu ? static_cast<float>(kSeluAlpha) : 0.2f);
        auto second = node.float_attr(selu ? "gamma" : "beta", selu ? static_cast<float>(kSeluGamma) : 0.5f);
        if (!alpha || !second) return tl::unexpected(!alpha ? alpha.error() : second.error());
        layer["kind"] = selu ? "selu" : "hard_sigmoid";
        layer["alpha"] = *alpha;
        layer[selu ? "gamma" : "beta"] = *second;
    } else if (op == "Clip" && node.info(0) != nullptr && node.info(0)->type == ElementType::kInt) {
        // Integer ids clamped into a table (ids.clamp(0, V - 1)): maximum and minimum, no gradient.
        std::string y = x;
        for (std::size_t i : {std::size_t{1}, std::size_t{2}}) {
            if (!node.has_input(i)) continue;
            const auto bound = node.ints(i);
            if (!bound || bound->size() != 1)
                return tl::unexpected(node.refuse("an integer Clip's min and max must be constant scalars"));
            PSRUN_TRY_ASSIGN(auto b, node.value(i));
            PSRUN_TRY_ASSIGN(y, node.emit({{"kind", i == 1 ? "maximum" : "minimum"}, {"inputs", {y, b}}}));
        }
        node.bind_output(0, y);
        return {};
    } else if (op == "Clip") {
        float lo = -FLT_MAX, hi = FLT_MAX;
        if (node.opset() < 11) {
            auto a = node.float_attr("min", lo);
            auto b = node.float_attr("max", hi);
            if (!a || !b) return tl::unexpected(!a ? a.error() : b.error());
            lo = *a, hi = *b;
        } else {
            for (std::size_t i : {std::size_t{1}, std::size_t{2}}) {
                if (!node.has_input(i)) continue;
                const auto v = node.floats(i);
                if (!v || v->size() != 1) return tl::unexpected(node.refuse("min and max must be constant scalars"));
                (i == 1 ? lo : hi) = (*v)[0];
            }
        }
        layer["kind"] = "clip";
        layer["min"] = lo;
        layer["max"] = hi;
    } else if (op == "Gelu") {
        PSRUN_TRY_ASSIGN(auto approximate, node.string_attr("approximate", "none"));
        layer["kind"] = "gelu";
        layer["approximate"] = approximate;
    } else {
        for (const auto& [kind, entry] : table())
            if (entry.onnx == op) layer["kind"] = std::string(kind);
    }
    PSRUN_TRY_ASSIGN(auto name, node.emit(layer));
    node.bind_output(0, name);
    return {};
}

Result<void> export_activation(OnnxNodeExport& out) {
    const Node& node = out.node();
    const std::string x = out.input(0), y = out.output(0);
    if (node.op == "leaky_relu" || node.op == "elu") {
        out.add(node.op == "elu" ? "Elu" : "LeakyRelu", {x}, {y},
                {{"alpha", static_cast<float>(node.attrs.at("alpha").get<double>())}}, node.name);
    } else if (node.op == "selu" || node.op == "hard_sigmoid") {
        const bool selu = node.op == "selu";
        const char* second = selu ? "gamma" : "beta";
        out.add(selu ? "Selu" : "HardSigmoid", {x}, {y},
                {{"alpha", static_cast<float>(node.attrs.at("alpha").get<double>())},
                 {second, static_cast<float>(node.attrs.at(second).get<double>())}},
                node.name);
    } else if (node.op == "hard_swish") {  // HardSwish is opset 14
        const std::string s = out.fresh(node.name + "/hard_sigmoid");
        out.add("HardSigmoid", {x}, {s}, {{"alpha", 1.0f / 6.0f}, {"beta", 0.5f}}, node.name + "/hard_sigmoid");
        out.add("Mul", {x, s}, {y}, {}, node.name);
    } else if (node.op == "mish") {  // Mish is opset 18
        const std::string sp = out.fresh(node.name + "/softplus"), t = out.fresh(node.name + "/tanh");
        out.add("Softplus", {x}, {sp}, {}, node.name + "/softplus");
        out.add("Tanh", {sp}, {t}, {}, node.name + "/tanh");
        out.add("Mul", {x, t}, {y}, {}, node.name);
    } else if (node.op == "clip") {
        const float lo = static_cast<float>(node.attrs.at("min").get<double>());
        const float hi = static_cast<float>(node.attrs.at("max").get<double>());
        out.add("Clip",
                {x, out.float_constant(node.name + "/min", {}, std::span(&lo, 1)),
                 out.float_constant(node.name + "/max", {}, std::span(&hi, 1))},
                {y}, {}, node.name);
    } else if (node.op == "gelu") {  // opset 13 has no Gelu: 0.5 x (1 + erf(x / sqrt 2)), or the tanh form
        const bool tanh_form = node.attrs.at("approximate") == "tanh";
        auto scalar = [&](const std::string& hint, float v) {
            return out.float_constant(node.name + "/" + hint, {}, std::span(&v, 1));
        };
        const std::string inner = out.fresh(node.name + "/inner"), t = out.fresh(node.name + "/t");
        if (tanh_form) {  // tanh(sqrt(2/pi) (x + 0.044715 x^3))
            const std::string x3 = out.fresh(node.name + "/x3"), cx3 = out.fresh(node.name + "/cx3"),
                              sum = out.fresh(node.name + "/sum");
            out.add("Mul", {x, x}, {inner}, {}, node.name + "/x2");
            out.add("Mul", {inner, x}, {x3}, {}, node.name + "/x3");
            out.add("Mul", {x3, scalar("c", 0.044715f)}, {cx3}, {}, node.name + "/cx3");
            out.add("Add", {x, cx3}, {sum}, {}, node.name + "/sum");
            const std::string scaled = out.fresh(node.name + "/scaled");
            out.add("Mul", {sum, scalar("k", 0.7978845608f)}, {scaled}, {}, node.name + "/scaled");
            out.add("Tanh", {scaled}, {t}, {}, node.name + "/tanh");
        } else {
            out.add("Div", {x, scalar("sqrt2", 1.4142135624f)}, {inner}, {}, node.name + "/div");
            out.add("Erf", {inner}, {t}, {}, node.name + "/erf");
        }
        const std::string one = out.fresh(node.name + "/one"), half = out.fresh(node.name + "/half");
        out.add("Add", {t, scalar("1", 1.0f)}, {one}, {}, node.name + "/add");
        out.add("Mul", {x, one}, {half}, {}, node.name + "/mul");
        out.add("Mul", {half, scalar("0.5", 0.5f)}, {y}, {}, node.name);
    } else if (node.op == "swish") {
        const std::string s = out.fresh(node.name + "/sigmoid");
        out.add("Sigmoid", {x}, {s}, {}, node.name + "/sigmoid");
        out.add("Mul", {x, s}, {y}, {}, node.name);
    } else {
        out.add(std::string(table().at(node.op).onnx), {x}, {y}, {}, node.name);
    }
    return {};
}

OpSchema make(std::string_view kind, Result<void> (*parse)(FieldReader&, nlohmann::json&)) {
    const auto& onnx = table().at(kind).onnx;
    std::vector<std::string_view> ops;
    if (!onnx.empty()) ops.push_back(onnx);
    if (kind == "gelu") ops.push_back("Gelu");
    return OpSchema{kind, 1, 1, parse, infer_activation, ops, import_activation, export_activation};
}

}  // namespace

const Activation* find_activation(std::string_view kind) {
    const auto it = table().find(kind);
    return it == table().end() ? nullptr : &it->second.activation;
}

const OpSchema& activation_schema(std::string_view kind) {
    static const std::vector<OpSchema> schemas = [] {
        std::vector<OpSchema> s;
        for (const auto& [name, entry] : table()) {
            auto parse = name == "leaky_relu"     ? parse_leaky
                         : name == "elu"          ? parse_elu
                         : name == "clip"         ? parse_clip
                         : name == "gelu"         ? parse_gelu
                         : name == "selu"         ? parse_selu
                         : name == "hard_sigmoid" ? parse_hard_sigmoid
                                                  : parse_no_attributes;
            s.push_back(make(name, parse));
        }
        return s;
    }();
    return family_member(schemas, kind);
}

}  // namespace psrun::nn
