// An index over an ONNX graph for the importer: its initializers and Constant nodes' values,
// who produces and who reads each value, the data inputs and the outputs (one, or a loss and
// its heads beside it), and which nodes the outputs need (the others, such as a training export's updated batch-norm
// statistics or a Dropout's mask, are never imported).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::onnx_io {

// Largest node and data input counts accepted.
inline constexpr int kMaxNodes = 100000;
inline constexpr std::size_t kMaxInputs = 64;
inline constexpr std::size_t kMaxOutputs = 64;

// "node 'conv1' (Conv)", or "node #3 (Conv)" for a node without a name.
std::string node_label(const onnx::NodeProto& node, int index);

class GraphIndex {
  public:
    // Errors (kInvalidArgument, without the "model F: " prefix): duplicate values, another
    // domain's operators, no data input or more than kMaxInputs, no output or more than kMaxOutputs, nodes out of
    // order, a node with more or fewer inputs or outputs than ONNX's schema for its operator at `opset` allows (so the
    // importer may read every input the schema requires).
    static Result<GraphIndex> build(const onnx::GraphProto& graph, std::int64_t opset);

    const onnx::GraphProto& graph() const { return *graph_; }
    // The data inputs (the graph inputs that are no initializers), in the graph's order, at
    // least one; input() is the first. And the graph outputs, at least one: output() is the first.
    const std::vector<const onnx::ValueInfoProto*>& inputs() const { return inputs_; }
    const onnx::ValueInfoProto& input() const { return *inputs_.front(); }
    const std::string& output() const { return output_; }
    const std::vector<std::string>& outputs() const { return outputs_; }
    // True when `value` names a data input.
    bool is_input(const std::string& value) const;
    // An initializer named `value` (nullptr otherwise).
    const onnx::TensorProto* initializer(const std::string& value) const;
    // A Constant node's tensor named `value` (nullptr otherwise).
    const onnx::TensorProto* constant(const std::string& value) const;
    // The node producing `value` (-1: the input, an initializer or undefined).
    int producer(const std::string& value) const;
    // The nodes reading `value`, in graph order.
    const std::vector<int>& readers(const std::string& value) const;
    // True when an output depends on node i.
    bool needed(int i) const { return needed_[static_cast<std::size_t>(i)]; }

  private:
    const onnx::GraphProto* graph_ = nullptr;
    std::vector<const onnx::ValueInfoProto*> inputs_;
    std::string output_;
    std::vector<std::string> outputs_;
    std::map<std::string, const onnx::TensorProto*> initializers_;
    std::map<std::string, const onnx::TensorProto*> constants_;
    std::map<std::string, int> producers_;
    std::map<std::string, std::vector<int>> readers_;
    std::vector<bool> needed_;
};

}  // namespace psrun::onnx_io
