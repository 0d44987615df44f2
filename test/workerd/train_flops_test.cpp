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
    const double fc1 = 2.0 * 1024 * 3136;                  // 6,422,528
    const double fc2 = 2.0 * 10 * 1024;                    // 20,480
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

TEST_CASE("sequence models: a dense layer counts every position, a matmul its output times its inner dim",
          "[train_flops]") {
    // transformer_rows: 28 rows of 28, d_model 64, 4 heads of 16, feed-forward 128, 2 layers.
    const double embed = 28.0 * 64 * 28, fc = 64.0 * 10;
    const double per_layer = 4 * (64.0 * 64 * 28)     // q, k, v and the output projection
                             + 2 * (64.0 * 128 * 28)  // the feed-forward pair
                             + (4.0 * 28 * 28) * 16   // scores: [4, 28, 28] x inner 16
                             + (4.0 * 28 * 16) * 28;  // context: [4, 28, 16] x inner 28
    const auto m = model("transformer_rows");
    const auto f = training_flops(m);
    CHECK(f.forward == 2 * (embed + 2 * per_layer + fc));
    CHECK(f.forward <= m.flops);  // the description's count adds softmax, norms, adds
    CHECK(f.forward >= 0.9 * m.flops);
    // The matmuls have no weights: a data gradient for both inputs, no weight gradient.
    const double matmuls = 2 * 2 * ((4.0 * 28 * 28) * 16 + (4.0 * 28 * 16) * 28);
    CHECK(f.weight_gradient == f.forward - matmuls);
    CHECK(f.data_gradient == f.forward - 2 * embed + matmuls);
}

TEST_CASE("recurrent layers: the input and recurrent weights once per time step, each direction", "[train_flops]") {
    for (const char* direction : {"forward", "bidirectional"}) {
        INFO(direction);
        const nlohmann::json doc{{"input", {{"shape", {28, 20}}, {"type", "float"}}},
                                 {"layers",
                                  {{{"kind", "lstm"}, {"hidden", 32}, {"batch_first", true}, {"direction", direction}},
                                   {{"kind", "flatten"}},
                                   {{"kind", "dense"}, {"units", 10}}}},
                                 {"loss", {{"kind", "mean_squared_error"}}}};
        const auto m = psrun::nn::parse_model(doc, "t.json");
        REQUIRE(m);
        const double dirs = std::string(direction) == "forward" ? 1 : 2;
        const double lstm = dirs * 4 * 32 * (20 + 32) * 28, fc = dirs * 28 * 32 * 10;
        const auto f = training_flops(*m);
        CHECK(f.forward == 2 * (lstm + fc));
        CHECK(f.forward <= m->flops);  // the description's count adds the gates' state updates
        CHECK(f.weight_gradient == f.forward);
        CHECK(f.data_gradient == 2 * fc);  // the lstm reads the model input: no data gradient
    }
}

TEST_CASE("the kinds' training_macs hooks: 1-D conv, conv_transpose, a matmul of the model input", "[train_flops]") {
    auto parse = [](nlohmann::json input_shape, nlohmann::json layers) {
        const nlohmann::json doc{{"input", {{"shape", input_shape}, {"type", "float"}}},
                                 {"layers", layers},
                                 {"loss", {{"kind", "mean_squared_error"}}}};
        auto m = psrun::nn::parse_model(doc, "t.json");
        REQUIRE(m);
        return std::move(*m);
    };
    SECTION("1-D conv: every weight once per output position") {
        const auto m = parse({64}, {{{"kind", "reshape"}, {"shape", {"N", 1, 64}}},
                                    {{"kind", "conv2d"}, {"filters", 4}, {"kernel", {5}}},
                                    {{"kind", "conv2d"}, {"filters", 4}, {"kernel", {3}}},
                                    {{"kind", "flatten"}},
                                    {{"kind", "dense"}, {"units", 3}}});
        const double c1 = 4 * 5 * 60, c2 = 4 * 4 * 3 * 58, fc = 4 * 58 * 3;
        const auto f = training_flops(m);
        CHECK(f.forward == 2 * (c1 + c2 + fc));
        CHECK(f.weight_gradient == f.forward);
        CHECK(f.data_gradient == 2 * (c2 + fc));  // the first conv reads the model input
    }
    SECTION("conv_transpose: every weight once per input position") {
        const auto m = parse({2, 5, 4}, {{{"kind", "conv2d"}, {"filters", 3}, {"kernel", 1}},
                                         {{"kind", "conv_transpose"}, {"filters", 6}, {"kernel", 3}, {"stride", 2}},
                                         {{"kind", "flatten"}},
                                         {{"kind", "dense"}, {"units", 2}}});
        const double c = 2 * 3 * 5 * 4, t = 3 * 6 * 3 * 3 * (5 * 4), fc = 6.0 * 11 * 9 * 2;
        const auto f = training_flops(m);
        CHECK(f.forward == 2 * (c + t + fc));
        CHECK(f.weight_gradient == f.forward);
        CHECK(f.data_gradient == 2 * (t + fc));
    }
    SECTION("matmul: a data gradient only for the input that depends on a trainable tensor") {
        const auto m = parse({4, 6}, {{{"kind", "parameter"}, {"name", "w"}, {"shape", {6, 6}}},
                                      {{"kind", "matmul"}, {"name", "q"}, {"inputs", {"input", "w"}}},
                                      {{"kind", "flatten"}}});
        const double q = 4 * 6 * 6;
        const auto f = training_flops(m);
        CHECK(f.forward == 2 * q);
        CHECK(f.weight_gradient == 0);
        CHECK(f.data_gradient == 2 * q);  // w's, not the model input's
    }
}
