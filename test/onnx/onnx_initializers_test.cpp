// Initializers that are not plain parameters (test/onnx/onnx_test_graph.h graphs): the ones an
// eval-mode export merged by value (onnx_merged_initializers.h) and the buffers the psrun.frozen
// list names (onnx_freeze.h).
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "test/onnx/onnx_test_graph.h"
#include "workerd/onnx/onnx_model.h"

using namespace psrun;
using onnx_io::test::small_cnn;

TEST_CASE("parameters an eval-mode export merged by value train as tensors of their own", "[onnx]") {
    // torch.onnx's default export writes a parameter equal to another as Identity(the other):
    // here a second bias "5.bias" added after the Gemm, equal to the Gemm's "4.bias".
    auto g = small_cnn();
    g.node("/5/Softmax")->set_input(0, "/5/Add_output_0");
    g.add_node("Identity", "/5/Identity", {"4.bias"}, "5.bias");
    g.add_node("Add", "/5/Add", {"/4/Gemm_output_0", "5.bias"}, "/5/Add_output_0");
    g.order({"/0/Conv", "/1/Relu", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Identity", "/5/Add", "/5/Softmax"});
    auto m = onnx_io::import_onnx(g.bytes(), "merged.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    const auto* own = m->tensor("5.bias");
    const auto* source = m->tensor("4.bias");
    REQUIRE(own != nullptr);
    REQUIRE(source != nullptr);
    CHECK(own->cls == nn::TensorClass::kTrainable);
    CHECK(own->offset != source->offset);
    const auto& initial = *m->initial_parameters;
    for (std::int64_t i = 0; i < 3; ++i)
        CHECK(initial[static_cast<std::size_t>(own->offset + i)] ==
              initial[static_cast<std::size_t>(source->offset + i)]);
    REQUIRE(m->import_warnings.size() == 1);
    CHECK_THAT(m->import_warnings[0], Catch::StartsWith("1 initializer (5.bias = Identity(4.bias)) written as"));
    // An Identity that is its source's only reader is a plain alias: read through, no warning.
    g = small_cnn();
    g.node("/4/Gemm")->set_input(2, "4.bias_read");
    g.add_node("Identity", "/4/Identity", {"4.bias"}, "4.bias_read");
    g.order({"/0/Conv", "/1/Relu", "/2/MaxPool", "/3/Flatten", "/4/Identity", "/4/Gemm", "/5/Softmax"});
    m = onnx_io::import_onnx(g.bytes(), "alias.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    CHECK(m->tensors.size() == 4);
    CHECK(m->import_warnings.empty());
}

TEST_CASE("initializers the psrun.frozen metadata lists import as frozen parameters, not trainable tensors", "[onnx]") {
    // torch.onnx writes a module's buffers as initializers like its parameters; the list says
    // which are buffers (python/psrun_torch.py writes it). Read as they are, they become
    // frozen parameters: state tensors holding the file's values.
    auto g = small_cnn();
    auto* meta = g.model.add_metadata_props();
    meta->set_key(onnx_io::kFrozenKey);
    meta->set_value(R"(["0.weight", "0.bias"])");
    auto m = onnx_io::import_onnx(g.bytes(), "frozen.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    REQUIRE(m->tensors.size() == 4);
    std::int64_t trainable = 0;
    for (const auto& t : m->tensors) {
        const bool frozen = t.name == "0.weight" || t.name == "0.bias";
        CHECK(t.cls == (frozen ? nn::TensorClass::kState : nn::TensorClass::kTrainable));
        if (!frozen) trainable += t.size;
    }
    CHECK(trainable == 96 + 3);
    const auto frozen_parameters = std::count_if(m->nodes.begin(), m->nodes.end(), [](const nn::Node& n) {
        return n.op == "parameter" && n.attrs.value("frozen", false);
    });
    CHECK(frozen_parameters == 2);
    // A damaged list, or a name that is no float initializer, is refused naming it.
    for (const auto& [value, says] : std::vector<std::pair<std::string, std::string>>{
             {"0.weight", "expected a JSON list of initializer names"},
             {R"(["nope"])", "\"nope\" is not a float initializer of the graph"},
             {R"([3])", "3 is not a float initializer"}}) {
        meta->set_value(value);
        auto bad = onnx_io::import_onnx(g.bytes(), "frozen.onnx");
        REQUIRE_FALSE(bad);
        CHECK_THAT(bad.error().message, Catch::Contains("metadata psrun.frozen") && Catch::Contains(says));
    }
}
