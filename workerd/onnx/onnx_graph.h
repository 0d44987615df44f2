// An index over an ONNX graph for the importer: its constants (initializers and Constant
// nodes' values), who consumes each value, and the chain of nodes from the one data input to
// the one output. The engine trains a chain of layers, so anything else (a value consumed
// twice, a node off the path, a second output) is refused here with the node named. A Shape
// node reading a chain value does not fork the chain: the node that uses the computed shape
// (a Reshape) refuses it, which says more.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::onnx_io {

// Largest node count accepted (a chain of kMaxLayers layers with a few helper nodes each).
inline constexpr int kMaxNodes = 20000;

// "node 'conv1' (Conv)", or "node #3 (Conv)" for a node without a name.
std::string node_label(const onnx::NodeProto& node, int index);

class GraphIndex {
  public:
    // Errors (kInvalidArgument, without the "model F: " prefix): duplicate or malformed
    // constants, not exactly one data input and one output, a branch, a node off the chain.
    static Result<GraphIndex> build(const onnx::GraphProto& graph);

    // The data input (a graph input that is no initializer) and the graph output.
    const onnx::ValueInfoProto& input() const { return *input_; }
    const std::string& output() const { return output_; }
    // The nodes from the input to the output in order (Constant nodes excluded).
    const std::vector<const onnx::NodeProto*>& chain() const { return chain_; }
    // Index of a chain node in the graph (for labels).
    int node_index(const onnx::NodeProto* node) const { return indices_.at(node); }

    // An initializer or a Constant node's tensor named `value`; nullptr when it is neither.
    const onnx::TensorProto* constant(const std::string& value) const;

    // After the chain's nodes were translated (a node there refuses a computed input with its
    // own message): an error naming a node that is neither on the chain nor a Constant.
    Result<void> check_all_on_chain() const;

  private:
    const onnx::ValueInfoProto* input_ = nullptr;
    std::string output_;
    std::map<std::string, const onnx::TensorProto*> constants_;
    std::vector<const onnx::NodeProto*> chain_;
    std::map<const onnx::NodeProto*, int> indices_;
    const onnx::GraphProto* graph_ = nullptr;
};

}  // namespace psrun::onnx_io
