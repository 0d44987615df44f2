#include "test/nn/engine_test_util.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>

#include "workerd/nn/model_summary.h"
#include "workerd/nn/parameter_init.h"

namespace psrun::nn::test {

namespace {

nlohmann::json input_json(const ValueInfo& info) {
    std::vector<std::int64_t> shape;
    for (std::size_t i = 1; i < info.dims.size(); ++i) shape.push_back(info.dims[i].value);
    return {{"shape", shape}, {"type", to_string(info.type)}};
}

ModelDescription parse(const nlohmann::json& doc) {
    auto model = parse_model(doc, "test");
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    return *model;
}

struct Run {
    std::vector<float> out, params_grad, input_grad;
};

// One forward and backward from `r` with fixed data.
Run run(const ModelDescription& model, std::int64_t batch, Precision precision, std::vector<float>& params,
        const std::vector<float>& x, const std::vector<std::int32_t>& ids, const std::vector<float>& r,
        bool input_grad = true) {
    std::vector<float> grads(params.size(), -7.0f);
    NetworkOptions o{batch, precision, false, false, input_grad && model.input().type == ElementType::kFloat};
    auto net = Network::create(model, o, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    std::copy(x.begin(), x.end(), (*net)->input().begin());
    std::copy(ids.begin(), ids.end(), (*net)->input_ids().begin());
    (*net)->forward(true, 9);
    Run out{{(*net)->outputs().begin(), (*net)->outputs().end()}, {}, {}};
    (*net)->backward_from(r);
    out.params_grad = grads;
    out.input_grad.assign((*net)->input_gradient().begin(), (*net)->input_gradient().end());
    return out;
}

double objective(Network& net, const std::vector<float>& r) {
    net.forward(true, 9);
    double l = 0;
    const auto out = net.outputs();
    for (std::size_t i = 0; i < out.size(); ++i) l += static_cast<double>(out[i]) * r[i];
    return l;
}

}  // namespace

double central_difference(float& value, double analytic, const std::function<double()>& objective, float step) {
    const float saved = value;
    auto at = [&](float eps) {
        value = saved + eps;
        const double up = objective();
        value = saved - eps;
        const double down = objective();
        value = saved;
        return (up - down) / (2.0 * static_cast<double>(eps));
    };
    const double coarse = at(step), fine = at(step / 2);
    const double candidates[] = {coarse, fine, (4.0 * fine - coarse) / 3.0};  // the last: Richardson's
    double best = candidates[0];
    for (const double c : candidates)
        if (std::fabs(c - analytic) < std::fabs(best - analytic)) best = c;
    return best;
}

namespace {

// Fails at most `outliers` of the sampled coordinates of one tensor.
void compare(const std::string& what, const std::vector<double>& numeric, const std::vector<float>& analytic,
             const std::vector<std::size_t>& coords, double tolerance, int outliers) {
    double scale = 0;
    for (const auto c : coords) scale = std::max(scale, std::fabs(static_cast<double>(analytic[c])));
    int failures = 0;
    std::string first;
    for (std::size_t k = 0; k < coords.size(); ++k) {
        const double a = analytic[coords[k]], n = numeric[k];
        const double denominator = std::max({std::fabs(a), std::fabs(n), 1e-2 * scale, 1e-6});
        if (std::fabs(a - n) / denominator > tolerance) {
            if (failures++ == 0)
                first = "coordinate " + std::to_string(coords[k]) + ": analytic " + std::to_string(a) + ", numeric " +
                        std::to_string(n);
        }
    }
    INFO(what << ": " << failures << " of " << coords.size() << " coordinates off; first " << first);
    CHECK(failures <= outliers);
}

std::vector<std::size_t> sample(std::size_t size, int samples, std::uint64_t seed) {
    std::vector<std::size_t> out;
    psrun::Rng rng(seed);
    if (size <= static_cast<std::size_t>(samples)) {
        for (std::size_t i = 0; i < size; ++i) out.push_back(i);
        return out;
    }
    for (int i = 0; i < samples; ++i) out.push_back(static_cast<std::size_t>(rng.below(size)));
    return out;
}

}  // namespace

ModelDescription graph_model(nlohmann::json layers, const std::vector<std::int64_t>& shape, const char* type) {
    nlohmann::json doc{{"input", {{"shape", shape}, {"type", type}}},
                       {"layers", layers},
                       {"loss", {{"kind", "mean_squared_error"}, {"reduction", "sum"}}}};
    auto model = parse_model(doc, "test");
    // An output other than [N, K] fails the loss's check (or passes it as [N, K] already).
    if (!model ||
        !(model->value(model->output).rank() == 2 && model->value(model->output).dims[0] == Dim::batch_times(1))) {
        auto flat = doc;
        flat["layers"].push_back({{"kind", "flatten"}, {"name", "test_flatten"}, {"axis", 1}});
        if (auto flattened = parse_model(flat, "test")) model = std::move(flattened);
    }
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    return *model;
}

LayerHarness::LayerHarness(const ModelDescription& model, int first, int count, std::int64_t batch, Precision precision,
                           bool hand_kernels) {
    const auto canonical = canonical_architecture(model);
    const Node& head = model.nodes[static_cast<std::size_t>(first)];
    nlohmann::json layers = nlohmann::json::array();
    for (int i = first; i < first + count; ++i) {
        auto layer = canonical["layers"][static_cast<std::size_t>(i)];
        if (i == first) layer["inputs"] = {"input"};
        layers.push_back(layer);
    }
    const ValueInfo& in = model.value(head.inputs[0]);
    const ValueInfo& out = model.nodes[static_cast<std::size_t>(first + count - 1)].output_info.front();
    if (!(out.rank() == 2 && out.dims[0] == Dim::batch_times(1)))
        layers.push_back({{"kind", "flatten"}, {"name", "harness_flatten"}, {"axis", 1}});
    model_ = parse({{"input", input_json(in)},
                    {"layers", layers},
                    {"loss", {{"kind", "mean_squared_error"}, {"reduction", "sum"}}}});
    params.assign(static_cast<std::size_t>(model_.parameter_count), 0.0f);
    grads.assign(params.size(), -7.0f);  // must be overwritten
    auto net = Network::create(model_, NetworkOptions{batch, precision, false, hand_kernels, true}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    net_ = std::move(*net);
}

std::vector<float> LayerHarness::forward(const std::vector<float>& src, bool training, std::uint64_t seed) {
    REQUIRE(src.size() == net_->input().size());
    std::copy(src.begin(), src.end(), net_->input().begin());
    net_->forward(training, seed);
    return {net_->outputs().begin(), net_->outputs().end()};
}

std::vector<float> LayerHarness::backward(const std::vector<float>& diff_dst) {
    net_->backward_from(diff_dst);
    return {net_->input_gradient().begin(), net_->input_gradient().end()};
}

void check_gradients(const ModelDescription& model, std::int64_t batch, std::uint64_t seed, int samples,
                     double tolerance, int outliers, int vocabulary) {
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count));
    initialize_parameters(model, seed, params);
    const bool ints = model.input().type == ElementType::kInt;
    const auto input_size = static_cast<std::size_t>(*elements_per_example(model.input().dims) * batch);
    std::vector<float> x = ints ? std::vector<float>{} : random_vector(input_size, seed + 1);
    std::vector<std::int32_t> ids;
    if (ints) {
        psrun::Rng rng(seed + 1);
        for (std::size_t i = 0; i < input_size; ++i)
            ids.push_back(static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocabulary))));
    }
    const auto r = random_vector(static_cast<std::size_t>(batch * model.classes), seed + 2);
    const Run analytic = run(model, batch, Precision::kF32, params, x, ids, r);
    for (const float g : analytic.params_grad) REQUIRE(g != -7.0f);  // every gradient written

    std::vector<float> grads(params.size());
    NetworkOptions o{batch, Precision::kF32, false, false, false};
    auto net = Network::create(model, o, params, grads);
    REQUIRE(net);
    std::copy(x.begin(), x.end(), (*net)->input().begin());
    std::copy(ids.begin(), ids.end(), (*net)->input_ids().begin());
    for (const auto& t : model.tensors) {
        if (t.cls != TensorClass::kTrainable) continue;
        const auto coords = sample(static_cast<std::size_t>(t.size), samples, seed + 3);
        std::vector<float> g(analytic.params_grad.begin() + t.offset, analytic.params_grad.begin() + t.offset + t.size);
        std::vector<double> numeric;
        for (const auto c : coords)
            numeric.push_back(central_difference(params[static_cast<std::size_t>(t.offset) + c], g[c],
                                                 [&] { return objective(**net, r); }));
        compare("tensor " + t.name, numeric, g, coords, tolerance, outliers);
    }
    if (ints) return;
    const auto coords = sample(input_size, samples, seed + 4);
    std::vector<double> numeric;
    for (const auto c : coords)
        numeric.push_back(
            central_difference((*net)->input()[c], analytic.input_grad[c], [&] { return objective(**net, r); }));
    compare("the input", numeric, analytic.input_grad, coords, tolerance, outliers);
}

