// batch_norm (workerd/nn/ops/batch_norm*.cpp) against naive reference loops: the training
// forward with the batch's statistics, its gradients, the deltas of the running statistics
// (PyTorch's momentum rule, unbiased variance), evaluation over the running statistics,
// batch_norm + relu; k training steps through the standalone update (optimizer on the
// trainable tensors, p -= delta on the state) against a reference loop; finite differences and
// bf16; and the description's errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "test/nn/engine_test_util.h"
#include "test/nn/reference_layers.h"
#include "test/nn/reference_norm.h"
#include "workerd/local_update.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/parameter_set.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

// Rounded to bf16 (nearest even) in bf16, so that the reference sees what the layer sees.
std::unique_ptr<Network> make_net(const ModelDescription& m, std::int64_t batch, Precision p,
                                  std::vector<float>& params, std::vector<float>& grads, bool forward_only = false) {
    auto net = Network::create(m, NetworkOptions{batch, p, forward_only, false, !forward_only}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    return std::move(*net);
}

struct BnCase {
    std::vector<std::int64_t> shape;  // after N: C, spatial...
    std::int64_t batch;
    bool scale, center;
    double momentum;
};

std::string parse_error(const json& layers, const std::vector<std::int64_t>& shape, const char* type = "float") {
    const json doc{
        {"input", {{"shape", shape}, {"type", type}}}, {"layers", layers}, {"loss", {{"kind", "mean_squared_error"}}}};
    auto m = parse_model(doc, "F");
    REQUIRE_FALSE(m);
    CHECK(m.error().code == ErrorCode::kInvalidArgument);
    return m.error().message;
}

}  // namespace

