#include "test/nn/cross_entropy_test_util.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"

namespace psrun::nn::test {

using nlohmann::json;

json loss_layer(const LossSpec& s) {
    json layer = {{"kind", s.kind}, {"name", "loss"}, {"inputs", {"scores", "y"}}, {"reduction", s.reduction}};
    if (!s.weights.empty()) layer["inputs"].push_back("w");
    if (s.ignore) layer["ignore_index"] = *s.ignore;
    if (!s.nll()) layer["label_smoothing"] = s.smoothing;
    return layer;
}

json loss_document(const LossSpec& s, const std::vector<std::int64_t>& score_dims,
                   const std::vector<std::int64_t>& label_dims) {
    json layers = json::array();
    layers.push_back({{"kind", "identity"}, {"name", "scores"}, {"inputs", {"x"}}});
    if (label_dims.empty())
        layers.push_back({{"kind", "squeeze"}, {"name", "y"}, {"inputs", {"labels"}}, {"axes", {1}}});
    else layers.push_back({{"kind", "identity"}, {"name", "y"}, {"inputs", {"labels"}}});
    if (!s.weights.empty()) {
        const auto c = static_cast<std::int64_t>(s.weights.size());
        if (s.weights_trained) layers.push_back({{"kind", "parameter"}, {"name", "w"}, {"shape", {c}}});
        else layers.push_back({{"kind", "constant"}, {"name", "w"}, {"shape", {c}}, {"values", s.weights}});
    }
    layers.push_back(loss_layer(s));
    if (s.scalar()) layers.push_back({{"kind", "expand"}, {"name", "out"}, {"shape", {"N", 1}}});
    else if (label_dims.empty()) layers.push_back({{"kind", "unsqueeze"}, {"name", "out"}, {"axes", {1}}});
    else if (label_dims.size() > 1) layers.push_back({{"kind", "flatten"}, {"name", "out"}, {"axis", 1}});
    const std::vector<std::int64_t> input_dims = label_dims.empty() ? std::vector<std::int64_t>{1} : label_dims;
    return {{"inputs",
             {{{"name", "x"}, {"dims", score_dims}}, {{"name", "labels"}, {"dims", input_dims}, {"type", "int"}}}},
            {"layers", layers},
            {"loss", {{"kind", "mean_squared_error"}, {"reduction", "sum"}}}};
}

ModelDescription parse_ok(const json& doc) {
    auto model = parse_model(doc, "t.json");
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    return *model;
}

Reference reference(const LossSpec& s, const std::vector<float>& x, const std::vector<std::int32_t>& y,
                    std::int64_t rows, std::int64_t classes, std::int64_t inner, const std::vector<double>& g) {
    Reference ref;
    const std::int64_t positions = rows * inner;
    ref.loss.assign(static_cast<std::size_t>(positions), 0.0);
    ref.dx.assign(x.size(), 0.0);
    const auto w = [&](std::int64_t c) {
        return s.weights.empty() ? 1.0 : static_cast<double>(s.weights[static_cast<std::size_t>(c)]);
    };
    const auto at = [&](std::int64_t q, std::int64_t c) {
        return static_cast<std::size_t>((q / inner) * classes * inner + c * inner + q % inner);
    };
    double total = 0, denominator = 0, weight_sum = 0;
    for (std::int64_t c = 0; c < classes; ++c) weight_sum += w(c);
    std::vector<std::vector<double>> lp(static_cast<std::size_t>(positions));
    for (std::int64_t q = 0; q < positions; ++q) {
        const std::int32_t label = y[static_cast<std::size_t>(q)];
        if (s.ignore && label == *s.ignore) continue;
        auto& l = lp[static_cast<std::size_t>(q)];
        for (std::int64_t c = 0; c < classes; ++c) l.push_back(x[at(q, c)]);
        if (!s.nll()) {
            double mx = l[0], sum = 0;
            for (const double v : l) mx = std::max(mx, v);
            for (const double v : l) sum += std::exp(v - mx);
            for (auto& v : l) v -= mx + std::log(sum);
        }
        double smooth = 0;
        for (std::int64_t c = 0; c < classes; ++c)
            smooth -= w(c) * l[static_cast<std::size_t>(c)] / static_cast<double>(classes);
        const double loss = (1 - s.smoothing) * -w(label) * l[static_cast<std::size_t>(label)] + s.smoothing * smooth;
        ref.loss[static_cast<std::size_t>(q)] = loss;
        total += loss;
        denominator += w(label);
    }
    ref.reduced = s.reduction == "sum"    ? total
                  : s.reduction == "mean" ? (denominator != 0 ? total / denominator : 0.0)
                                          : 0.0;
    for (std::int64_t q = 0; q < positions; ++q) {
        const std::int32_t label = y[static_cast<std::size_t>(q)];
        if (s.ignore && label == *s.ignore) continue;
        double up = s.reduction == "none" ? g[static_cast<std::size_t>(q)] : g[0];
        if (s.reduction == "mean") up = denominator != 0 ? up / denominator : 0.0;
        for (std::int64_t c = 0; c < classes; ++c) {
            const double hit = c == label ? 1.0 : 0.0;
            if (s.nll()) {
                ref.dx[at(q, c)] = -w(label) * hit * up;
                continue;
            }
            const double p = std::exp(lp[static_cast<std::size_t>(q)][static_cast<std::size_t>(c)]);
            ref.dx[at(q, c)] = up * ((1 - s.smoothing) * w(label) * (p - hit) +
                                     s.smoothing * (p * weight_sum - w(c)) / static_cast<double>(classes));
        }
    }
    return ref;
}

ModelDescription graph_loss_model(const LossSpec& s, const std::vector<std::int64_t>& score_dims,
                                  const std::vector<std::int64_t>& label_dims) {
    REQUIRE(s.scalar());
    json doc = loss_document(s, score_dims, label_dims);
    doc["layers"].erase(doc["layers"].size() - 1);
    doc["loss"] = {{"kind", "graph"}};
    auto m = parse_ok(doc);
    REQUIRE(m.loss == LossKind::kGraph);
    return m;
}

Step train_step(const ModelDescription& m, const LossSpec& spec, std::int64_t batch, const std::vector<float>& x,
                const std::vector<std::int32_t>& labels, const std::vector<float>& params) {
    std::vector<float> p = params;
    if (p.empty()) {
        p.resize(static_cast<std::size_t>(m.parameter_count));
        initialize_parameters(m, 3, p);
        if (spec.weights_trained) {
            const TensorDef* t = m.tensor("w/value");
            std::copy(spec.weights.begin(), spec.weights.end(), p.begin() + t->offset);
        }
    }
    Step out;
    out.grads.assign(p.size(), -7.0f);
    auto net = Network::create(m, NetworkOptions{batch, Precision::kF32, false, false, true}, p, out.grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    std::copy(x.begin(), x.end(), (*net)->input(0).begin());
    auto ids = m.label_input >= 0 ? (*net)->labels() : (*net)->input_ids(1);
    REQUIRE(ids.size() == labels.size());
    std::copy(labels.begin(), labels.end(), ids.begin());
    out.loss = (*net)->train_step(1);
    out.dx.assign((*net)->input_gradient(0).begin(), (*net)->input_gradient(0).end());
    CHECK((*net)->forward(false) == out.loss);
    return out;
}

}  // namespace psrun::nn::test