void check_bf16_against_f32(const ModelDescription& model, std::int64_t batch, std::uint64_t seed, double tolerance,
                            int vocabulary) {
    if (!engine_bf16_supported()) {
        WARN("no native bf16 on this CPU: bf16 not checked");
        return;
    }
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count));
    initialize_parameters(model, seed, params);
    const bool ints = model.input().type == ElementType::kInt;
    const auto input_size = static_cast<std::size_t>(*elements_per_example(model.input().dims) * batch);
    // The input bf16-exact in both runs: what is compared is the network's arithmetic, not the
    // rounding of the input (which moves a grid_sample's points across pixel edges).
    std::vector<float> x =
        ints ? std::vector<float>{} : bf16_exact(random_vector(input_size, seed + 1), Precision::kBf16);
    std::vector<std::int32_t> ids;
    if (ints) {
        psrun::Rng rng(seed + 1);
        for (std::size_t i = 0; i < input_size; ++i)
            ids.push_back(static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocabulary))));
    }
    const auto r = random_vector(static_cast<std::size_t>(batch * model.classes), seed + 2);
    const Run f32 = run(model, batch, Precision::kF32, params, x, ids, r);
    const Run bf16 = run(model, batch, Precision::kBf16, params, x, ids, r);
    CHECK(rel_l2(bf16.out, f32.out) < tolerance);
    for (const auto& t : model.tensors) {
        if (t.cls != TensorClass::kTrainable) continue;
        std::vector<float> a(bf16.params_grad.begin() + t.offset, bf16.params_grad.begin() + t.offset + t.size);
        std::vector<float> b(f32.params_grad.begin() + t.offset, f32.params_grad.begin() + t.offset + t.size);
        INFO("tensor " << t.name);
        CHECK(rel_l2(a, b) < tolerance);
    }
    if (!ints) {
        INFO("the input");
        CHECK(rel_l2(bf16.input_grad, f32.input_grad) < tolerance);
    }
}

std::vector<Precision> test_precisions(const char* what) {
    if (engine_bf16_supported()) return {Precision::kF32, Precision::kBf16};
    WARN("no native bf16 on this CPU: bf16 " << what << " not tested");
    return {Precision::kF32};
}

std::vector<float> bf16_exact(std::vector<float> v, Precision precision) {
    if (precision != Precision::kBf16) return v;
    for (auto& x : v) {
        std::uint32_t u;
        std::memcpy(&u, &x, sizeof u);
        u += 0x7fffu + ((u >> 16) & 1u);
        u &= 0xffff0000u;
        std::memcpy(&x, &u, sizeof u);
    }
    return v;
}

std::vector<float> tensor_slice(const std::vector<float>& all, const TensorDef* t) {
    if (t == nullptr) return {};
    return {all.begin() + static_cast<std::ptrdiff_t>(t->offset),
            all.begin() + static_cast<std::ptrdiff_t>(t->offset + t->size)};
}

}  // namespace psrun::nn::test