TEST_CASE("batch_norm matches the reference loop: batch statistics, gradients, state deltas, evaluation",
          "[nn_engine][norm][batch_norm]") {
    const auto bc = GENERATE(values<BnCase>({{{5, 4, 3}, 3, true, true, 0.1},
                                             {{5, 4, 3}, 1, true, true, 0.1},
                                             {{7}, 3, true, false, 0.3},
                                             {{2, 5}, 3, false, true, 0.1},
                                             {{17, 3, 5}, 3, true, true, 1.0},
                                             {{3, 2, 3, 2}, 3, false, false, 0.05}}));
    const auto precision = GENERATE(from_range(test_precisions("batch_norm")));
    const bool bf16 = precision == Precision::kBf16;
    CAPTURE(bc.shape, bc.batch, bc.scale, bc.center, bc.momentum, to_string(precision));
    const auto model = graph_model(json::array({{{"kind", "batch_norm"},
                                                 {"name", "bn"},
                                                 {"epsilon", 1e-3},
                                                 {"momentum", bc.momentum},
                                                 {"scale", bc.scale},
                                                 {"center", bc.center}}}),
                                   bc.shape);
    const std::int64_t c = bc.shape[0], n = bc.batch;
    std::int64_t s = 1;
    for (std::size_t i = 1; i < bc.shape.size(); ++i) s *= bc.shape[i];
    std::vector<float> params = random_vector(static_cast<std::size_t>(model.parameter_count), 11, 0.5),
                       grads(params.size());
    const TensorDef *scale = model.tensor("bn/scale"), *bias = model.tensor("bn/bias"), *mean = model.tensor("bn/mean"),
                    *var = model.tensor("bn/var");
    REQUIRE((scale != nullptr) == bc.scale);
    REQUIRE((bias != nullptr) == bc.center);
    REQUIRE(mean->cls == TensorClass::kState);
    REQUIRE(var->cls == TensorClass::kState);
    for (std::int64_t i = 0; i < c; ++i) {
        params[static_cast<std::size_t>(var->offset + i)] =
            0.5f + std::fabs(params[static_cast<std::size_t>(var->offset + i)]);
        if (scale) params[static_cast<std::size_t>(scale->offset + i)] += 1.0f;
    }
    params = bf16_exact(params, precision);
    const auto x = bf16_exact(random_vector(static_cast<std::size_t>(n * c * s), 12, 2.0), precision);
    const auto dy = bf16_exact(random_vector(x.size(), 13), precision);
    const auto net = make_net(model, n, precision, params, grads);
    std::copy(x.begin(), x.end(), net->input().begin());
    net->forward(true);
    const auto ref = batch_norm_ref(x, dy, n, c, s, tensor_slice(params, scale), tensor_slice(params, bias), 1e-3);
    const double tol = bf16 ? 1e-2 : 1e-5;
    CHECK(rel_l2({net->outputs().begin(), net->outputs().end()}, ref.y) < tol);

    // The state deltas: old - new = momentum (old - batch), the variance unbiased.
    const double count = static_cast<double>(n * s), unbias = count > 1 ? count / (count - 1) : 1.0;
    std::vector<double> want_mean, want_var;
    for (std::int64_t i = 0; i < c; ++i) {
        const auto k = static_cast<std::size_t>(i);
        want_mean.push_back(bc.momentum * (params[static_cast<std::size_t>(mean->offset) + k] - ref.mean[k]));
        want_var.push_back(bc.momentum * (params[static_cast<std::size_t>(var->offset) + k] - ref.var[k] * unbias));
    }
    CHECK(rel_l2(tensor_slice(grads, mean), want_mean) < (bf16 ? 1e-3 : 1e-5));
    CHECK(rel_l2(tensor_slice(grads, var), want_var) < (bf16 ? 1e-2 : 1e-5));

    net->backward_from(dy);
    const double gtol = bf16 ? 2e-2 : 1e-4;
    CHECK(rel_l2({net->input_gradient().begin(), net->input_gradient().end()}, ref.dx) < gtol);
    if (scale) CHECK(rel_l2(tensor_slice(grads, scale), ref.dscale) < gtol);
    if (bias) CHECK(rel_l2(tensor_slice(grads, bias), ref.dbias) < gtol);

    // Evaluation: the running statistics, and no delta written.
    const auto before = grads;
    net->forward(false);
    const auto run_mean = tensor_slice(params, mean), run_var = tensor_slice(params, var);
    const auto eval = batch_norm_ref(x, {}, n, c, s, tensor_slice(params, scale), tensor_slice(params, bias), 1e-3,
                                     &run_mean, &run_var);
    const std::vector<float> eval_out(net->outputs().begin(), net->outputs().end());
    CHECK(rel_l2(eval_out, eval.y) < tol);
    CHECK(grads == before);
    // A forward-only network computes the same.
    std::vector<float> none;
    const auto inference = make_net(model, n, precision, params, none, true);
    std::copy(x.begin(), x.end(), inference->input().begin());
    inference->forward(false);
    CHECK(rel_l2({inference->outputs().begin(), inference->outputs().end()}, eval_out) < 1e-6);
}

