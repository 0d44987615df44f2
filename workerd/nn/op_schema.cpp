#include "workerd/nn/op_schema.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace psrun::nn {

std::vector<std::int64_t> InferContext::attr_ints(const char* key) const {
    return node_.attrs.at(key).get<std::vector<std::int64_t>>();
}

const ValueInfo& InferContext::input(std::size_t i) const { return model_.value(node_.inputs.at(i)); }

Result<void> InferContext::tensor(const std::string& slot, std::vector<std::int64_t> shape, const Initializer& init,
                                  TensorClass cls) {
    const auto bound = node_.bindings.find(slot);
    const std::string name = bound != node_.bindings.end() ? bound->second : node_.name + "/" + slot;
    std::int64_t size = 1;
    for (const auto d : shape) {
        const auto p = checked_product({size, d});
        if (!p || d < 1) return tl::unexpected(fail("tensor " + name + " would have more than 2^31-1 elements"));
        size = *p;
    }
    std::string shape_text;
    for (const auto d : shape) {
        if (!shape_text.empty()) shape_text += " x ";
        shape_text += std::to_string(d);
    }
    if (model_.values.count(name) != 0) {
        if (const TensorDef* t = model_.tensor(name)) {
            if (t->shape != shape)
                return tl::unexpected(fail("slot \"" + slot + "\" binds tensor " + name + " of shape " +
                                           to_string(constant_dims(t->shape)) + " but needs " + shape_text));
            if (t->cls != cls || cls == TensorClass::kState)
                return tl::unexpected(fail("slot \"" + slot + "\" binds tensor " + name + " (" + to_string(t->cls) +
                                           ", created by " + t->owner + ") but is a " + to_string(cls) + " slot" +
                                           (cls == TensorClass::kState ? " (state tensors belong to one layer)" : "")));
        } else {
            const ValueInfo& v = model_.value(name);
            if (cls == TensorClass::kState)
                return tl::unexpected(
                    fail("slot \"" + slot + "\" is a state slot: it cannot bind the computed value " + name));
            if (v.type != ElementType::kFloat || v.dims != constant_dims(shape))
                return tl::unexpected(fail("slot \"" + slot + "\" binds value " + name + " of shape " +
                                           to_string(v.dims) + " but needs " + shape_text));
        }
    } else {
        for (const auto& n : model_.nodes)
            if (n.name == name)
                return tl::unexpected(fail("slot \"" + slot + "\": the name " + name + " is a layer's"));
        if (model_.parameter_count + size > kMaxTensorElements)
            return tl::unexpected(fail("the tensors add up to more than 2^31-1 elements"));
        TensorDef t;
        t.name = name;
        t.shape = std::move(shape);
        t.size = size;
        t.offset = model_.parameter_count;
        t.init = init;
        t.cls = cls;
        t.owner = node_.name;
        model_.values.emplace(name, ValueInfo{constant_dims(t.shape), ElementType::kFloat});
        model_.tensors.push_back(std::move(t));
        model_.parameter_count += size;
        node_.param_count += size;
    }
    node_.inputs.push_back(name);
    node_.slots.push_back(slot);
    return {};
}

void InferContext::set_output(std::size_t i, ValueInfo info) {
    if (node_.outputs.size() <= i) {
        node_.outputs.resize(i + 1);
        node_.output_info.resize(i + 1);
    }
    node_.outputs[i] = i == 0 ? node_.name : node_.name + ":" + std::to_string(i);
    node_.output_info[i] = std::move(info);
}

Error op_error(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message)}; }

const OpSchema& family_member(const std::vector<OpSchema>& family, std::string_view kind) {
    for (const auto& s : family)
        if (s.kind == kind) return s;
    throw std::logic_error("ops/kinds.def: no family schema defines kind \"" + std::string(kind) + "\"");
}

bool MacsContext::any_input_needs_grad() const {
    return std::find(input_needs_grad.begin(), input_needs_grad.end(), true) != input_needs_grad.end();
}

const TensorDef* MacsContext::slot_tensor(std::size_t k) const {
    return k < node.slots.size() ? model.tensor(node.inputs.at(node.data_inputs + k)) : nullptr;
}

double MacsContext::per_example(const Dims& dims, bool but_last) {
    double n = 1;
    for (std::size_t i = 0; i + (but_last ? 1 : 0) < dims.size(); ++i) n *= static_cast<double>(dims[i].value);
    return n;
}

std::optional<Dim> parse_dim(const nlohmann::json& v) {
    if (v.is_number_integer()) {
        const auto d = v.get<std::int64_t>();
        if (d < 1 || d > kMaxTensorElements) return std::nullopt;
        return Dim::of(d);
    }
    if (!v.is_string()) return std::nullopt;
    const std::string s = v.get<std::string>();
    if (s.empty() || s.back() != 'N') return std::nullopt;
    if (s.size() == 1) return Dim::batch_times(1);
    std::int64_t k = 0;
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
        if (s[i] < '0' || s[i] > '9' || k > 1'000'000) return std::nullopt;
        k = k * 10 + (s[i] - '0');
    }
    if (k < 1) return std::nullopt;
    return Dim::batch_times(k);
}

float constant_float(const nlohmann::json& v) {
    if (v.is_string())
        return v == "-inf" ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    return v.get<float>();
}

Result<void> parse_no_attributes(FieldReader&, nlohmann::json&) { return {}; }

std::string extent_text(std::int64_t h, std::int64_t w) { return std::to_string(h) + "x" + std::to_string(w); }

Result<void> parse_trainable_options(FieldReader& reader, nlohmann::json& attrs,
                                     const Initializer& default_weight_init) {
    PSRUN_TRY_ASSIGN(auto bias, reader.boolean("bias", true));
    attrs["bias"] = bias;
    Initializer weight_init = default_weight_init;
    if (reader.has("weight_init")) {
        PSRUN_TRY_ASSIGN(auto init,
                         parse_initializer(reader.raw("weight_init"), reader.where() + ": field \"weight_init\""));
        weight_init = init;
    }
    attrs["weight_init"] = to_json(weight_init);
    if (reader.has("bias_init")) {
        if (!bias) return tl::unexpected(reader.fail("bias_init", "given but \"bias\" is false"));
        PSRUN_TRY_ASSIGN(auto init,
                         parse_initializer(reader.raw("bias_init"), reader.where() + ": field \"bias_init\""));
        attrs["bias_init"] = to_json(init);
    } else if (bias) {
        attrs["bias_init"] = to_json(Initializer{InitKind::kZeros, 0.0});
    }
    return {};
}

Initializer attr_initializer(const nlohmann::json& attrs, const char* key) {
    // Canonical attrs were written by to_json: parse_initializer cannot fail on them.
    auto init = parse_initializer(attrs.at(key), key);
    return init ? *init : Initializer{};
}

}  // namespace psrun::nn
