// The built-in models: each parses, its parameter count matches arithmetic written out here,
// and mnist_deep's tensor list is exactly what workerd's ParameterSet builds today.
#include <catch2/catch.hpp>

#include "test/nn/graph_test_helpers.h"

#include <string>

#include "workerd/nn/model_summary.h"
#include "workerd/nn/zoo.h"
#include "workerd/parameter_set.h"

using namespace psrun::nn;
using namespace psrun::nn::test;

namespace {

ModelDescription load(const std::string& name) {
    auto model = load_model(name);
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    return *model;
}

}  // namespace

TEST_CASE("every built-in model parses and names itself") {
    REQUIRE(builtin_models().size() == 9);
    for (const auto& builtin : builtin_models()) {
        INFO(builtin.name);
        const auto model = load(std::string(builtin.name));
        CHECK(model.name == builtin.name);
        CHECK_FALSE(model.description.empty());
    }
}

TEST_CASE("built-in parameter counts equal the arithmetic by hand") {
    // conv1 5*5*1*32+32, conv2 5*5*32*64+64, fc1 (7*7*64)*1024+1024, fc2 1024*10+10
    CHECK(load("mnist_deep").parameter_count ==
          5 * 5 * 1 * 32 + 32 + 5 * 5 * 32 * 64 + 64 + 3136 * 1024 + 1024 + 1024 * 10 + 10);
    CHECK(load("mnist_deep").parameter_count == 3274634);
    CHECK(load("mnist_softmax").parameter_count == 784 * 10 + 10);              // 7850
    CHECK(load("dls_mlp").parameter_count == 784 * 100 + 100 + 100 * 10 + 10);  // 79510
    CHECK(load("mnist_cnn512").parameter_count ==
          5 * 5 * 1 * 32 + 32 + 5 * 5 * 32 * 64 + 64 + 3136 * 512 + 512 + 512 * 10 + 10);
    CHECK(load("mnist_cnn512").parameter_count == 1663370);
    // mnist_deep's layout, other initializers: the same tensors, another architecture hash.
    CHECK(load("mnist_low_level").parameter_count == load("mnist_deep").parameter_count);
    CHECK(architecture_hash(load("mnist_low_level")) != architecture_hash(load("mnist_deep")));
    // c1 6@5x5 same: 28x28; s2 14x14; c3 16@5x5 valid: 10x10; s4 5x5 -> 400 features
    CHECK(load("lenet5").parameter_count ==
          5 * 5 * 1 * 6 + 6 + 5 * 5 * 6 * 16 + 16 + 400 * 120 + 120 + 120 * 84 + 84 + 84 * 10 + 10);  // 61706
    // three blocks of two 3x3 convs (32, 64, 128 filters), 32 -> 16 -> 8 -> 4: 4*4*128 = 2048
    CHECK(load("cifar_vgg_small").parameter_count ==
          3 * 3 * 3 * 32 + 32 + 3 * 3 * 32 * 32 + 32 + 3 * 3 * 32 * 64 + 64 + 3 * 3 * 64 * 64 + 64 + 3 * 3 * 64 * 128 +
              128 + 3 * 3 * 128 * 128 + 128 + 2048 * 128 + 128 + 128 * 10 + 10);  // 550570
    // ResNet-20 (graph syntax): stem 3x3 3->16; 3 stages of 3 blocks of two 3x3 convs (16, 32, 64), no conv
    // bias; 1x1 projections 16->32 and 32->64; batch norms with scale and bias trained, mean and var as
    // state; dense 64->10. PyTorch's ResNet20 of bench/networks.py with 3 input channels: 272,474
    // parameters and 1,568 running statistics.
    const auto resnet = load("resnet20");
    const std::int64_t convs = 3 * 3 * 3 * 16 + 6 * (3 * 3 * 16 * 16) + (3 * 3 * 16 * 32 + 5 * 3 * 3 * 32 * 32) +
                               (3 * 3 * 32 * 64 + 5 * 3 * 3 * 64 * 64) + 16 * 32 + 32 * 64;
    const std::int64_t bn_channels = 16 + 6 * 16 + 6 * 32 + 6 * 64 + 32 + 64;  // one per conv
    CHECK(resnet.parameter_count == convs + 4 * bn_channels + 64 * 10 + 10);
    CHECK(resnet.parameter_count - 2 * bn_channels == 272474);
    CHECK(2 * bn_channels == 1568);
    // transformer_rows: embed 28->64 and a [28, 64] position table; per layer q, k, v, out 64->64, the
    // feed-forward 64->128->64 and two layer norms; dense 64->10: PyTorch's TransformerRows (bench/networks.py).
    const std::int64_t layer = 4 * (64 * 64 + 64) + (64 * 128 + 128) + (128 * 64 + 64) + 2 * (64 + 64);
    CHECK(load("transformer_rows").parameter_count == (28 * 64 + 64) + 28 * 64 + 2 * layer + (64 * 10 + 10));
    CHECK(load("transformer_rows").parameter_count == 71242);
}