TEST_CASE("batch_norm + relu (fused), forward and backward", "[nn_engine][norm][batch_norm]") {
    const auto precision = GENERATE(from_range(test_precisions("batch_norm")));
    const bool bf16 = precision == Precision::kBf16;
    const auto model =
        graph_model(json::array({{{"kind", "batch_norm"}, {"name", "bn"}}, {{"kind", "relu"}}}), {6, 5, 4});
    const std::int64_t n = 3, c = 6, s = 20;
    std::vector<float> params =
        bf16_exact(random_vector(static_cast<std::size_t>(model.parameter_count), 21, 0.5), precision);
    std::vector<float> grads(params.size());
    const TensorDef *scale = model.tensor("bn/scale"), *bias = model.tensor("bn/bias");
    for (std::int64_t i = 0; i < c; ++i) params[static_cast<std::size_t>(model.tensor("bn/var")->offset + i)] = 1.0f;
    const auto net = make_net(model, n, precision, params, grads);
    CHECK(net->kernel_labels().front() == "batch_norm+relu");  // oneDNN's fuse_norm_relu
    const auto x = bf16_exact(random_vector(static_cast<std::size_t>(n * c * s), 22), precision);
    auto dy = bf16_exact(random_vector(x.size(), 23), precision);
    std::copy(x.begin(), x.end(), net->input().begin());
    net->forward(true);
    auto ref = batch_norm_ref(x, {}, n, c, s, tensor_slice(params, scale), tensor_slice(params, bias), 1e-5);
    for (auto& y : ref.y) y = std::max(y, 0.0);
    const double tol = bf16 ? 1e-2 : 1e-5;
    CHECK(rel_l2({net->outputs().begin(), net->outputs().end()}, ref.y) < tol);
    net->backward_from(dy);
    for (std::size_t i = 0; i < dy.size(); ++i)
        if (ref.y[i] <= 0) dy[i] = 0;
    const auto back = batch_norm_ref(x, dy, n, c, s, tensor_slice(params, scale), tensor_slice(params, bias), 1e-5);
    CHECK(rel_l2({net->input_gradient().begin(), net->input_gradient().end()}, back.dx) < (bf16 ? 2e-2 : 1e-4));
    CHECK(rel_l2(tensor_slice(grads, scale), back.dscale) < (bf16 ? 2e-2 : 1e-4));
    CHECK(rel_l2(tensor_slice(grads, bias), back.dbias) < (bf16 ? 2e-2 : 1e-4));
}

// Images with a uniform background: after a conv with bias most of a channel's values are one
// number. oneDNN 2.6's bnorm_jit sums the batch's statistics in f32 (off by up to 5e-5 of the
// mean there, the output by 1e-4), so outputs near 0 landed on the wrong side of the ReLU and
// moved the shift's gradient 0.6% against PyTorch; the kernel now computes them itself in
// double. Plain input (nchw) and a conv's output (the blocked format oneDNN picks; a 1x1 conv
// with identity weights passes the values unchanged), with the ReLU fused or not.
TEST_CASE("batch_norm's batch statistics are exact to f32 on mostly repeated values (image backgrounds)",
          "[nn_engine][norm][batch_norm]") {
    const bool conv = GENERATE(false, true);
    CAPTURE(conv);
    const std::int64_t n = 16, c = 8, s = 28 * 28;
    json layers = json::array();
    if (conv) layers.push_back({{"kind", "conv2d"}, {"name", "conv"}, {"filters", c}, {"kernel", 1}, {"bias", false}});
    layers.push_back({{"kind", "batch_norm"}, {"name", "bn"}, {"momentum", 1.0}});
    layers.push_back({{"kind", "relu"}});
    const auto model = graph_model(layers, {c, 28, 28});
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count), 0.0f), grads(params.size());
    const TensorDef *scale = model.tensor("bn/scale"), *bias = model.tensor("bn/bias"), *mean = model.tensor("bn/mean");
    for (std::int64_t i = 0; i < c; ++i) {
        params[static_cast<std::size_t>(scale->offset + i)] = 1.0f;
        params[static_cast<std::size_t>(model.tensor("bn/var")->offset + i)] = 1.0f;
        if (conv) params[static_cast<std::size_t>(model.tensor("conv/w")->offset + i * c + i)] = 1.0f;
    }
    // 3 in 4 values of channel ch are its background 0.131 (ch + 1), the others uniform in [-1, 1].
    auto x = random_vector(static_cast<std::size_t>(n * c * s), 31);
    const auto pick = random_vector(x.size(), 32);
    for (std::int64_t b = 0; b < n; ++b)
        for (std::int64_t ch = 0; ch < c; ++ch)
            for (std::int64_t i = 0; i < s; ++i) {
                const auto k = static_cast<std::size_t>((b * c + ch) * s + i);
                if (pick[k] < 0.5f) x[k] = 0.1310033f * static_cast<float>(ch + 1);
            }
    const auto dy = random_vector(x.size(), 33);
    const auto net = make_net(model, n, Precision::kF32, params, grads);
    std::copy(x.begin(), x.end(), net->input().begin());
    net->forward(true);
    auto ref = batch_norm_ref(x, {}, n, c, s, tensor_slice(params, scale), tensor_slice(params, bias), 1e-5);
    double worst = 0;
    std::int64_t flipped = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double want = std::max(ref.y[i], 0.0), got = net->outputs()[i];
        worst = std::max(worst, std::abs(got - want));
        if ((got > 0) != (want > 0)) ++flipped;
    }
    CHECK(worst < 2e-6);  // f32 rounding of outputs up to ~2; 1e-4 with oneDNN's statistics
    CHECK(flipped == 0);
    // momentum 1: the mean's delta is old - batch = -batch.
    std::vector<double> want_delta;
    for (const double m : ref.mean) want_delta.push_back(-m);
    CHECK(rel_l2(tensor_slice(grads, mean), want_delta) < 1e-6);

    net->backward_from(dy);
    auto masked = dy;
    for (std::size_t i = 0; i < dy.size(); ++i)
        if (ref.y[i] <= 0) masked[i] = 0;
    const auto back = batch_norm_ref(x, masked, n, c, s, tensor_slice(params, scale), tensor_slice(params, bias), 1e-5);
    CHECK(rel_l2(tensor_slice(grads, bias), back.dbias) < 1e-5);
    CHECK(rel_l2(tensor_slice(grads, scale), back.dscale) < 1e-5);
    CHECK(rel_l2({net->input_gradient().begin(), net->input_gradient().end()}, back.dx) < 1e-5);
}

