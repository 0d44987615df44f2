// FMA work per trained example (workerd/train_flops.h), counted by hand for the zoo's models.
#include "workerd/train_flops.h"

#include <catch2/catch.hpp>

#include "workerd/onnx/model_loader.h"

using psrun::worker::training_flops;

namespace {

psrun::nn::ModelDescription model(const char* name) {
    auto m = psrun::onnx_io::load_any_model(name);
    REQUIRE(m);
    return std::move(*m);
}

}  // namespace

TEST_CASE("mnist_deep: 82.05 MFLOP per trained example, conv1 without a data gradient", "[train_flops]") {
    const double conv1 = 2.0 * 32 * 1 * 5 * 5 * 28 * 28;   // 1,254,400
    const double conv2 = 2.0 * 64 * 32 * 5 * 5 * 14 * 14;  // 20,070,400
    const double fc1 = 2.0 * 1024 * 3136;                   // 6,422,528
    const double fc2 = 2.0 * 10 * 1024;                     // 20,480
    const auto f = training_flops(model("mnist_deep"));
    CHECK(f.forward == conv1 + conv2 + fc1 + fc2);
    CHECK(f.weight_gradient == f.forward);
    CHECK(f.data_gradient == conv2 + fc1 + fc2);
    CHECK(f.total() == 82'049'024.0);
}

TEST_CASE("a single dense layer has no data gradient; pooling and activations add nothing", "[train_flops]") {
    const auto softmax = training_flops(model("mnist_softmax"));
    CHECK(softmax.forward == 2.0 * 10 * 784);
    CHECK(softmax.data_gradient == 0);
    CHECK(softmax.total() == 2 * 2.0 * 10 * 784);
    // Every zoo model: the forward part equals the multiply-adds in the description's own FLOP
    // count, which also counts biases, activations and pooling, so it is at most that.
    for (const char* name : {"lenet5", "dls_mlp", "mnist_cnn512", "mnist_low_level", "cifar_vgg_small"}) {
        INFO(name);
        const auto m = model(name);
        const auto f = training_flops(m);
        CHECK(f.forward > 0);
        CHECK(f.forward <= m.flops);
        CHECK(f.forward >= 0.9 * m.flops);
        CHECK(f.weight_gradient == f.forward);
        CHECK(f.data_gradient < f.forward);
    }
}
