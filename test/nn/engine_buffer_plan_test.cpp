// The engine's buffer plan (NetworkOptions::plan_buffers, workerd/nn/buffer_plan.h) changes
// where buffers live, never a result: networks trained a few SGD steps with the plan and without
// it end with the same parameters, losses and outputs bit for bit: a CNN with dropout
// (mnist_deep), a residual net with batch norm (resnet20), a transformer (transformer_rows), an
// LSTM, and split/concat with a constant and a residual add whose output is a flatten (a view
// of a planned buffer read after the step). The plan needs less than one buffer each, and
// PSRUN_PLAN_BUFFERS=0 turns it off. And, trained the same way, a frozen parameter's gradient
// place stays untouched.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "test/nn/engine_test_util.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/nn/zoo.h"
#include "workerd/parameter_set.h"

namespace psrun::nn::test::engine_buffer_plan_test {
namespace {

using nlohmann::json;

struct Run {
    std::vector<float> params;
    std::vector<float> losses;
    std::vector<float> outputs;  // after the last step
    MemoryUse use;
};

void fill(Network& net, std::uint64_t seed) {
    psrun::Rng rng(seed);
    for (std::size_t i = 0; i < net.model().inputs.size(); ++i) {
        for (auto& v : net.input(i)) v = static_cast<float>(2.0 * rng.uniform() - 1.0);
        for (auto& v : net.input_ids(i)) v = 0;
    }
    const auto classes = static_cast<std::uint64_t>(std::max<std::int64_t>(net.model().classes, 1));
    for (auto& l : net.labels()) l = static_cast<std::int32_t>(rng.below(classes));
    for (auto& t : net.targets()) t = static_cast<float>(rng.uniform());
}

Run train(const ModelDescription& model, std::int64_t batch, bool plan, int steps) {
    worker::ParameterSet params(worker::model_tensors(model));
    initialize_parameters(model, 5, params.all());
    std::vector<float> grads(params.size(), 0.0f);
    NetworkOptions options;
    options.batch_size = batch;
    options.plan_buffers = plan;
    auto net = Network::create(model, options, params.all(), grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    Network& n = **net;
    Run run;
    for (int s = 0; s < steps; ++s) {
        fill(n, 100 + static_cast<std::uint64_t>(s));
        run.losses.push_back(n.train_step(1 + static_cast<std::uint64_t>(s)));
        auto p = params.all();
        for (std::size_t i = 0; i < p.size(); ++i) p[i] -= 0.01f * grads[i];
    }
    run.outputs.assign(n.outputs().begin(), n.outputs().end());
    run.params.assign(params.all().begin(), params.all().end());
    run.use = n.memory_use();
    return run;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void check_same(const ModelDescription& model, std::int64_t batch, int steps) {
    const Run planned = train(model, batch, true, steps);
    const Run plain = train(model, batch, false, steps);
    INFO(model.name << ": planned " << planned.use.planned_bytes << " bytes, one buffer each "
                    << planned.use.unplanned_bytes << ", lower bound " << planned.use.lower_bound);
    CHECK(planned.use.planned);
    CHECK_FALSE(plain.use.planned);
    // One buffer each: the same buffers, plus, planned, a copy of an output that is a view.
    CHECK(planned.use.unplanned_bytes >= plain.use.unplanned_bytes);
    CHECK(planned.use.planned_bytes < plain.use.unplanned_bytes);
    CHECK(planned.use.lower_bound <= planned.use.planned_bytes);
    CHECK(same_bits(planned.losses, plain.losses));
    CHECK(same_bits(planned.outputs, plain.outputs));
    CHECK(same_bits(planned.params, plain.params));
}

ModelDescription zoo(const char* name) {
    auto model = load_model(name);
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    return *model;
}

TEST_CASE("buffer plan: zoo networks train bit for bit as without it", "[nn_engine][buffer_plan]") {
    check_same(zoo("mnist_deep"), 8, 3);
    check_same(zoo("resnet20"), 4, 3);
    check_same(zoo("transformer_rows"), 4, 3);
}

TEST_CASE("buffer plan: split, concat, a constant, a residual add, a flatten output", "[nn_engine][buffer_plan]") {
    // x [N, 6, 5]: s, s:1 = split(x, {2, 4}); t = tanh(dense(s:1)); c = concat(s, t, s);
    // q = c + k + pos (k a constant filled at build, pos a parameter); r = relu(dense(q)) + c;
    // output: flatten(dense(r)), a view of the dense's buffer.
    const json layers = {{{"kind", "split"}, {"name", "s"}, {"axis", 1}, {"sizes", {2, 4}}},
                         {{"kind", "dense"}, {"name", "d1"}, {"inputs", "s:1"}, {"units", 5}},
                         {{"kind", "tanh"}, {"name", "t"}},
                         {{"kind", "concat"}, {"name", "c"}, {"inputs", {"s", "t", "s"}}, {"axis", 1}},
                         {{"kind", "constant"}, {"name", "k"}, {"shape", {1, 8, 5}}, {"fill", 0.25}},
                         {{"kind", "parameter"}, {"name", "pos"}, {"shape", {1, 8, 5}}},
                         {{"kind", "add"}, {"name", "p"}, {"inputs", {"c", "k"}}},
                         {{"kind", "add"}, {"name", "q"}, {"inputs", {"p", "pos"}}},
                         {{"kind", "dense"}, {"name", "d2"}, {"units", 5}},
                         {{"kind", "relu"}, {"name", "a"}},
                         {{"kind", "add"}, {"name", "r"}, {"inputs", {"a", "c"}}},
                         {{"kind", "dense"}, {"name", "d3"}, {"units", 3}}};
    const auto model = graph_model(layers, {6, 5});
    REQUIRE(model.nodes.back().op == "flatten");
    check_same(model, 4, 4);
}

TEST_CASE("a frozen parameter is state nothing writes; the same one trainable gets its gradient", "[nn_engine]") {
    // x [N, 6, 5] + pos (a parameter [1, 6, 5]), dense, dense: pos frozen (a PyTorch buffer or a
    // requires_grad=False weight) is a kState tensor whose gradient place stays zero.
    for (const bool frozen : {true, false}) {
        json pos = {{"kind", "parameter"}, {"name", "pos"}, {"shape", {1, 6, 5}}};
        if (frozen) pos["frozen"] = true;
        const json layers = {pos,
                             {{"kind", "add"}, {"name", "p"}, {"inputs", {"input", "pos"}}},
                             {{"kind", "dense"}, {"name", "d1"}, {"units", 4}},
                             {{"kind", "flatten"}, {"name", "f"}},
                             {{"kind", "dense"}, {"name", "d2"}, {"units", 3}}};
        const auto model = graph_model(layers, {6, 5});
        const auto it = std::find_if(model.tensors.begin(), model.tensors.end(),
                                     [](const TensorDef& t) { return t.owner == "pos"; });
        REQUIRE(it != model.tensors.end());
        CHECK(it->cls == (frozen ? TensorClass::kState : TensorClass::kTrainable));
        worker::ParameterSet params(worker::model_tensors(model));
        initialize_parameters(model, 5, params.all());
        std::vector<float> grads(params.size(), 0.0f);
        NetworkOptions options;
        options.batch_size = 4;
        auto net = Network::create(model, options, params.all(), grads);
        INFO((net ? std::string() : net.error().message));
        REQUIRE(net);
        fill(**net, 7);
        (*net)->train_step(1);
        float largest = 0.0f;
        for (std::int64_t i = 0; i < it->size; ++i)
            largest = std::max(largest, std::abs(grads[static_cast<std::size_t>(it->offset + i)]));
        INFO("frozen " << frozen << ": largest gradient at pos " << largest);
        CHECK((frozen ? largest == 0.0f : largest > 0.0f));
    }
}

TEST_CASE("buffer plan: an LSTM", "[nn_engine][buffer_plan]") {
    const json layers = {{{"kind", "dense"}, {"name", "in"}, {"units", 4}},
                         {{"kind", "lstm"},
                          {"name", "rnn"},
                          {"hidden", 6},
                          {"direction", "forward"},
                          {"batch_first", true},
                          {"layout", "pytorch"},
                          {"bias", true}},
                         {{"kind", "relu"}, {"name", "act"}}};
    check_same(graph_model(layers, {5, 3}), 3, 3);
}

TEST_CASE("buffer plan: PSRUN_PLAN_BUFFERS=0 turns it off", "[nn_engine][buffer_plan]") {
    const auto model = zoo("mnist_softmax");
    worker::ParameterSet params(worker::model_tensors(model));
    std::vector<float> grads(params.size());
    NetworkOptions options;
    options.batch_size = 2;
    ::setenv("PSRUN_PLAN_BUFFERS", "0", 1);
    auto off = Network::create(model, options, params.all(), grads);
    ::unsetenv("PSRUN_PLAN_BUFFERS");
    REQUIRE(off);
    CHECK_FALSE((*off)->memory_use().planned);
    auto on = Network::create(model, options, params.all(), grads);
    REQUIRE(on);
    CHECK((*on)->memory_use().planned);
    options.forward_only = true;  // never planned
    auto eval = Network::create(model, options, params.all(), {});
    REQUIRE(eval);
    CHECK_FALSE((*eval)->memory_use().planned);
    CHECK((*eval)->memory_use().planned_bytes == (*eval)->memory_use().unplanned_bytes);
}

}  // namespace
}  // namespace psrun::nn::test::engine_buffer_plan_test