TEST_CASE("k training steps move the running statistics by PyTorch's momentum rule; evaluation uses them",
          "[nn_engine][norm][batch_norm]") {
    // bn0 on the input, a conv, bn1 on its output, relu, dense: the reference recomputes bn0's
    // and bn1's batch statistics from the parameters before each step.
    const auto model = model_from(
        json::array({{{"kind", "batch_norm"}, {"name", "bn0"}, {"momentum", 0.1}},
                     {{"kind", "conv2d"}, {"name", "conv"}, {"filters", 3}, {"kernel", 3}, {"padding", "same"}},
                     {{"kind", "batch_norm"}, {"name", "bn1"}, {"momentum", 0.25}},
                     {{"kind", "relu"}}}),
        2, 5, 5);
    const std::int64_t n = 4, steps = 6;
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count)), grads(params.size());
    initialize_parameters(model, 5, params);
    const auto initial = params;
    const auto tensors = worker::model_tensors(model);
    REQUIRE(tensors[2].tensor_class == psrun::TensorClass::kState);  // bn0/mean
    OptimizerConfig sgd;
    sgd.kind = OptimizerKind::kMomentum;
    sgd.learning_rate = 0.05f;
    worker::LocalUpdate update(sgd, tensors, 3);
    const auto net = make_net(model, n, Precision::kF32, params, grads);
    auto tensor = [&](const char* name) { return tensor_slice(params, model.tensor(name)); };
    std::vector<double> mean0(2, 0.0), var0(2, 1.0), mean1(3, 0.0), var1(3, 1.0);
    auto move = [](std::vector<double>& run, const std::vector<double>& batch, double m, double unbias) {
        for (std::size_t i = 0; i < run.size(); ++i) run[i] = (1 - m) * run[i] + m * batch[i] * unbias;
    };
    for (std::int64_t step = 0; step < steps; ++step) {
        const auto x = random_vector(static_cast<std::size_t>(n * 50), 100 + static_cast<std::uint64_t>(step), 3.0);
        std::copy(x.begin(), x.end(), net->input().begin());
        for (std::int64_t i = 0; i < n; ++i)
            net->labels()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i + step) % 3);
        const auto r0 = batch_norm_ref(x, {}, n, 2, 25, tensor("bn0/scale"), tensor("bn0/bias"), 1e-5);
        const std::vector<float> y0(r0.y.begin(), r0.y.end());
        std::vector<float> conv_params = tensor("conv/w"), conv_b = tensor("conv/b");
        conv_params.insert(conv_params.end(), conv_b.begin(), conv_b.end());
        const auto conv = conv_ref(model.nodes[1], model.value(model.nodes[1].inputs[0]), n, y0, conv_params,
                                   std::vector<float>(static_cast<std::size_t>(n * 75), 0.0f), false);
        const auto r1 = batch_norm_ref(std::vector<float>(conv.y.begin(), conv.y.end()), {}, n, 3, 25,
                                       tensor("bn1/scale"), tensor("bn1/bias"), 1e-5);
        move(mean0, r0.mean, 0.1, 1.0);
        move(var0, r0.var, 0.1, 100.0 / 99.0);
        move(mean1, r1.mean, 0.25, 1.0);
        move(var1, r1.var, 0.25, 100.0 / 99.0);
        net->train_step(static_cast<std::uint64_t>(step));
        update.apply(params, grads);
    }
    CHECK(rel_l2(tensor("bn0/mean"), mean0) < 1e-5);
    CHECK(rel_l2(tensor("bn0/var"), var0) < 1e-5);
    CHECK(rel_l2(tensor("bn1/mean"), mean1) < 1e-5);
    CHECK(rel_l2(tensor("bn1/var"), var1) < 1e-5);
    CHECK(tensor("conv/w") != tensor_slice(initial, model.tensor("conv/w")));  // the optimizer trained meanwhile

    // Evaluation over the running statistics: bn0, conv, bn1, relu, dense by the reference.
    const auto x = random_vector(static_cast<std::size_t>(n * 50), 999, 3.0);
    const auto rm0 = tensor("bn0/mean"), rv0 = tensor("bn0/var"), rm1 = tensor("bn1/mean"), rv1 = tensor("bn1/var");
    const auto e0 = batch_norm_ref(x, {}, n, 2, 25, tensor("bn0/scale"), tensor("bn0/bias"), 1e-5, &rm0, &rv0);
    std::vector<float> conv_params = tensor("conv/w"), conv_b = tensor("conv/b");
    conv_params.insert(conv_params.end(), conv_b.begin(), conv_b.end());
    const auto conv =
        conv_ref(model.nodes[1], model.value(model.nodes[1].inputs[0]), n, std::vector<float>(e0.y.begin(), e0.y.end()),
                 conv_params, std::vector<float>(static_cast<std::size_t>(n * 75), 0.0f), false);
    auto e1 = batch_norm_ref(std::vector<float>(conv.y.begin(), conv.y.end()), {}, n, 3, 25, tensor("bn1/scale"),
                             tensor("bn1/bias"), 1e-5, &rm1, &rv1);
    for (auto& v : e1.y) v = std::max(v, 0.0);
    std::vector<float> dense_params = tensor("dense1/w"), dense_b = tensor("dense1/b");
    dense_params.insert(dense_params.end(), dense_b.begin(), dense_b.end());
    const auto& dense = model.nodes[4];
    const auto logits = dense_ref(dense, model.value(dense.inputs[0]), n, std::vector<float>(e1.y.begin(), e1.y.end()),
                                  dense_params, std::vector<float>(static_cast<std::size_t>(n * 3), 0.0f), false);
    std::copy(x.begin(), x.end(), net->input().begin());
    net->forward(false);
    const std::vector<float> eval(net->outputs().begin(), net->outputs().end());
    CHECK(rel_l2(eval, logits.y) < 1e-5);
    net->forward(true);
    CHECK(rel_l2({net->outputs().begin(), net->outputs().end()}, logits.y) > 1e-3);  // batch statistics differ
    std::vector<float> none;
    const auto inference = make_net(model, n, Precision::kF32, params, none, true);
    std::copy(x.begin(), x.end(), inference->input().begin());
    inference->forward(true);  // a forward-only network has no batch statistics to train
    CHECK(rel_l2({inference->outputs().begin(), inference->outputs().end()}, eval) < 1e-6);
}

