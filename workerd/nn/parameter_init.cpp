#include "workerd/nn/parameter_init.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/fnv1a.h"
#include "common/rng.h"
#include "common/row_init.h"

namespace psrun::nn {

namespace {

struct Fans {
    double in = 1, out = 1;
};

// TF's fans: conv [O, I, KH, KW]: in = I*KH*KW, out = O*KH*KW; dense [O, I]: I, O; bias [O]: O, O.
Fans fans(const std::vector<std::int64_t>& shape) {
    if (shape.size() == 4) {
        const double receptive = static_cast<double>(shape[2] * shape[3]);
        return {static_cast<double>(shape[1]) * receptive, static_cast<double>(shape[0]) * receptive};
    }
    if (shape.size() == 2) return {static_cast<double>(shape[1]), static_cast<double>(shape[0])};
    if (shape.empty()) return {};
    return {static_cast<double>(shape.at(0)), static_cast<double>(shape.at(0))};
}

void fill_tensor(const TensorDef& t, psrun::Rng& rng, std::span<float> out) {
    const Fans f = fans(t.shape);
    switch (t.init.kind) {
        case InitKind::kTruncatedNormal:
            for (auto& v : out) v = rng.truncated_normal(static_cast<float>(t.init.value));
            break;
        case InitKind::kHeNormal: {
            const auto stddev = static_cast<float>(std::sqrt(2.0 / f.in));
            for (auto& v : out) v = rng.truncated_normal(stddev);
            break;
        }
        case InitKind::kNormal:
            for (auto& v : out) v = static_cast<float>(rng.normal() * t.init.value);
            break;
        case InitKind::kUniform:
        case InitKind::kGlorotUniform: {
            const double limit = t.init.kind == InitKind::kUniform ? t.init.value : std::sqrt(6.0 / (f.in + f.out));
            for (auto& v : out) v = static_cast<float>((2.0 * rng.uniform() - 1.0) * limit);
            break;
        }
        case InitKind::kZeros:
            for (auto& v : out) v = 0.0f;
            break;
        case InitKind::kConstant:
            for (auto& v : out) v = static_cast<float>(t.init.value);
            break;
    }
}

}  // namespace

std::uint64_t tensor_stream(const TensorDef& t) { return psrun::fnv1a_64(t.name); }

std::optional<RowInit> table_row_init(const ModelDescription& model, std::size_t index, std::uint64_t seed) {
    const TensorDef& t = model.tensors.at(index);
    if (t.shape.size() != 2) return std::nullopt;
    const auto owner =
        std::find_if(model.nodes.begin(), model.nodes.end(), [&](const Node& n) { return n.name == t.owner; });
    if (owner == model.nodes.end() || owner->op != "embedding") return std::nullopt;
    const Fans f = fans(t.shape);
    RowInit init;
    init.seed = psrun::Rng(seed, tensor_stream(t) ^ 0x7AB1E000ull).next();
    switch (t.init.kind) {
        case InitKind::kZeros: init.kind = RowInitKind::kZeros; break;
        case InitKind::kConstant:
            if (t.init.value != 0.0) return std::nullopt;
            init.kind = RowInitKind::kZeros;
            break;
        case InitKind::kNormal:
            init.kind = RowInitKind::kNormal;
            init.scale = static_cast<float>(t.init.value);
            break;
        case InitKind::kTruncatedNormal:
            init.kind = RowInitKind::kTruncatedNormal;
            init.scale = static_cast<float>(t.init.value);
            break;
        case InitKind::kHeNormal:
            init.kind = RowInitKind::kTruncatedNormal;
            init.scale = static_cast<float>(std::sqrt(2.0 / f.in));
            break;
        case InitKind::kUniform:
            init.kind = RowInitKind::kUniform;
            init.scale = static_cast<float>(t.init.value);
            break;
        case InitKind::kGlorotUniform:
            init.kind = RowInitKind::kUniform;
            init.scale = static_cast<float>(std::sqrt(6.0 / (f.in + f.out)));
            break;
    }
    return init;
}

void initialize_tensor(const ModelDescription& model, std::size_t index, std::uint64_t seed, std::span<float> out) {
    const TensorDef& t = model.tensors.at(index);
    if (out.size() != static_cast<std::size_t>(t.size))
        throw std::invalid_argument("initialize_tensor: buffer of " + std::to_string(out.size()) +
                                    " floats for tensor " + t.name + " of " + std::to_string(t.size));
    if (const auto rows = table_row_init(model, index, seed)) {
        const auto width = static_cast<std::size_t>(t.shape[1]);
        for (std::int64_t r = 0; r < t.shape[0]; ++r)
            fill_row(*rows, static_cast<std::uint64_t>(r), out.subspan(static_cast<std::size_t>(r) * width, width));
        // nn.Embedding(padding_idx=P): row P starts at zero (and its gradient stays 0).
        for (const auto& n : model.nodes)
            if (n.op == "embedding" && n.name == t.owner && n.attrs.contains("padding_index")) {
                const auto row = n.attrs.at("padding_index").get<std::int64_t>();
                std::fill_n(out.begin() + row * t.shape[1], t.shape[1], 0.0f);
            }
        return;
    }
    psrun::Rng rng(seed, tensor_stream(t));
    fill_tensor(t, rng, out);
}

void initialize_parameters(const ModelDescription& model, std::uint64_t seed, std::span<float> params) {
    if (params.size() != static_cast<std::size_t>(model.parameter_count))
        throw std::invalid_argument("initialize_parameters: buffer of " + std::to_string(params.size()) +
                                    " floats for " + std::to_string(model.parameter_count) + " parameters");
    if (model.initial_parameters) {
        const auto& initial = *model.initial_parameters;
        if (initial.size() != params.size())
            throw std::invalid_argument("initialize_parameters: the model brings " + std::to_string(initial.size()) +
                                        " initial values for " + std::to_string(params.size()) + " parameters");
        std::copy(initial.begin(), initial.end(), params.begin());
        return;
    }
    for (std::size_t i = 0; i < model.tensors.size(); ++i) {
        const TensorDef& t = model.tensors[i];
        initialize_tensor(model, i, seed,
                          params.subspan(static_cast<std::size_t>(t.offset), static_cast<std::size_t>(t.size)));
    }
}

}  // namespace psrun::nn
