// A small ONNX graph as PyTorch 1.13 exports a Sequential (Conv 3x3 pad 1, Relu, MaxPool 2,
// Flatten, Gemm transB=1, Softmax) on a [N, 1, 8, 8] input, built node by node so that the
// refusal tests can break one thing at a time.
#pragma once

#include <string>
#include <vector>

#include "workerd/onnx/onnx_proto.h"

namespace psrun::onnx_io::test {

struct TestGraph {
    onnx::ModelProto model;
    onnx::NodeProto* node(const std::string& name);  // by name; REQUIRE-fails when absent
    std::string bytes() const;
    // Appends a node (out of line: GCC 12's -Wrestrict misfires on protobuf's inlined setters).
    onnx::NodeProto* add_node(const std::string& op, const std::string& name, std::vector<std::string> inputs,
                              const std::string& output);
    // An INT64 initializer.
    void add_int64_tensor(const std::string& name, const std::vector<std::int64_t>& dims,
                          const std::vector<std::int64_t>& values);
    // Reorders the nodes as `names` lists them (all of them).
    void order(const std::vector<std::string>& names);
    // Appends an input to an existing node.
    static void add_input(onnx::NodeProto& node, const std::string& input);
};

// Weights are deterministic non-trivial values (i * 0.01 - ...), so layouts show.
TestGraph small_cnn(std::int64_t opset = 13);

}  // namespace psrun::onnx_io::test
