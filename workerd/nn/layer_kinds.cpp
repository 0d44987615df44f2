#include <array>

#include "workerd/nn/layer_spec.h"

namespace psrun::nn {

namespace {

const std::array<const LayerKindOps*, 8>& all_kinds() {
    static const std::array<const LayerKindOps*, 8> kinds = {
        &conv2d_ops(), &max_pool_ops(), &avg_pool_ops(), &dense_ops(),
        &relu_ops(),   &tanh_ops(),     &sigmoid_ops(),  &dropout_ops(),
    };
    return kinds;
}

}  // namespace

const LayerKindOps* find_layer_kind(std::string_view name) {
    for (const auto* ops : all_kinds())
        if (ops->name == name) return ops;
    return nullptr;
}

const LayerKindOps& layer_kind_ops(LayerKind kind) {
    for (const auto* ops : all_kinds())
        if (ops->kind == kind) return *ops;
    return relu_ops();
}

std::vector<std::string_view> layer_kind_names() {
    std::vector<std::string_view> names;
    for (const auto* ops : all_kinds()) names.push_back(ops->name);
    return names;
}

Error layer_error(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message)}; }

Result<ParamTensor> make_param(const std::string& name, std::vector<std::int64_t> shape, const Initializer& init) {
    std::int64_t size = 1;
    for (const auto d : shape) {
        const auto p = checked_product({size, d});
        if (!p)
            return tl::unexpected(layer_error("parameter " + name + " would have more than 2^31-1 elements"));
        size = *p;
    }
    return ParamTensor{name, std::move(shape), size, init};
}

}  // namespace psrun::nn

namespace psrun::nn {

Result<void> parse_trainable_options(FieldReader& reader, LayerSpec& layer) {
    auto bias = reader.boolean("bias", true);
    if (!bias) return tl::unexpected(bias.error());
    layer.bias = *bias;
    if (reader.has("weight_init")) {
        auto init = parse_initializer(reader.raw("weight_init"), reader.where() + ": field \"weight_init\"");
        if (!init) return tl::unexpected(init.error());
        layer.weight_init = *init;
    }
    if (reader.has("bias_init")) {
        if (!layer.bias) return tl::unexpected(reader.fail("bias_init", "given but \"bias\" is false"));
        auto init = parse_initializer(reader.raw("bias_init"), reader.where() + ": field \"bias_init\"");
        if (!init) return tl::unexpected(init.error());
        layer.bias_init = *init;
    }
    return {};
}

void write_trainable_options(const LayerSpec& layer, nlohmann::json& out) {
    out["bias"] = layer.bias;
    out["weight_init"] = to_json(layer.weight_init);
    if (layer.bias) out["bias_init"] = to_json(layer.bias_init);
}

}  // namespace psrun::nn