TEST_CASE("batch_norm gradients: central differences (batch statistics) and bf16 against f32",
          "[nn_engine][norm][batch_norm]") {
    const std::vector<ModelDescription> models = {
        graph_model(json::array({{{"kind", "batch_norm"}}}), {3, 4, 5}),
        graph_model(json::array({{{"kind", "dense"}, {"units", 6}, {"bias", false}},
                                 {{"kind", "batch_norm"}, {"center", false}},
                                 {{"kind", "tanh"}}}),
                    {5}),
        graph_model(json::array({{{"kind", "batch_norm"}, {"scale", false}, {"momentum", 0.5}}}), {2, 3, 2, 3}),
        // Without conv or dense biases: batch_norm cancels them (their gradients are 0 up to
        // rounding). tanh, not relu: half of batch_norm's outputs sit near relu's kink, where
        // central differences are meaningless (relu is checked against the reference above).
        model_from(
            json::array({{{"kind", "conv2d"}, {"filters", 4}, {"kernel", 3}, {"padding", "same"}, {"bias", false}},
                         {{"kind", "batch_norm"}},
                         {{"kind", "tanh"}}}),
            2, 5, 6),
    };
    for (std::size_t i = 0; i < models.size(); ++i) {
        CAPTURE(i);
        check_gradients(models[i], 3, 40 + i);
        check_bf16_against_f32(models[i], 3, 50 + i, 3e-2);
    }
}

