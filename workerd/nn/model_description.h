// A model as data: a directed acyclic graph of operators over named values, the parameter and
// state tensors the operators use, the model's input, its output and loss, and optionally the
// recipe it was published with. parse_model() validates a JSON description (docs/models.md)
// and runs shape inference, so every accepted description has consistent shapes, unique names,
// nodes in topological order, sizes within kMaxTensorElements, an output the loss can read,
// and inputs with distinct names that some node reads.
//
// A model has one or more named inputs (`inputs`; the JSON's "input" object is a list of one,
// its "inputs" array several). The first is the primary input: the value a first layer without
// "inputs" reads, the images of image tools and augmentation, what single-input callers feed.
//
// Values are named: the model inputs ("input" unless the file names it), every tensor (by its
// name, e.g. "conv1/w"), and every node's outputs (a node's first output is named after the
// node, further ones "<node>:1", "<node>:2"). A node's `inputs` are values: its data inputs
// first, then the tensors its slots bind (a conv's weights and bias), so the engine sees one
// kind of edge. Tensors live in one flat float buffer in `tensors` order: what goes on the wire
// to psd, into checkpoints and to ONNX initializers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "workerd/nn/initializer.h"
#include "workerd/nn/recipe.h"
#include "workerd/nn/shape.h"
#include "workerd/nn/tensor_shape.h"

namespace psrun::nn {

// kTrainable tensors are updated by the optimizer from their gradients; kState tensors (a batch
// norm's running mean and variance) are model state: the engine writes into the gradient
// buffer, at their place, the amount to subtract (the worker's moving-average step), and psd
// subtracts it as it is (docs/models.md "State").
enum class TensorClass : std::uint8_t { kTrainable, kState };
const char* to_string(TensorClass cls);

struct TensorDef {
    std::string name;
    std::vector<std::int64_t> shape;  // no batch axis
    std::int64_t size = 0;            // elements
    std::int64_t offset = 0;          // in floats, in the flat buffer
    Initializer init;
    TensorClass cls = TensorClass::kTrainable;
    std::string owner;  // the node that created it
};

struct Node {
    std::string op;                   // the kind (OpSchema::kind)
    std::string name;                 // unique among nodes; "<kind><n>" when not given
    bool named = false;               // given in the file (error messages quote it)
    std::vector<std::string> inputs;  // values: data inputs, then tensor slots
    std::size_t data_inputs = 0;      // how many of `inputs` are data inputs
    bool default_inputs = true;       // the file gave no "inputs" (the previous node's output)
    std::vector<std::string> outputs;
    // The kind's options in canonical form (every default explicit, except options added after
    // format 1, which appear only when set); the "tensors" bindings are not in here.
    nlohmann::json attrs = nlohmann::json::object();
    // Slot -> tensor or value name, as the file gave them ({"w": "emb/w"}: tied weights).
    std::map<std::string, std::string> bindings;
    // Derived by shape inference.
    std::vector<ValueInfo> output_info;
    std::vector<std::string> slots;  // slot names, parallel to inputs[data_inputs..]
    std::int64_t param_count = 0;    // elements of the tensors this node created
    double flops = 0.0;              // forward, per example (op_schema.h's convention)
};

enum class LossKind : std::uint8_t {
    kSoftmaxCrossEntropy,  // int class labels; accuracy
    kMeanSquaredError,     // float targets [N, T]; MSE and MAE
    kSigmoidCrossEntropy,  // multi-hot float targets [N, T] (binary cross-entropy with logits); F1
    // The graph computes its own loss: the output is a float scalar (a softmax_cross_entropy_loss
    // or nll_loss with mean/sum reduction, a reduce_mean over every axis, a weighted sum of
    // several heads' losses) and is trained as it is. The data's labels feed `label_input`.
    kGraph,
};
enum class LossReduction : std::uint8_t { kMean, kSum };
const char* to_string(LossKind kind);
const char* to_string(LossReduction reduction);

// A graph loss's head (docs/models.md "Heads"): per-example scores [N, C] that a loss term of the
// graph reads against a target input. kSoftmax: class scores read by softmax_cross_entropy_loss
// or nll_loss with int labels [N] (evaluated by top-1 accuracy; predicted as their softmax);
// kSigmoid: multi-label logits [N, T] read by a binary cross-entropy against float targets
// [N, T] (evaluated per label at 0.5, exact match, F1 and ROC AUC; predicted as their sigmoid);
// kValue: predictions [N, T] a regression loss reads against float targets [N, T] as
// `prediction - target` (MSE, L1, Huber; evaluated by MSE and MAE; predicted as they are).
enum class HeadKind : std::uint8_t { kSoftmax, kSigmoid, kValue };
const char* to_string(HeadKind kind);

struct Head {
    std::string value;  // the scores or logits [N, width] (a value of the model)
    HeadKind kind = HeadKind::kSoftmax;
    std::string target;      // the model input holding its labels (int [N]) or targets (float [N, width])
    std::int64_t width = 0;  // C (classes) or T (labels)
    // A per-position softmax head (segmentation): scores [N, C, d1, ...] against int labels
    // [N, d1, ...]; `spatial` holds d1, ... (empty for an [N, width] head).
    std::vector<std::int64_t> spatial;
    // Labels equal to it are not scored (the loss's ignore_index), when set.
    std::optional<std::int64_t> ignore_index;
    // Positions per example: the product of `spatial` (1 for an [N, width] head).
    std::int64_t positions() const {
        std::int64_t p = 1;
        for (const auto d : spatial) p *= d;
        return p;
    }
};

// One input of the model: a value fed each step from the data, by name.
struct InputDef {
    std::string name = "input";
    ValueInfo info;  // dims start with N: [N, C, H, W], [N, F] or [N, L] (int)
};

struct ModelDescription {
    std::string name;         // "name" (metadata; default: the source name)
    std::string description;  // one line (metadata)
    // At least one after parse_model(); names distinct; inputs[0] is the primary input.
    std::vector<InputDef> inputs{InputDef{}};
    // Softmax cross-entropy: the number of classes; the other losses: the target width T.
    std::int64_t classes = 0;
    std::vector<Node> nodes;  // topological order
    std::vector<TensorDef> tensors;
    std::string output;  // the value the loss reads: [N, classes] floats; kGraph: the scalar loss
    bool default_output = true;
    // kGraph: the input the data's labels feed (index into `inputs`), or -1: int [N] class labels
    // (read as labels by a softmax_cross_entropy_loss or nll_loss) or float [N, T] targets.
    // Every other input after the first is fed from columns (--train-input).
    int label_input = -1;
    // kGraph: the value evaluation reads as class scores [N, classes] (the scores of the loss
    // node that reads `label_input`); empty when there is none (evaluation reports the loss).
    std::string head;
    // kGraph: every head, in graph order of their values (graph_loss.h: found in the graph, or
    // the description's "heads" when `heads_given`); `head` is the first softmax head reading the
    // label input. Empty for the built-in losses (their output is the one head).
    std::vector<Head> heads;
    bool heads_given = false;  // the description named them ("loss": {"heads": [...]})
    LossKind loss = LossKind::kSoftmaxCrossEntropy;
    LossReduction reduction = LossReduction::kMean;
    std::optional<Recipe> recipe;
    // Initial values of every tensor, flat in `tensors` order (an ONNX import brings its
    // initializers); null: draw them from the tensors' initializers. Not part of the
    // architecture hash or the JSON form.
    std::shared_ptr<const std::vector<float>> initial_parameters;
    // What the importer found suspect in the file but could train (e.g. an ONNX file exported in
    // eval mode, its batch norms folded into the convolutions): one sentence each, for the tools
    // to show (workerd logs them as warnings, `psrun model show` prints them). Not part of the
    // architecture hash or the JSON form.
    std::vector<std::string> import_warnings;
    // Totals.
    std::int64_t parameter_count = 0;  // elements of all tensors (trainable and state)
    double flops = 0.0;                // forward, per example
    // Every value: the input, the tensors, the nodes' outputs.
    std::map<std::string, ValueInfo, std::less<>> values;

