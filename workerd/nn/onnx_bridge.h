// What an operator kind sees of ONNX when it imports or exports itself (op_schema.h): one ONNX
// node at a time, through these interfaces, so that the kinds' files need no protobuf. The
// importer and exporter in workerd/onnx/ implement them over ONNX's protobuf schema.
//
// Import: the importer walks the graph in order, evaluates shape arithmetic (Shape, Gather on
// shapes, Concat, Unsqueeze, Cast, ...) itself, recognises fused patterns (LayerNorm, GELU,
// linear layers) and hands every other node to the kind that lists its op type. The kind reads
// attributes and inputs and emits description layers (the JSON of docs/models.md, inputs named
// by psrun values); each layer is parsed and shape-inferred at once, so the next node sees its
// shapes. Export: each node of a description writes its ONNX nodes and initializers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "workerd/nn/model_description.h"

namespace psrun::nn {

class OnnxNodeImport {
  public:
    virtual ~OnnxNodeImport() = default;

    virtual std::string_view op_type() const = 0;
    virtual std::int64_t opset() const = 0;
    // The batch size the file fixes on its inputs (exported without dynamic_axes; psrun reads that
    // axis as the batch, of any size), 0 when the file leaves it symbolic. PyTorch then writes the
    // shapes it computed from the batch as constants of this size (a Reshape's target).
    virtual std::int64_t file_batch() const { return 0; }
    // Of `count` >= 1 readings of such a constant that are all exact at the file's batch (at 1:
    // fixed_batch.h, reshape_readings_at_batch_one), the one to take: 0 on the first walk; the
    // importer walks the graph again with the next where a walk fails.
    virtual std::size_t choose_reading(std::size_t /*count*/) { return 0; }
    // A unique psrun node name derived from the ONNX node's name or its first output.
    virtual std::string node_name() const = 0;
    // ONNX inputs, empty optional ones included (has_input false).
    virtual std::size_t input_count() const = 0;
    virtual bool has_input(std::size_t i) const = 0;
    virtual std::size_t output_count() const = 0;
    // True when ONNX output k is named and something reads it (a node the graph's output needs,
    // or the graph's output itself): an optional output (SoftmaxCrossEntropyLoss's log_prob)
    // worth importing. This default, for importers that cannot tell: every output there is.
    virtual bool output_read(std::size_t k) const { return k < output_count(); }

    // Input i as a psrun value: a graph value, or a float initializer made a tensor (trainable
    // unless a state slot binds it). Errors (as refuse()) for values it cannot be.
    virtual Result<std::string> value(std::size_t i) = 0;
    // Input i as a tensor slot binds it: a float initializer's tensor (no layer made for it),
    // else the graph value.
    Result<std::string> slot(std::size_t i) {
        const std::string t = initializer(i);
        if (!t.empty()) return t;
        return value(i);
    }
    // The shape of input i when it is a graph value (nullptr otherwise: a constant).
    virtual const ValueInfo* info(std::size_t i) const = 0;
    // The float initializer's name when input i is one (the tensor a slot binds), else "".
    virtual std::string initializer(std::size_t i) const = 0;
    // The dims of input i when it is an initializer or Constant (nullopt otherwise).
    virtual std::optional<std::vector<std::int64_t>> constant_shape(std::size_t i) const = 0;
    // Input i's values when they are known at import (initializers, Constant nodes, shape
    // arithmetic). ints(): nullopt also when a value depends on the batch size.
    virtual std::optional<std::vector<float>> floats(std::size_t i) const = 0;
    virtual std::optional<std::vector<std::int64_t>> ints(std::size_t i) const = 0;
    // ints(i), or a refusal naming `what` ("the pads must be known at import (a constant)").
    Result<std::vector<std::int64_t>> constant_ints(std::size_t i, const std::string& what) const {
        auto v = ints(i);
        if (!v) return tl::unexpected(refuse("the " + what + " must be known at import (a constant)"));
        return std::move(*v);
    }
    // Input i as a shape vector whose entries may be multiples of the batch size (a Reshape
    // target computed from Shape(x)); nullopt when unknown at import.
    virtual std::optional<Dims> symbolic_ints(std::size_t i) const = 0;

    // The ONNX element type (TensorProto::DataType: 1 float, 2 uint8, 3 int8, 7 int64, ...) of
    // input i when it is an initializer or a Constant node's tensor; 0 otherwise.
    virtual int element_type(std::size_t /*i*/) const { return 0; }
    // The value of input i when it is a constant fill whose shape depends on the batch size
    // (ConstantOfShape of Shape(x): an LSTM's zero initial state); nullopt otherwise.
    virtual std::optional<float> fill(std::size_t i) const = 0;
    // What a pattern recognised before the walk found input i to be, or nullptr: e.g.
    // {"pattern": "pytorch_rnn_weights", ...} for the gate reordering PyTorch's exporter writes
    // on an RNN's parameters (its producers are then never imported; workerd/onnx/
    // onnx_importer.h, claim_rnn_weights).
    virtual const nlohmann::json* pattern(std::size_t i) const = 0;

    // Attributes: `fallback` when absent; a wrong type is an error naming the attribute.
    virtual Result<std::int64_t> int_attr(const std::string& name, std::int64_t fallback) const = 0;
    virtual Result<float> float_attr(const std::string& name, float fallback) const = 0;
    virtual Result<std::optional<std::vector<std::int64_t>>> ints_attr(const std::string& name) const = 0;
    virtual Result<std::string> string_attr(const std::string& name, const std::string& fallback) const = 0;
    virtual Result<std::optional<std::vector<std::string>>> strings_attr(const std::string& name) const = 0;
    virtual bool has_attr(const std::string& name) const = 0;