TEST_CASE("mnist_deep's tensors are the wire's mnist_deep list, name by name") {
    const auto model = load("mnist_deep");
    const auto tensors = psrun::worker::wire_tensors(psrun::worker::model_tensors(model));
    const auto expected = psrun::mnist_deep_tensors();  // what psd and old checkpoints hold
    CHECK(tensors == expected);
    CHECK(static_cast<std::size_t>(model.parameter_count) == psrun::total_elements(expected));
}

TEST_CASE("mnist_deep: the tutorial's layers, initializers, loss and recipe") {
    const auto model = load("mnist_deep");
    REQUIRE(model.nodes.size() == 10);
    CHECK(model.nodes[0].name == "conv1");
    CHECK(init_of(model, 0, "w") == Initializer{InitKind::kTruncatedNormal, 0.1});
    CHECK(init_of(model, 0, "b") == Initializer{InitKind::kConstant, 0.1});
    CHECK(pads_of(model, 0) == Pads{2, 2, 2, 2});
    CHECK(model.nodes[5].name == "pool2");
    CHECK(out_shape(model.nodes[5]) == ActivationShape{64, 7, 7, false});
    CHECK(model.nodes[8].op == "dropout");
    CHECK(model.nodes[8].attrs.at("keep_prob").get<double>() == 0.5);
    CHECK(model.nodes[9].name == "fc2");
    CHECK(model.reduction == LossReduction::kMean);
    REQUIRE(model.recipe);
    CHECK(model.recipe->optimizer == "adam");
    CHECK(model.recipe->learning_rate == 1e-4);
    CHECK(model.recipe->batch_size == 50);
    CHECK(model.recipe->steps == 20000);
    // conv1: 2*(5*5*1)*32*28*28 multiply-adds + 32*28*28 bias adds
    CHECK(model.nodes[0].flops == 2.0 * 25 * 32 * 784 + 32 * 784);
    // fc1: 2*3136*1024 + 1024
    CHECK(model.nodes[6].flops == 2.0 * 3136 * 1024 + 1024);
}

TEST_CASE("dls_mlp sums its loss and names adagrad; unknown built-ins are named") {
    const auto model = load("dls_mlp");
    CHECK(model.reduction == LossReduction::kSum);
    CHECK(model.recipe->optimizer == "adagrad");
    CHECK(init_of(model, 0, "w").value == Approx(1.0 / 28));
    auto missing = load_model("mnist_dep");
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == psrun::ErrorCode::kNotFound);
    CHECK_THAT(missing.error().message, Catch::Contains("did you mean \"mnist_deep\""));
    auto no_file = load_model("/nonexistent/model.json");
    REQUIRE_FALSE(no_file);
    CHECK(no_file.error().code == psrun::ErrorCode::kIo);
}

TEST_CASE("the first format's zoo keeps its architecture hashes on the graph engine") {
    // The hashes the chain engine gave these files (checked against its build before the graph
    // engine replaced it): checkpoints and psd's HELLO check depend on them.
    const std::pair<const char*, const char*> pinned[] = {
        {"mnist_deep", "c6b52d1851f68aa9632503be13d9d453221c63804e3889d9f6ec5e13c9953d1f"},
        {"mnist_softmax", "638db9d367e7a55b6d5b7507c4c1627449373e4a71674f2cab46056be19877a1"},
        {"dls_mlp", "1eb47719425bf5a370adccc65d8856f710e53c7698affb32469986ca3606f4d9"},
        {"mnist_cnn512", "f3ed3ba14460a46fba41a036eecdf7d28e5b3402e28c9e732bd41d061104da1e"},
        {"mnist_low_level", "96112da0343161b77ab7421138a75fef2a6872d0b703618db4f3225d707e5684"},
        {"lenet5", "8a756662dbbc0a03b4bce498fa88a1ad65116ac152be4f99d5a91693f0e4cce1"},
        {"cifar_vgg_small", "fd45ef7608ac8142b4817e257a9d1201ca10655fc267299c2f6afac1883f4c72"},
    };
    for (const auto& [name, hash] : pinned) {
        INFO(name);
        CHECK(architecture_hash(load(name)) == hash);
    }
}