    // The primary input (inputs[0]) for the callers that feed one input.
    const std::string& input_name() const { return inputs.front().name; }
    const ValueInfo& input() const { return inputs.front().info; }
    // The index of the input of that name in `inputs`, or -1.
    int input_index(std::string_view name) const;
    bool multi_input() const { return inputs.size() > 1; }
    // REQUIRES: the value exists (std::out_of_range otherwise).
    const ValueInfo& value(std::string_view name) const;
    // The tensor of that name, or nullptr.
    const TensorDef* tensor(std::string_view name) const;
    // An image model's primary input C x H x W (a [N, C, H, W] float input); nullopt otherwise.
    std::optional<ActivationShape> image_input() const;
    // Class labels come with the data: softmax cross-entropy, or a graph loss whose label input
    // is int (or that has none: the data's labels are then read but feed nothing).
    bool classification() const {
        if (loss == LossKind::kGraph)
            return label_input < 0 || inputs[static_cast<std::size_t>(label_input)].info.type == ElementType::kInt;
        return loss == LossKind::kSoftmaxCrossEntropy;
    }
    // The loss evaluation reports figures for: kGraph with a head is scored as softmax
    // cross-entropy (accuracy, and its loss); kGraph without one reports its loss only.
    LossKind metric_loss() const {
        return loss == LossKind::kGraph && !head.empty() ? LossKind::kSoftmaxCrossEntropy : loss;
    }
    // An input fed from the data's labels rather than from columns (kGraph's label_input).
    bool fed_by_labels(std::size_t input) const {
        return loss == LossKind::kGraph && label_input == static_cast<int>(input);
    }
    // False for a graph loss without a label input: the data's labels then feed nothing.
    bool labels_used() const { return loss != LossKind::kGraph || label_input >= 0; }
    // The index in `heads` of the head whose value is `value`, or -1.
    int head_index(std::string_view value) const;
    // True when some input after the first is fed from columns (--train-input): every one but
    // a graph loss's label input.
    bool column_inputs() const { return inputs.size() > (label_input > 0 ? 2u : 1u); }
};

// Largest accepted description text and node count; beyond them a file is not a model.
inline constexpr std::size_t kMaxModelTextBytes = 16 << 20;
inline constexpr std::size_t kMaxLayers = 20000;

// `source_name` (a file name or built-in name) starts every error: "model F: ...".
Result<ModelDescription> parse_model(const nlohmann::json& document, std::string_view source_name);
// As above from text; a JSON syntax error names its line and column.
Result<ModelDescription> parse_model_text(std::string_view text, std::string_view source_name);

// 1 to 200 characters of A-Z a-z 0-9 _ - . / (':' separates a node name from an output index).
bool valid_value_name(std::string_view name);

}  // namespace psrun::nn