    // Adds a description layer (JSON as in a model file; "name" defaults to node_name(), or
    // node_name() + "_<k>" for the k-th extra layer) and returns its name after parsing and
    // shape inference. Errors are the description's, prefixed with this node.
    virtual Result<std::string> emit(nlohmann::json layer) = 0;
    // ONNX output k is psrun value `value` (every used output must be bound).
    virtual void bind_output(std::size_t k, const std::string& value) = 0;
    // The node reading output k when it is that output's only reader and has op type `op`, as a
    // view of its own (a node this kind folds into the layer it emits: the Clip torch writes
    // between QuantizeLinear and DequantizeLinear for a reduced range); nullptr otherwise. The
    // kind reads it, binds its outputs and calls fold(), or leaves it to be imported as usual.
    virtual std::unique_ptr<OnnxNodeImport> only_reader(std::size_t /*k*/, std::string_view /*op*/) { return nullptr; }
    // Marks this node imported (by the kind that folded it): the walk skips it.
    virtual void fold() {}
    // The end of a weighted layer's import (Conv, ConvTranspose, Gemm): `tensors` as given, plus
    // input 1 as tensor "w" and input 2, when present, as "b" unless `tensors` binds them already;
    // the layer emitted and bound to output 0.
    Result<void> emit_weighted(nlohmann::json layer, nlohmann::json tensors = nlohmann::json::object()) {
        for (const auto& [slot, i] : {std::pair<const char*, std::size_t>{"w", 1}, {"b", 2}}) {
            if (tensors.contains(slot) || !has_input(i)) continue;
            PSRUN_TRY_ASSIGN(auto t, this->slot(i));
            tensors[slot] = t;
        }
        layer["tensors"] = std::move(tensors);
        PSRUN_TRY_ASSIGN(auto name, emit(std::move(layer)));
        bind_output(0, name);
        return {};
    }
    // ONNX's variadic form (Sum, Max, ... of one or more inputs) as a chain of two-input layers
    // of `kind`, ((x0 k x1) k x2) ...; returns the last one's value (input 0's for one input).
    // Refuses a node without inputs.
    Result<std::string> emit_chain(const std::string& kind) {
        if (input_count() == 0) return tl::unexpected(refuse("has no inputs; it needs one or more"));
        PSRUN_TRY_ASSIGN(auto chained, value(0));
        for (std::size_t i = 1; i < input_count(); ++i) {
            PSRUN_TRY_ASSIGN(auto v, value(i));
            PSRUN_TRY_ASSIGN(chained, emit({{"kind", kind}, {"inputs", {chained, v}}}));
        }
        return chained;
    }
    // `node 'x' (Conv): <what>` (kInvalidArgument).
    virtual Error refuse(const std::string& what) const = 0;
};

// An ONNX attribute value.
using OnnxAttr = std::variant<std::int64_t, float, std::string, std::vector<std::int64_t>, std::vector<float>,
                              std::vector<std::string>>;

class OnnxNodeExport {
  public:
    virtual ~OnnxNodeExport() = default;

    virtual const Node& node() const = 0;
    virtual const ModelDescription& model() const = 0;
    // The ONNX name of the model's input (what a shape computed from the batch size reads).
    virtual std::string model_input() const = 0;
    // ONNX value names of the node's inputs (tensors are initializers of the same name) and
    // outputs.
    virtual std::string input(std::size_t i) const = 0;
    virtual std::string output(std::size_t i) const = 0;
    // A value name not used yet, from `hint`.
    virtual std::string fresh(const std::string& hint) = 0;
    // A value name for `key`, the same for every node that asks: an ONNX value one node writes
    // and a later one reads (a quantize_linear's 8-bit values, which a dequantize_linear of them
    // takes as they are).
    virtual std::string shared_value(const std::string& key) = 0;
    // Adds a node; `name` empty: a fresh one from the description node's name.
    virtual void add(const std::string& op_type, const std::vector<std::string>& inputs,
                     const std::vector<std::string>& outputs,
                     const std::vector<std::pair<std::string, OnnxAttr>>& attrs = {}, const std::string& name = "") = 0;
    // Initializers for constants the ONNX form needs (a Reshape target, a Pad's pads); return
    // their names.
    virtual std::string int64_constant(const std::string& hint, const std::vector<std::int64_t>& values) = 0;
    virtual std::string float_constant(const std::string& hint, const std::vector<std::int64_t>& dims,
                                       std::span<const float> values) = 0;
    // An int8 (`is_signed`) or uint8 initializer (a QuantizeLinear's zero point); values in range.
    virtual std::string int8_constant(const std::string& hint, const std::vector<std::int64_t>& dims,
                                      const std::vector<std::int64_t>& values, bool is_signed) = 0;
    // A Constant node writing `values` to `output`: a float constant of the model (not an
    // initializer, which an importer could not tell from a trained tensor). `name` empty: a fresh one.
    virtual void constant_node(const std::string& output, const std::vector<std::int64_t>& dims,
                               std::span<const float> values, const std::string& name) = 0;
    // The values of tensor `name` and a way to write them differently (a dense layer after an
    // image stores its columns in TF's order; ONNX wants Flatten's).
    virtual std::span<const float> tensor_values(const std::string& name) const = 0;
    virtual void replace_initializer(const std::string& name, const std::vector<std::int64_t>& dims,
                                     std::vector<float> values) = 0;
    // The nodes just written exist from opset `opset` on (GridSample: 16): the file declares the
    // largest opset a node required, 13 when none did (every kind's form is valid from 13 on).
    virtual void require_opset(std::int64_t opset) = 0;
};

}  // namespace psrun::nn
