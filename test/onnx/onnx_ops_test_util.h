// Helpers of the ONNX op tests (onnx_ops_test.cpp, onnx_layout_ops_test.cpp): import a graph
// (REQUIRE-ing success or a refusal), find a node, set a string attribute, and the round trip of
// a description through export and import (graph only) with the same kinds, attributes and
// outputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test/onnx/onnx_test_graph.h"
#include "workerd/nn/model_description.h"

namespace psrun::onnx_io::test {

nn::ModelDescription imported(const std::string& bytes);
// The error message of importing `g` (REQUIRE-fails when it imports).
std::string refusal(const TestGraph& g);
const nn::Node& node_named(const nn::ModelDescription& m, const std::string& name);
void set_string(onnx::NodeProto& node, const std::string& name, const std::string& value);
std::vector<std::string> kinds(const nn::ModelDescription& m);
// The outputs of `m` with `params` on a batch of 3 drawn from `seed` (inputs in [-1, 1]).
std::vector<float> outputs(const nn::ModelDescription& m, const std::vector<float>& params, std::uint64_t seed);
// A description of `layers` on an input of `shape` (float), loss mean squared error.
nn::ModelDescription described(const nlohmann::json& layers, const std::vector<std::int64_t>& shape);
// Export (graph only) and import back: the same kinds, attributes and outputs.
void check_round_trip(const nlohmann::json& layers, const std::vector<std::int64_t>& shape);

}  // namespace psrun::onnx_io::test
