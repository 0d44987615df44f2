// What an operator kind is to the description: its JSON fields and their canonical form, its
// shape rule, the tensors it creates or binds (parameters and state), its FLOP count, and how
// it maps to and from ONNX. One kind (or a family of close kinds) lives in one file of
// workerd/nn/ops/ with its engine kernel beside it (<file>_kernel.cpp); ops/kinds.def lists them
// (one line per kind), and op_registry.cpp and kernel_registry.cpp are expanded from that list.
//
// FLOP convention (forward, per example): a multiply-add counts 2; an element-wise operation
// (bias add, activation, dropout's scale, a binary op) counts 1 per output element; pooling
// counts one per window element read; normalisation counts 5 per element. The loss is not
// counted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "workerd/nn/field_reader.h"
#include "workerd/nn/model_description.h"

namespace psrun::nn {

class OnnxNodeImport;  // workerd/nn/onnx_bridge.h
class OnnxNodeExport;

// Shape inference of one node. Inputs are in place; the schema's infer() sets every output,
// binds or creates its tensors and adds its FLOPs. Errors carry no location (the caller
// prefixes the node).
class InferContext {
  public:
    InferContext(ModelDescription& model, Node& node) : model_(model), node_(node) {}

    const Node& node() const { return node_; }
    const nlohmann::json& attrs() const { return node_.attrs; }
    std::int64_t attr_int(const char* key) const { return node_.attrs.at(key).get<std::int64_t>(); }
    double attr_number(const char* key) const { return node_.attrs.at(key).get<double>(); }
    bool attr_bool(const char* key) const { return node_.attrs.at(key).get<bool>(); }
    std::string attr_string(const char* key) const { return node_.attrs.at(key).get<std::string>(); }
    std::vector<std::int64_t> attr_ints(const char* key) const;

    std::size_t input_count() const { return node_.data_inputs; }
    const ValueInfo& input(std::size_t i) const;
    const std::string& input_name(std::size_t i) const { return node_.inputs.at(i); }

    // Binds slot `slot` (e.g. "w") to a tensor of `shape`: the one the node's "tensors" field
    // names (an existing tensor or value must have exactly this shape and be float; a new
    // name creates it), else a new tensor "<node>/<slot>" with `init`. Appends it to the node's
    // inputs. State slots must bind a state tensor; a state tensor cannot be bound twice.
    Result<void> tensor(const std::string& slot, std::vector<std::int64_t> shape, const Initializer& init,
                        TensorClass cls = TensorClass::kTrainable);
    // Sets output i (outputs are named when set: "<node>", "<node>:1", ...).
    void set_output(std::size_t i, ValueInfo info);
    void add_flops(double per_example) { node_.flops += per_example; }
    // An error without location.
    static Error fail(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message)}; }

  private:
    ModelDescription& model_;
    Node& node_;
};

// The multiply-adds per example of one node when it trains (workerd/train_flops.h): what its
// forward, the gradient of its tensors and the gradients of its data inputs cost.
struct TrainingMacs {
    double forward = 0;
    double weight_gradient = 0;
    double data_gradient = 0;  // only for the data inputs that need one
};

// What OpSchema::training_macs reads: a node after shape inference, its model, and which of its
// data inputs need a gradient (their value depends on a trainable tensor).
struct MacsContext {
    const ModelDescription& model;
    const Node& node;
    std::vector<bool> input_needs_grad;  // parallel to the node's data inputs

    bool any_input_needs_grad() const;
    // The tensor bound to the node's slot k (in `slots` order); nullptr when the slot is bound to
    // a graph value (a transpose of a parameter) or the node has no slot k.
    const TensorDef* slot_tensor(std::size_t k) const;
    // Elements per example of `dims` (a batch axis kN counts k), the last dim left out when
    // `but_last`.
    static double per_example(const Dims& dims, bool but_last);
    // A layer's `macs` multiply-adds with weights: once forward, once for the weight gradient,
    // and once for the data gradient when its input needs one.
    TrainingMacs weighted(double macs) const { return {macs, macs, any_input_needs_grad() ? macs : 0}; }
};

struct OpSchema {
    std::string_view kind;  // JSON "kind"
    // Data inputs accepted (max -1: any number).
    int min_inputs = 1;
    int max_inputs = 1;
    // Reads the kind's fields from `reader` (which already allows kind, name, inputs and
    // tensors) into `attrs`, canonical: every default explicit.
    Result<void> (*parse)(FieldReader& reader, nlohmann::json& attrs) = nullptr;
    Result<void> (*infer)(InferContext& context) = nullptr;
    // The ONNX op types this kind imports (its import function handles each) and the
    // functions (null: none). Export writes the node's ONNX nodes, initializers included.
    std::vector<std::string_view> onnx_ops;
    Result<void> (*import_onnx)(OnnxNodeImport& node) = nullptr;
    Result<void> (*export_onnx)(OnnxNodeExport& node) = nullptr;
    // True when the kind has gradients for its data inputs (false: ids, shapes, constants).
    bool differentiable = true;
    // The node's FMA work when it trains, for bench's fraction of peak (workerd/train_flops.h);
    // null: none worth counting (element-wise kinds, pooling, normalisation: memory-bound).
    TrainingMacs (*training_macs)(const MacsContext& context) = nullptr;
};

// nullptr when unknown.
const OpSchema* find_op(std::string_view kind);
std::vector<std::string_view> op_kinds();
// The schema that imports ONNX op type `op_type`, or nullptr.
const OpSchema* find_onnx_importer(std::string_view op_type);

// Helpers shared by the kinds.
Error op_error(std::string message);
// The member of a family's table (ops/activation.cpp, binary.cpp, ...) whose kind is `kind`.
// Throws std::logic_error when none: ops/kinds.def names a kind the family does not define.
const OpSchema& family_member(const std::vector<OpSchema>& family, std::string_view kind);
// OpSchema::parse of a kind without attributes of its own.
Result<void> parse_no_attributes(FieldReader& reader, nlohmann::json& attrs);
// A dim as the description writes it: a positive integer, "N" or "4N" (multiples of the batch
// size); nullopt for anything else.
std::optional<Dim> parse_dim(const nlohmann::json& v);
// A value of a float constant as parse_constant canonicalises it: a number, "inf" or "-inf".
float constant_float(const nlohmann::json& v);
// "3x3" or "3" for a square.
std::string extent_text(std::int64_t h, std::int64_t w);
// conv2d and dense: "bias" (default true), "weight_init" and "bias_init" into attrs.
Result<void> parse_trainable_options(FieldReader& reader, nlohmann::json& attrs,
                                     const Initializer& default_weight_init);
// The initializer an attrs field holds.
Initializer attr_initializer(const nlohmann::json& attrs, const char* key);

}  // namespace psrun::nn
