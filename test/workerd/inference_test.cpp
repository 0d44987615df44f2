// Inference outside training: the softmax probabilities the engine gives on request (rows sum
// to 1, arg-max = the loss's predictions, no change to a training step's result), batches with
// a partial last one giving what one batch gives, and the classification report's arithmetic.
#include "workerd/inference.h"

#include <catch2/catch.hpp>

#include <random>

#include "workerd/classification_report.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/nn/zoo.h"

namespace psrun::worker {
namespace {

InferenceModel random_model(const char* name) {
    auto model = nn::load_model(name);
    REQUIRE(model);
    InferenceModel m;
    m.model = *model;
    m.params.assign(static_cast<std::size_t>(model->parameter_count), 0.0f);
    nn::initialize_parameters(*model, 7, m.params);
    // mnist_softmax starts at zero: give it something to tell the classes apart.
    std::mt19937 rng(3);
    std::normal_distribution<float> noise(0.0f, 0.05f);
    for (auto& p : m.params) p += noise(rng);
    return m;
}

LabeledImages random_images(std::size_t count) {
    LabeledImages d;
    d.images.count = count;
    d.images.height = d.images.width = 28;
    d.images.u8.resize(count * 784);
    std::mt19937 rng(11);
    for (auto& v : d.images.u8) v = static_cast<std::uint8_t>(rng() % 256);
    d.labels.assign(count, 0);
    return d;
}

}  // namespace

TEST_CASE("Network::probabilities: softmax rows, arg-max equal to predictions()", "[inference]") {
    const auto m = random_model("mnist_deep");
    nn::NetworkOptions options;
    options.batch_size = 5;
    options.forward_only = true;
    auto net = nn::Network::create(m.model, options, m.params, {});
    REQUIRE(net);
    const auto images = random_images(5);
    for (std::size_t i = 0; i < 5 * 784; ++i) (*net)->input()[i] = images.images.u8[i] / 255.0f;
    (*net)->forward(false);
    std::vector<float> p(5 * 10);
    (*net)->probabilities(p);
    const auto best = arg_max(p, 10);
    for (std::size_t b = 0; b < 5; ++b) {
        double sum = 0;
        for (std::size_t j = 0; j < 10; ++j) sum += p[b * 10 + j];
        CHECK(sum == Approx(1.0).margin(1e-5));
        CHECK(best[b] == (*net)->predictions()[b]);
    }
    std::vector<float> wrong(7);
    CHECK_THROWS_AS((*net)->probabilities(wrong), std::invalid_argument);
}

TEST_CASE("predict_probabilities: a partial last batch gives what one batch gives", "[inference]") {
    const auto m = random_model("mnist_softmax");
    const auto images = random_images(7);
    auto whole = predict_probabilities(m, images, 100);  // one batch of 7
    auto split = predict_probabilities(m, images, 3);    // 3 + 3 + 1 (padded)
    REQUIRE(whole);
    REQUIRE(split);
    REQUIRE(whole->size() == 70);
    REQUIRE(split->size() == 70);
    for (std::size_t i = 0; i < 70; ++i) CHECK((*split)[i] == Approx((*whole)[i]).margin(1e-6));
    CHECK_FALSE(predict_probabilities(m, images, 0));
}

TEST_CASE("classification report: precision, recall and support from the confusion matrix", "[inference]") {
    const std::vector<std::int32_t> labels = {0, 0, 0, 1, 1, 2};
    const std::vector<std::int32_t> predicted = {0, 0, 1, 1, 0, 1};
    const auto r = make_report(labels, predicted, 3);
    CHECK(r.confusion == std::vector<std::vector<std::int64_t>>{{2, 1, 0}, {1, 1, 0}, {0, 1, 0}});
    CHECK(r.support == std::vector<std::int64_t>{3, 2, 1});
    CHECK(r.correct == 3);
    CHECK(r.accuracy() == Approx(0.5));
    CHECK(r.precision[0] == Approx(2.0 / 3));
    CHECK(r.recall[0] == Approx(2.0 / 3));
    CHECK(r.precision[1] == Approx(1.0 / 3));
    CHECK(r.recall[1] == Approx(0.5));
    CHECK(r.precision[2] == 0.0);  // never predicted
    CHECK(r.recall[2] == 0.0);
    CHECK_THAT(confusion_text(r), Catch::Contains("true\\pred"));
    CHECK(report_json(r)["correct"] == 3);
    CHECK_THROWS_AS(make_report(labels, std::vector<std::int32_t>{0}, 3), std::invalid_argument);
}

}  // namespace psrun::worker
