// The kernels' BackwardReads declarations (workerd/nn/kernel.h) against what their backward
// really reads: with PSRUN_POISON_FREED=1 every planned buffer is filled with NaN bytes right
// after the last step its lifetime covers (workerd/nn/buffer_lifetimes.h), so a kernel that
// declares less than it reads computes from NaN (or a relu mask of zeros) where the network
// without planning, never poisoned, computes from the value. Networks covering the declared
// kinds (conv, pools, batch norm with and without relu, relu/tanh/sigmoid/gelu/elu, softmax,
// add/sub/mul/div with and without broadcasting, add + relu (in place over 4 channels, a padded
// blocked format), dense, matmul, transpose, reshape, flatten, concat, split, slice, pad,
// dropout, layer norm, group norm and prelu reading converted copies, an LSTM) train a few SGD
// steps with the plan and poison, and without the plan: losses, outputs and parameters must
// agree bit for bit. The plan must also write some outputs in place (one buffer each counts
// them; the arena does not). And which gradients share_gradients puts in one buffer, on a
// hand-made plan.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "test/nn/engine_test_util.h"
#include "workerd/nn/buffer_lifetimes.h"
#include "workerd/nn/fusion.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/nn/zoo.h"
#include "workerd/parameter_set.h"

namespace psrun::nn::test::engine_lifetimes_test {
namespace {

using nlohmann::json;

struct Run {
    std::vector<float> params, losses, outputs;
    MemoryUse use;
};

Run train(const ModelDescription& model, std::int64_t batch, bool plan, int steps) {
    worker::ParameterSet params(worker::model_tensors(model));
    initialize_parameters(model, 7, params.all());
    std::vector<float> grads(params.size(), 0.0f);
    NetworkOptions options;
    options.batch_size = batch;
    options.plan_buffers = plan;
    if (plan) ::setenv("PSRUN_POISON_FREED", "1", 1);
    auto net = Network::create(model, options, params.all(), grads);
    ::unsetenv("PSRUN_POISON_FREED");
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    Network& n = **net;
    Run run;
    for (int s = 0; s < steps; ++s) {
        psrun::Rng rng(300 + static_cast<std::uint64_t>(s));
        for (std::size_t i = 0; i < n.model().inputs.size(); ++i)
            for (auto& v : n.input(i)) v = static_cast<float>(2.0 * rng.uniform() - 1.0);
        const auto classes = static_cast<std::uint64_t>(std::max<std::int64_t>(n.model().classes, 1));
        for (auto& l : n.labels()) l = static_cast<std::int32_t>(rng.below(classes));
        for (auto& t : n.targets()) t = static_cast<float>(rng.uniform());
        run.losses.push_back(n.train_step(11 + static_cast<std::uint64_t>(s)));
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

// Returns the poisoned planned run's memory use.
MemoryUse check_poisoned(const ModelDescription& model, std::int64_t batch) {
    const Run planned = train(model, batch, true, 3);
    const Run plain = train(model, batch, false, 3);
    INFO(model.name << ": planned " << planned.use.planned_bytes << " bytes, one buffer each "
                    << planned.use.unplanned_bytes);
    CHECK(planned.use.planned);
    CHECK(same_bits(planned.losses, plain.losses));
    CHECK(same_bits(planned.outputs, plain.outputs));
    CHECK(same_bits(planned.params, plain.params));
    for (const float l : planned.losses) CHECK(std::isfinite(l));
    return planned.use;
}

ModelDescription zoo(const char* name) {
    auto model = load_model(name);
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    return *model;
}

TEST_CASE("lifetimes: zoo networks with freed buffers poisoned", "[nn_engine][buffer_plan][lifetimes]") {
    check_poisoned(zoo("mnist_deep"), 4);
    check_poisoned(zoo("resnet20"), 2);
    check_poisoned(zoo("transformer_rows"), 3);
}

TEST_CASE("lifetimes: convolutions, pools, batch norm, activations, in place", "[nn_engine][buffer_plan][lifetimes]") {
    // conv -> bn -> relu (fused) -> conv -> bn; + shortcut, relu (fused add + relu); tanh, sigmoid, elu, gelu after
    // unfused convs; max and avg pools; dropout.
    const json layers = {{{"kind", "conv2d"}, {"name", "c0"}, {"filters", 4}, {"kernel", 3}, {"padding", "same"}},
                         {{"kind", "batch_norm"}, {"name", "b0"}},
                         {{"kind", "relu"}, {"name", "r0"}},
                         {{"kind", "conv2d"}, {"name", "c1"}, {"filters", 4}, {"kernel", 3}, {"padding", "same"}},
                         {{"kind", "batch_norm"}, {"name", "b1"}},
                         {{"kind", "add"}, {"name", "a"}, {"inputs", {"b1", "r0"}}},
                         {{"kind", "relu"}, {"name", "r1"}},
                         {{"kind", "tanh"}, {"name", "t"}},
                         {{"kind", "max_pool"}, {"name", "mp"}, {"window", 2}},
                         {{"kind", "conv2d"}, {"name", "c2"}, {"filters", 3}, {"kernel", 3}, {"padding", "same"}},
                         {{"kind", "sigmoid"}, {"name", "s"}},
                         {{"kind", "elu"}, {"name", "e"}, {"alpha", 1.0}},
                         {{"kind", "avg_pool"}, {"name", "ap"}, {"window", 2}},
                         {{"kind", "gelu"}, {"name", "g"}},
                         {{"kind", "dropout"}, {"name", "d"}, {"keep_prob", 0.7}},
                         {{"kind", "flatten"}, {"name", "f"}, {"axis", 1}},
                         {{"kind", "dense"}, {"name", "fc"}, {"units", 3}}};
    const MemoryUse use = check_poisoned(graph_model(layers, {2, 8, 8}), 4);
    CHECK(use.planned_bytes < use.unplanned_bytes);
}

TEST_CASE("lifetimes: attention, layer norm, binary kinds with broadcasting, views",
          "[nn_engine][buffer_plan][lifetimes]") {
    // x: N x 4 x 6. q, k = x Wq, x Wk; p = softmax(q k^T) (in place over the scores);
    // o = p x; h = layer_norm(o + x); broadcasting sub, mul, div by parameters; split,
    // concat, reshape and transpose views; a sub of equal shapes (its first input's gradient
    // handed on, its second's negated); slice and pad.
    const json layers = {{{"kind", "parameter"}, {"name", "wq"}, {"shape", {6, 6}}},
                         {{"kind", "parameter"}, {"name", "wk"}, {"shape", {6, 6}}},
                         {{"kind", "parameter"}, {"name", "m"}, {"shape", {1, 6}}},
                         {{"kind", "parameter"}, {"name", "dv"}, {"shape", {1, 1, 6}}},
                         {{"kind", "matmul"}, {"name", "q"}, {"inputs", {"input", "wq"}}},
                         {{"kind", "matmul"}, {"name", "k"}, {"inputs", {"input", "wk"}}},
                         {{"kind", "transpose"}, {"name", "kt"}, {"perm", {0, 2, 1}}},
                         {{"kind", "matmul"}, {"name", "sc"}, {"inputs", {"q", "kt"}}},
                         {{"kind", "softmax"}, {"name", "p"}},
                         {{"kind", "matmul"}, {"name", "o"}, {"inputs", {"p", "input"}}},
                         {{"kind", "add"}, {"name", "res"}, {"inputs", {"o", "input"}}},
                         {{"kind", "layer_norm"}, {"name", "ln"}},
                         {{"kind", "sub"}, {"name", "sb"}, {"inputs", {"ln", "m"}}},
                         {{"kind", "mul"}, {"name", "ml"}, {"inputs", {"sb", "m"}}},
                         {{"kind", "div"}, {"name", "dd"}, {"inputs", {"ml", "dv"}}},
                         {{"kind", "split"}, {"name", "sp"}, {"axis", 2}, {"sizes", {2, 4}}},
                         {{"kind", "tanh"}, {"name", "th"}, {"inputs", {"sp:1"}}},
                         {{"kind", "concat"}, {"name", "cc"}, {"inputs", {"sp", "th"}}, {"axis", 2}},
                         {{"kind", "sub"}, {"name", "df"}, {"inputs", {"cc", "res"}}},
                         {{"kind", "slice"}, {"name", "sl"}, {"axes", {2}}, {"starts", {1}}, {"ends", {5}}},
                         {{"kind", "pad"}, {"name", "pd"}, {"pads", {0, 0, 1, 0, 0, 1}}},
                         {{"kind", "reshape"}, {"name", "rs"}, {"shape", {"N", 24}}},
                         {{"kind", "dense"}, {"name", "fc"}, {"units", 5}},
                         {{"kind", "relu"}, {"name", "r"}},
                         {{"kind", "dense"}, {"name", "out"}, {"units", 3}}};
    check_poisoned(graph_model(layers, {4, 6}), 3);
}

// share_gradients (buffer_lifetimes.h) on a hand-made plan: x -> conv a -> conv b -> `second`
// c -> add + relu d (c, a) -> dense e (the output). The add's backward hands dD to dC and dA.
// dA has a later writer (conv b) and a producer that may change it; dC is read only by its
// producer's backward, before conv b writes dA: where that producer leaves dC alone
// (batch_norm, conv2d), all three share one buffer, else dD and dC only. What each kernel does with the
// gradients is what its kind declares (BackwardReads::copies_output_grad, keeps_output_grad).
std::vector<int> gradient_groups(const std::string& second, const std::string& op = "add") {
    std::vector<Node> nodes(6);
    const char* ops[] = {"conv2d", "conv2d", "", "", "relu", "dense"};
    for (std::size_t i = 0; i < nodes.size(); ++i) nodes[i].op = ops[i];
    nodes[2].op = second;
    nodes[3].op = op;
    NetworkPlan plan;
    for (int v = 0; v < 6; ++v) {  // x a b c d e
        ValueState value;
        value.dims = {2, 4};
        value.needs_grad = v > 0;
        plan.values.push_back(std::move(value));
    }
    auto kernel = [&](std::vector<const Node*> n, std::vector<int> in, int out) {
        KernelState k;
        k.nodes = std::move(n);
        k.inputs = std::move(in);
        k.outputs = {out};
        k.backward = true;
        k.reaches_loss = true;
        k.reads = make_kernel(k.nodes.front()->op)->backward_reads(k.nodes, EngineContext{});  // as Network::build
        plan.kernels.push_back(std::move(k));
    };
    kernel({&nodes[0]}, {0}, 1);
    kernel({&nodes[1]}, {1}, 2);
    kernel({&nodes[2]}, {2}, 3);
    kernel({&nodes[3], &nodes[4]}, {3, 1}, 4);
    kernel({&nodes[5]}, {4}, 5);
    plan.output = 5;
    link_values(plan, true);
    compute_lifetimes(plan);
    share_gradients(plan);
    std::vector<int> groups;
    for (const auto& v : plan.values) groups.push_back(v.grad_group);
    return groups;
}

TEST_CASE("lifetimes: an add's output gradient is handed on to its inputs' in one buffer", "[buffer_plan][lifetimes]") {
    //                                     x   a   b   c  d   e
    CHECK(gradient_groups("batch_norm") == std::vector<int>{-1, 0, -1, 0, 0, -1});
    CHECK(gradient_groups("conv2d") == std::vector<int>{-1, 0, -1, 0, 0, -1});  // conv's backward reads dC only
    // prelu's backward is not declared to leave dC alone: dA cannot wait in the buffer.
    CHECK(gradient_groups("prelu") == std::vector<int>{-1, -1, -1, 0, 0, -1});
    // sub: the first input's only (the second gets -dD).
    CHECK(gradient_groups("batch_norm", "sub") == std::vector<int>{-1, -1, -1, 0, 0, -1});
    // mul's backward scales the gradient by the other input: no copy, no group.
    CHECK(gradient_groups("batch_norm", "mul") == std::vector<int>{-1, -1, -1, -1, -1, -1});
}

TEST_CASE("lifetimes: a backward that reads its input as converted keeps the conversion, not both",
          "[nn_engine][buffer_plan][lifetimes]") {
    // conv (blocked output) -> group_norm and prelu (hand kernels reading plain copies) -> conv
    // reading prelu's plain output (a blocked copy): each copy is what the backward reads
    // (BackwardReads::as_converted), so the blocked value dies at its last forward read; the
    // network is built once to learn which inputs are converted, then again knowing it.
    const json layers = {{{"kind", "conv2d"}, {"name", "c0"}, {"filters", 16}, {"kernel", 3}, {"padding", "same"}},
                         {{"kind", "group_norm"}, {"name", "g0"}, {"groups", 4}},
                         {{"kind", "prelu"}, {"name", "p0"}},
                         {{"kind", "conv2d"}, {"name", "c1"}, {"filters", 16}, {"kernel", 3}, {"padding", "same"}},
                         {{"kind", "group_norm"}, {"name", "g1"}, {"groups", 16}},
                         {{"kind", "relu"}, {"name", "r1"}},
                         {{"kind", "flatten"}, {"name", "f"}, {"axis", 1}},
                         {{"kind", "dense"}, {"name", "fc"}, {"units", 3}}};
    const auto model = graph_model(layers, {2, 8, 8});
    const MemoryUse use = check_poisoned(model, 4);
    CHECK(use.read_as_converted >= 3);           // g0 of c0's output, c1 of p0's, g1 of c1's
    ::setenv("PSRUN_BACKWARD_READS", "all", 1);  // every kernel reads everything: nothing learned
    const Run all = train(model, 4, true, 1);
    ::unsetenv("PSRUN_BACKWARD_READS");
    INFO("planned " << use.planned_bytes << " bytes; with every input read in every backward "
                    << all.use.planned_bytes);
    CHECK(use.planned_bytes < all.use.planned_bytes);
}

TEST_CASE("lifetimes: a conversion built for the backward reads the input before the output is written over it",
          "[nn_engine][buffer_plan][lifetimes]") {
    // abs(c) * sigmoid(c) on a convolution's output in a padded blocked format (3 channels): the
    // mul's forward takes its inputs as they are, its backward asks for plain copies, and the
    // planned mul writes its output over abs's (read by the backward only as converted). The
    // copy made while building the backward must still copy abs's output, not the product
    // (once it did: the gradient reaching the convolution was wrong by a factor, torch's
    // abs(x) * sigmoid(x) against psrun's differed by 50%).
    const json layers = {{{"kind", "conv2d"}, {"name", "c"}, {"filters", 3}, {"kernel", 1}},
                         {{"kind", "abs"}, {"name", "a"}, {"inputs", {"c"}}},
                         {{"kind", "sigmoid"}, {"name", "s"}, {"inputs", {"c"}}},
                         {{"kind", "mul"}, {"name", "m"}, {"inputs", {"a", "s"}}},
                         {{"kind", "neg"}, {"name", "n"}, {"inputs", {"c"}}},
                         {{"kind", "mul"}, {"name", "q"}, {"inputs", {"n", "m"}}},
                         {{"kind", "flatten"}, {"name", "f"}, {"axis", 1}},
                         {{"kind", "dense"}, {"name", "fc"}, {"units", 3}}};
    const MemoryUse use = check_poisoned(graph_model(layers, {3, 8, 8}), 4);
    CHECK(use.read_as_converted >= 2);
}

TEST_CASE("lifetimes: a kernel that could write over its input does not where that input is a view",
          "[nn_engine][buffer_plan][lifetimes]") {
    // Attention scores as torchvision's Swin computes them: a sum reshaped (a view of the sum's
    // buffer), then a softmax, which may write over its input and whose output its backward
    // reads. Written over the view, the softmax output would hold the sum's buffer into the
    // backward, placed by then for the sum's forward life only: the plan failed and the whole
    // network fell back to one buffer each (swin_t: 13.6 GB at batch 128 instead of 1.9 GB).
    const json layers = {{{"kind", "dense"}, {"name", "q"}, {"units", 8}},
                         {{"kind", "parameter"}, {"name", "bias"}, {"shape", {1, 8}}},
                         {{"kind", "add"}, {"name", "scores"}, {"inputs", {"q", "bias"}}},
                         {{"kind", "reshape"}, {"name", "heads"}, {"shape", {"N", 12, 4}}},
                         {{"kind", "softmax"}, {"name", "attn"}, {"axis", -1}},
                         {{"kind", "flatten"}, {"name", "f"}, {"axis", 1}},
                         {{"kind", "dense"}, {"name", "fc"}, {"units", 3}}};
    const MemoryUse use = check_poisoned(graph_model(layers, {6, 8}), 4);
    CHECK(use.planned_bytes < use.unplanned_bytes);
}

TEST_CASE("lifetimes: where over its input, gradients written over the output's, reduce_max's bits",
          "[nn_engine][buffer_plan][lifetimes]") {
    // h = relu(x W) (its gradient written over dR); where(x > 0, h, 0) written over h, its
    // gradient over dK; a max over positions that keeps bits, not its input; then a sub whose
    // broadcast operand's gradient is summed from backward scratch.
    const json layers = {{{"kind", "parameter"}, {"name", "w"}, {"shape", {4, 4}}},
                         {{"kind", "parameter"}, {"name", "m"}, {"shape", {1, 4}}},
                         {{"kind", "matmul"}, {"name", "h"}, {"inputs", {"input", "w"}}},
                         {{"kind", "relu"}, {"name", "r"}},
                         {{"kind", "constant"}, {"name", "zero"}, {"shape", json::array()}, {"values", {0.0}}},
                         {{"kind", "greater"}, {"name", "pos"}, {"inputs", {"input", "zero"}}},
                         {{"kind", "where"}, {"name", "k"}, {"inputs", {"pos", "r", "zero"}}},
                         {{"kind", "sub"}, {"name", "s"}, {"inputs", {"k", "m"}}},
                         {{"kind", "tanh"}, {"name", "t"}},
                         {{"kind", "reduce_max"}, {"name", "mx"}, {"axes", {1}}, {"keepdims", false}},
                         {{"kind", "dense"}, {"name", "out"}, {"units", 3}}};
    const MemoryUse use = check_poisoned(graph_model(layers, {6, 4}), 3);
    CHECK(use.in_place_bytes > 0);         // where over r (and relu over h)
    CHECK(use.shared_gradient_bytes > 0);  // dR over dK, dH over dR
}

TEST_CASE("lifetimes: gradients in their first writer's format where that needs fewer bytes",
          "[nn_engine][buffer_plan][lifetimes]") {
    // A small U-Net: the decoder's convolutions write blocked gradients of plain values (the
    // upsampled and concatenated maps); made blocked, the conversions move or go (a build tries
    // it after one without and keeps the lesser, NetworkPlan::grad_descs).
    const json layers = {{{"kind", "conv2d"}, {"name", "e0"}, {"filters", 16}, {"kernel", 3}, {"padding", "same"}},
                         {{"kind", "relu"}, {"name", "e0r"}},
                         {{"kind", "max_pool"}, {"name", "p"}, {"window", 2}},
                         {{"kind", "conv2d"}, {"name", "e1"}, {"filters", 16}, {"kernel", 3}, {"padding", "same"}},
                         {{"kind", "relu"}, {"name", "e1r"}},
                         {{"kind", "resize"}, {"name", "up"}, {"scales", {2.0, 2.0}}, {"mode", "nearest"}},
                         {{"kind", "concat"}, {"name", "cat"}, {"inputs", {"up", "e0r"}}, {"axis", 1}},
                         {{"kind", "conv2d"}, {"name", "d0"}, {"filters", 16}, {"kernel", 3}, {"padding", "same"}},
                         {{"kind", "relu"}, {"name", "d0r"}},
                         {{"kind", "conv2d"}, {"name", "d1"}, {"filters", 4}, {"kernel", 1}},
                         {{"kind", "flatten"}, {"name", "f"}, {"axis", 1}},
                         {{"kind", "dense"}, {"name", "fc"}, {"units", 3}}};
    const MemoryUse use = check_poisoned(graph_model(layers, {3, 16, 16}), 4);
    INFO("planned " << use.planned_bytes << " bytes");
    CHECK(use.gradients_in_writer_format > 0);
}

TEST_CASE("lifetimes: an LSTM and an undeclared kind keep working", "[nn_engine][buffer_plan][lifetimes]") {
    const json layers = {{{"kind", "dense"}, {"name", "in"}, {"units", 4}},
                         {{"kind", "lstm"},
                          {"name", "rnn"},
                          {"hidden", 6},
                          {"direction", "forward"},
                          {"batch_first", true},
                          {"layout", "pytorch"},
                          {"bias", true}},
                         {{"kind", "sigmoid"}, {"name", "act"}}};
    check_poisoned(graph_model(layers, {5, 3}), 3);
}

}  // namespace
}  // namespace psrun::nn::test::engine_lifetimes_test