TEST_CASE("batch_norm description errors name the field or the shape", "[nn_engine][norm][batch_norm]") {
    using Catch::Contains;
    CHECK_THAT(parse_error(json::array({{{"kind", "batch_norm"}, {"epsilon", 0}}}), {3, 4}),
               Contains("layer 0 (batch_norm): field \"epsilon\": expected a number in (0, 1], got 0"));
    CHECK_THAT(parse_error(json::array({{{"kind", "batch_norm"}, {"momentum", 1.5}}}), {3, 4}),
               Contains("field \"momentum\": expected a number in [0, 1]"));
    CHECK_THAT(parse_error(json::array({{{"kind", "batch_norm"}, {"momentun", 0.1}}}), {3, 4}),
               Contains("unknown field \"momentun\" (did you mean \"momentum\"?"));
    CHECK_THAT(parse_error(json::array({{{"kind", "batch_norm"}, {"center", "yes"}}}), {3, 4}),
               Contains("field \"center\""));
    CHECK_THAT(parse_error(json::array({{{"kind", "batch_norm"}}}), {3, 4}, "int"),
               Contains("batch_norm): expects floats, got integer ids"));
    CHECK_THAT(
        parse_error(json::array({{{"kind", "transpose"}, {"perm", {1, 0, 2}}}, {{"kind", "batch_norm"}}}), {3, 4}),
        Contains("expects an N x C (x D x H x W) input of rank 2 to 5, got 3 x N x 4"));
    // State tensors belong to one layer, and are never computed values.
    CHECK_THAT(parse_error(json::array({{{"kind", "batch_norm"}, {"name", "a"}},
                                        {{"kind", "batch_norm"}, {"tensors", {{"mean", "a/mean"}}}}}),
                           {3, 4}),
               Contains("slot \"mean\" binds tensor a/mean (state, created by a) but is a state slot (state tensors "
                        "belong to one layer)"));
    CHECK_THAT(parse_error(json::array({{{"kind", "dense"}, {"name", "d"}, {"units", 3}},
                                        {{"kind", "batch_norm"}, {"inputs", {"input"}}, {"tensors", {{"var", "d"}}}}}),
                           {3}),
               Contains("slot \"var\" is a state slot: it cannot bind the computed value d"));
    CHECK_THAT(parse_error(json::array({{{"kind", "batch_norm"}, {"name", "a"}},
                                        {{"kind", "dense"}, {"units", 3}, {"tensors", {{"b", "a/var"}}}}}),
                           {3}),
               Contains("slot \"b\" binds tensor a/var (state, created by a) but is a trainable slot"));
}

}  // namespace psrun::nn::test
