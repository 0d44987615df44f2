#include "workerd/nn/gradient_check.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "workerd/nn/kernel.h"
#include "workerd/nn/model_summary.h"
#include "workerd/nn/network.h"

namespace psrun::nn {

namespace {

Error batch_error(std::string what) { return Error{ErrorCode::kInvalidArgument, std::move(what)}; }

Result<void> check_batch(const ModelDescription& model, const CheckBatch& batch) {
    if (batch.size < 1) return tl::unexpected(batch_error("the batch is empty"));
    if (batch.inputs.size() != model.inputs.size())
        return tl::unexpected(batch_error("the batch has " + std::to_string(batch.inputs.size()) +
                                          " inputs where the model has " + std::to_string(model.inputs.size())));
    for (std::size_t i = 0; i < model.inputs.size(); ++i) {
        const InputDef& in = model.inputs[i];
        const auto per_example = elements_per_example(in.info.dims);
        if (!per_example)
            return tl::unexpected(batch_error("the model's input " + in.name + " has no fixed size per example"));
        const auto want = static_cast<std::size_t>(batch.size * *per_example);
        const bool ids = in.info.type == ElementType::kInt;
        const std::size_t have = ids ? batch.inputs[i].ids.size() : batch.inputs[i].values.size();
        if (have != want)
            return tl::unexpected(batch_error("the input " + in.name + " holds " + std::to_string(have) +
                                              " values where " + std::to_string(batch.size) + " examples of " +
                                              shape_text(in.info.dims) + " need " + std::to_string(want)));
    }
    if (!model.labels_used()) {
        // A graph loss without a label input: nothing to check.
    } else if (model.classification()) {
        if (batch.labels.size() != static_cast<std::size_t>(batch.size))
            return tl::unexpected(batch_error(std::to_string(batch.labels.size()) + " labels for " +
                                              std::to_string(batch.size) + " examples"));
        for (const auto label : batch.labels)
            if (label < 0 || label >= model.classes)
                return tl::unexpected(batch_error("label " + std::to_string(label) +
                                                  " is not a class of this model (0 to " +
                                                  std::to_string(model.classes - 1) + ")"));
    } else if (batch.targets.size() != static_cast<std::size_t>(batch.size * model.classes)) {
        return tl::unexpected(batch_error(std::to_string(batch.targets.size()) + " targets where " +
                                          std::to_string(batch.size) + " x " + std::to_string(model.classes) +
                                          " are needed"));
    }
    return {};
}

void load_batch(Network& network, const CheckBatch& batch) {
    for (std::size_t i = 0; i < batch.inputs.size(); ++i) {
        const CheckInput& in = batch.inputs[i];
        if (network.model().inputs[i].info.type == ElementType::kInt)
            std::copy(in.ids.begin(), in.ids.end(), network.input_ids(i).begin());
        else std::copy(in.values.begin(), in.values.end(), network.input(i).begin());
    }
    if (!network.model().labels_used()) return;
    if (network.model().classification()) std::copy(batch.labels.begin(), batch.labels.end(), network.labels().begin());
    else std::copy(batch.targets.begin(), batch.targets.end(), network.targets().begin());
}

double norm_of(std::span<const float> v) {
    double s = 0;
    for (const float x : v) s += static_cast<double>(x) * x;
    return std::sqrt(s);
}

// The loss's central difference along the unit vector g / |g| of one tensor (at `offset`) with
// step `eps`.
double directional_difference(Network& network, std::vector<float>& params, const TensorDef& t,
                              std::span<const float> g, double g_norm, double eps, std::uint64_t seed) {
    const auto begin = params.begin() + t.offset;
    const std::vector<float> saved(begin, begin + t.size);
    auto loss_at = [&](double step) {
        for (std::int64_t i = 0; i < t.size; ++i)
            params[static_cast<std::size_t>(t.offset + i)] =
                static_cast<float>(saved[static_cast<std::size_t>(i)] + step * g[static_cast<std::size_t>(i)] / g_norm);
        return static_cast<double>(network.forward(true, seed));
    };
    const double up = loss_at(eps), down = loss_at(-eps);
    std::copy(saved.begin(), saved.end(), begin);
    return (up - down) / (2 * eps);
}

// The difference closest to |g| over three steps, 1e-2, 1e-3 and 1e-4 of the tensor's size (at
// least 1e-2): a large step drowns a kink (a ReLU or max that the step crosses) in curvature, a
// small one the f32 loss in rounding; a wrong gradient matches at none.
std::pair<double, double> best_difference(Network& network, std::vector<float>& params, const TensorDef& t,
                                          std::span<const float> g, double g_norm, double floor, std::uint64_t seed) {
    const auto begin = params.begin() + t.offset;
    const double scale = std::max(1.0, norm_of(std::span<const float>(&*begin, static_cast<std::size_t>(t.size))));
    double best = std::numeric_limits<double>::quiet_NaN(), best_error = std::numeric_limits<double>::infinity();
    for (const double step : {1e-2, 1e-3, 1e-4}) {
        const double d = directional_difference(network, params, t, g, g_norm, step * scale, seed);
        const double error = std::abs(d - g_norm) / std::max(g_norm, floor);
        if (error < best_error) best = d, best_error = error;
    }
    return {best, best_error};
}

}  // namespace

Result<GradientCheck> check_gradients(const ModelDescription& model, std::span<const float> params,
                                      const CheckBatch& batch, const GradientCheckOptions& options) {
    PSRUN_TRY(check_batch(model, batch));
    if (params.size() != static_cast<std::size_t>(model.parameter_count))
        return tl::unexpected(batch_error("the parameters hold " + std::to_string(params.size()) +
                                          " values where the model has " + std::to_string(model.parameter_count)));
    GradientCheck check;
    std::vector<float> theta(params.begin(), params.end());
    check.gradients.assign(theta.size(), 0.0f);
    NetworkOptions net_options;
    net_options.batch_size = batch.size;
    net_options.input_gradient = options.input_gradients;
    PSRUN_TRY_ASSIGN(auto network, Network::create(model, net_options, theta, check.gradients));
    load_batch(*network, batch);
    check.loss = network->train_step(options.seed);
    const auto outputs = network->outputs();
    check.outputs.assign(outputs.begin(), outputs.end());
    if (options.input_gradients)
        for (std::size_t i = 0; i < model.inputs.size(); ++i) {
            const auto g = network->input_gradient(i);
            check.input_gradients.emplace_back(g.begin(), g.end());
        }
    net_options.input_gradient = false;
    if (!std::isfinite(check.loss))
        return tl::unexpected(batch_error("the loss is not finite: " + std::to_string(check.loss)));

    std::vector<float> bf16_gradients;
    if (options.compare_bf16 && engine_bf16_supported()) {
        bf16_gradients.assign(theta.size(), 0.0f);
        NetworkOptions bf16_options = net_options;
        bf16_options.precision = Precision::kBf16;
        auto bf16 = Network::create(model, bf16_options, theta, bf16_gradients);
        if (bf16) {
            load_batch(**bf16, batch);
            (*bf16)->train_step(options.seed);
        } else {
            check.bf16_note = "bf16: " + bf16.error().message;
            bf16_gradients.clear();
        }
    } else if (options.compare_bf16) {
        check.bf16_note = "bf16: this CPU has no native bf16 (AVX512-BF16 or AMX); compared in f32 only";
    }

    // A tensor whose gradient is zero but for rounding (a bias before a batch norm) is measured
    // against 1e-2 of the network's largest gradient: the loss's f32 rounding makes its
    // differences noise of that order, not a wrong gradient.
    double largest = 0;
    for (const auto& t : model.tensors)
        if (t.cls == TensorClass::kTrainable)
            largest = std::max(largest, norm_of(std::span<const float>(check.gradients.data() + t.offset,
                                                                       static_cast<std::size_t>(t.size))));
    const double floor = std::max(1e-3, 1e-2 * largest);
    for (const auto& t : model.tensors) {
        if (t.cls != TensorClass::kTrainable) continue;
        TensorCheck c;
        c.name = t.name;
        c.shape = t.shape;
        const std::span<const float> g(check.gradients.data() + t.offset, static_cast<std::size_t>(t.size));
        c.gradient_norm = norm_of(g);
        c.finite_difference = std::numeric_limits<double>::quiet_NaN();
        c.relative_error = 0;
        if (options.finite_differences && c.gradient_norm > 0) {
            const auto [difference, error] =
                best_difference(*network, theta, t, g, c.gradient_norm, floor, options.seed);
            c.finite_difference = difference;
            c.relative_error = error;
        }
        if (!bf16_gradients.empty()) {
            double worst = 0, scale = 0;
            for (std::int64_t i = 0; i < t.size; ++i) {
                const auto k = static_cast<std::size_t>(t.offset + i);
                worst = std::max(worst, static_cast<double>(std::abs(bf16_gradients[k] - check.gradients[k])));
                scale = std::max(scale, static_cast<double>(std::abs(check.gradients[k])));
            }
            c.bf16_error = scale > 0 ? worst / scale : worst;
        }
        check.tensors.push_back(std::move(c));
    }
    check.bf16_gradients = std::move(bf16_gradients);
    return check;
}

}  // namespace psrun::nn
