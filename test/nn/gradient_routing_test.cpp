// Gradient routing in Network::build (workerd/nn/network_plan.h, issue 39): which input_diff call
// overwrites a value's gradient (the first in backward order: later kernels first, then the order
// a kernel asks in), and the build-time check that a kernel asked for every gradient it owes.
#include <catch2/catch.hpp>

#include "workerd/nn/network_plan.h"

using namespace psrun::nn;

TEST_CASE("the first input_diff in call order overwrites, every later one adds", "[nn][gradients]") {
    ValueState x;  // read twice by kernel 3 (x * x), and once by kernel 1
    x.writers = {{1, 0}, {3, 0}, {3, 1}};
    std::vector<int> asked;
    // Kernel 3 asks for slot 1 first: that write runs first and must overwrite. (Routing by slot
    // order made slot 0's later write overwrite the sum instead.)
    CHECK(overwrites_gradient(x, 7, 3, asked));
    asked.push_back(7);
    CHECK_FALSE(overwrites_gradient(x, 7, 3, asked));  // slot 0, asked second: adds
    CHECK_FALSE(overwrites_gradient(x, 7, 1, {}));     // kernel 1 runs after kernel 3 in backward
    CHECK(overwrites_gradient(x, 7, 3, {5}));          // another value asked before does not count

    ValueState out;
    out.loss_writes = true;  // the loss writes the model output's gradient first
    out.writers = {{4, 0}};
    CHECK_FALSE(overwrites_gradient(out, 9, 4, {}));
}

TEST_CASE("a kernel that leaves out an input's gradient fails the build naming it", "[nn][gradients]") {
    const auto value = [](std::string name, bool needs_grad) {
        ValueState v;
        v.name = std::move(name);  // (not = "x": GCC 12's -Wrestrict false positive)
        v.needs_grad = needs_grad;
        return v;
    };
    NetworkPlan plan;
    plan.values.push_back(value("x", true));
    plan.values.push_back(value("ids", false));  // an int input: no gradient owed
    plan.values.push_back(value("w", true));
    KernelState k;
    k.label = "gather";
    k.inputs = {0, 1, 2};
    k.backward = true;
    k.reaches_loss = true;
    CHECK(unasked_gradients(plan, k, {true, false, true}).empty());
    const std::string missing = unasked_gradients(plan, k, {true, false, false});
    CHECK_THAT(missing, Catch::Contains("kernel gather never asked for the gradient of input 2 ('w')"));
    CHECK_THAT(unasked_gradients(plan, k, {}), Catch::Contains("input 0 ('x')"));
    k.backward = false;  // no backward: nothing owed
    CHECK(unasked_gradients(plan, k, {}).empty());
}
