// The ONNX importer's state while it walks a graph (onnx_importer.cpp): the description being
// built, which ONNX value is which psrun value, what is known at import time
// (onnx_consts.h), and the initializers' values for the tensors the layers create. Operator
// kinds see it through nn::OnnxNodeImport (onnx_bridge.h); the fused patterns
// (onnx_patterns.cpp) use it directly. Not thread-safe; one import per object.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "common/result.h"
#include "workerd/nn/graph_builder.h"
#include "workerd/nn/model_description.h"
#include "workerd/nn/onnx_bridge.h"
#include "workerd/onnx/onnx_consts.h"
#include "workerd/onnx/onnx_graph.h"
#include "workerd/onnx/onnx_inline_if.h"
#include "workerd/onnx/reading_choices.h"

namespace psrun::onnx_io {

// What Importer::run ends with: the model, or the first If or Loop it reached, which the caller
// inlines or unrolls (onnx_inline_if.h) before importing the rewritten graph.
using ImportOutcome = std::variant<nn::ModelDescription, StaticIf, LoopUnroll>;

class Importer {
  public:
    // `frozen`: float initializers never trained (onnx_model.h, kFrozenKey): known values that
    // fold at import, else frozen parameters. `choices` (may be null: always the first reading)
    // picks among readings of a fixed batch of 1.
    Importer(const GraphIndex& graph, std::int64_t opset, std::string source, std::set<std::string> frozen = {},
             ReadingChoices* choices = nullptr);

    // Walks the graph; then the model (shape inference done) with the initializers as its
    // initial parameters, or the first If or Loop (not nn.EmbeddingBag's) it reached. Errors are
    // "model F: node 'x' (Op): ..." (kInvalidArgument).
    Result<ImportOutcome> run(const std::string& name, const std::string& description);

    const GraphIndex& graph() const { return graph_; }
    std::int64_t opset() const { return opset_; }
    const std::string& source() const { return source_; }
    // The batch size the graph's inputs fix (exported without dynamic_axes), 0 when symbolic.
    std::int64_t file_batch() const { return file_batch_; }
    // Of `count` readings of a fixed batch's constant, the one this walk takes.
    std::size_t choose_reading(std::size_t count) { return choices_ != nullptr ? choices_->pick(count, node_) : 0; }
    // The node whose import failed (run() returned an error), -1 when the error came after the
    // walk of the nodes.
    int failed_node() const { return node_; }

    // The psrun value an ONNX value is, emitting a parameter node for a float initializer or a
    // constant node for a known value. `who` labels errors.
    Result<std::string> data_value(const std::string& onnx_value, const std::string& who);
    // A float initializer as a slot binds it: its tensor name (the initializer's values are
    // recorded for it), or "" when the value is no float initializer or a frozen one.
    std::string slot_tensor(const std::string& onnx_value);
    // The same for any float initializer, frozen ones included ("" for values holding +-Inf).
    std::string initializer_tensor(const std::string& onnx_value);
    const nn::ValueInfo* info(const std::string& onnx_value) const;
    const Known* known(const std::string& onnx_value) const;
    // Adds a description layer named `name` (made unique) and returns its node's name.
    Result<std::string> emit(nlohmann::json layer, const std::string& name, const std::string& who);
    void bind(const std::string& onnx_value, const std::string& psrun_value) { values_[onnx_value] = psrun_value; }
    // A name of A-Z a-z 0-9 _ - . / from an ONNX name, unused so far.
    std::string unique_name(const std::string& onnx_name);
    // Marks node i as imported by a pattern (the walk skips it).
    void consume(int i) { consumed_.insert(i); }
    bool consumed(int i) const { return consumed_.count(i) != 0; }
    // True when `value` is the graph's output or a node the output needs reads it.
    bool value_read(const std::string& value) const;
    // Of a graph's several outputs (after import), the one float scalar: the loss. Errors when
    // none or two are.
    Result<std::string> loss_of_outputs(const std::vector<std::string>& outputs) const;
    Error refuse(int node, const std::string& what) const;
    // What a pattern found an ONNX value to be (OnnxNodeImport::pattern), recorded before the
    // walk; nullptr when nothing.
    void note(const std::string& onnx_value, nlohmann::json found) { notes_[onnx_value] = std::move(found); }
    const nlohmann::json* note(const std::string& onnx_value) const {
        const auto it = notes_.find(onnx_value);
        return it == notes_.end() ? nullptr : &it->second;
    }
    // An ONNX sequence value as the walk knows it (import_sequence): its elements' ONNX names,
    // in order; nullptr when `onnx_value` is no sequence.
    const std::vector<std::string>* sequence(const std::string& onnx_value) const {
        const auto it = sequences_.find(onnx_value);
        return it == sequences_.end() ? nullptr : &it->second;
    }
    void set_sequence(const std::string& onnx_value, std::vector<std::string> elements) {
        sequences_[onnx_value] = std::move(elements);
    }
    // Records `onnx_value` as known at import (a sequence's length).
    void set_known(const std::string& onnx_value, Known k) { known_[onnx_value] = std::move(k); }

  private:
    // The graph's inputs, in its order, as the model's (the first is the primary input).
    Result<void> add_inputs();
    // Every output but `loss` is a head the loss reads (a graph of several outputs).
    Result<void> check_heads(const std::vector<std::string>& outputs, const std::string& loss) const;
    // The initializers' values as the model's initial parameters, each tensor whole.
    Result<void> set_initial_parameters();
    Result<void> import_node(int i);
    // A float Constant of one value whose shape has one axis of the file's fixed batch size (the
    // torch.zeros(x.size(0), H) of a file without dynamic_axes) made a fill of shape N there
    // (nn/ops/fixed_batch.h, fill_shape_at_fixed_batch); any other `k` is left as it is.
    void read_fixed_batch_fill(Known& k);
    // The shape of a fill (a Constant of one value, a ConstantOfShape) with the file's fixed batch
    // on one axis, nullopt for the shape as written: at batch b >= 2 the one axis of size b; at
    // 1 the reading this walk takes (fill_readings_at_batch_one after the shape as written).
    std::optional<nn::Dims> fill_at_file_batch(const nn::Dims& shape);
    // An If: static_if_ is set (the walk stops), with the taken branch where its condition is
    // known at import, else both (onnx_inline_if.h).
    Result<void> import_if(int i);
    // A Loop: nn.EmbeddingBag's (import_embedding_bag), or one that runs a number of times known
    // at import with a condition that stays true (a scripted `for t in range(x.size(1))`):
    // loop_unroll_ is set (the walk stops); any other is refused.
    Result<void> import_loop(int i);
    // `error` of node i, or, where i computes a Loop's trip count (a Loop the walk has not
    // reached, not nn.EmbeddingBag's), a refusal of that Loop quoting it: what cannot be imported
    // is the Loop over a count the data decides (1-D ids with offsets), not the arithmetic.
    Error blame_loop(int i, Error error) const;

    const GraphIndex& graph_;
    std::int64_t opset_;
    std::string source_;
    std::int64_t file_batch_ = 0;
    std::set<std::string> frozen_;
    ReadingChoices* choices_ = nullptr;
    int node_ = -1;                       // the node being imported
    std::size_t evaluated_elements_ = 0;  // of the values evaluated at import so far
    nn::ModelDescription model_;
    std::unique_ptr<nn::GraphBuilder> builder_;
    std::map<std::string, std::string> values_;
    std::map<std::string, Known> known_;
    std::map<std::string, std::vector<float>> initial_;  // tensor name -> values
    std::map<std::string, std::string> tensor_names_;    // initializer -> tensor name
    std::set<std::string> names_;
    std::set<int> consumed_;
    std::map<std::string, nlohmann::json> notes_;
    std::optional<StaticIf> static_if_;
    std::optional<LoopUnroll> loop_unroll_;
    std::map<std::string, std::vector<std::string>> sequences_;
};

// Fused patterns (onnx_patterns.cpp): when node i starts one (LayerNorm's ReduceMean/Sub/Pow/
// ReduceMean/Add/Sqrt/Div/Mul/Add, exact GELU's Div/Erf/Add/Mul/Mul, a linear layer's
// MatMul(x, Transpose(W)) + Add(b)), imports it as one layer, marks its nodes consumed and
// returns true.
Result<bool> import_pattern(Importer& importer, int i);
// PyTorch's nn.GroupNorm decomposition (Reshape/InstanceNormalization/Reshape/Mul/Add) starting
// at node i, as one group_norm layer (onnx_patterns_norm.cpp); called by import_pattern.
Result<bool> import_group_norm_pattern(Importer& importer, int i);
// pack_padded_sequence(enforce_sorted=False)'s sort of the batch by length and its inverse
// around recurrent nodes, which cancel (onnx_sort_permutation.cpp): at the TopK, the sorted
// lengths bound to the lengths and the permutation's arithmetic consumed; at each Gather by the
// permutation or its inverse along the batch axis, its data passed through. Called by
// import_pattern.
Result<bool> import_sort_permutation(Importer& importer, int i);

// Before the walk (onnx_rnn_weights.cpp): every LSTM or GRU node whose W, R and B are PyTorch's
// gate reordering of its parameters (Slice/Concat/Unsqueeze of float initializers, as
// torch.onnx.export writes it without constant folding) gets a note on its W input
// ({"pattern": "pytorch_rnn_weights", "bias": b, "tensors": {"w_ih": tensor, ...}}), and the
// reordering's nodes are consumed, so the kind binds PyTorch's own tensors.
Result<void> claim_rnn_weights(Importer& importer);
// Before the walk (onnx_embedding_bag.cpp): every Loop that is nn.EmbeddingBag's export over the
// rows of [N, L] ids gets a note on its output, and the nodes computing only its offsets and trip
// count are consumed; import_embedding_bag (from the walk, at a Loop) then imports a noted Loop as
// an embedding and a reduce over the bag's axis, and returns false for any other (which the walk
// unrolls where it can: Importer::import_loop).
Result<void> claim_embedding_bags(Importer& importer);
// ONNX sequences of tensors, as torch.onnx writes a Python list in a scripted module
// (onnx_sequences.cpp): SequenceEmpty, SequenceConstruct, SequenceInsert and an Identity of a
// sequence are known at import as lists of their elements (Importer::sequence); SequenceAt and
// SequenceLength at known positions read them, ConcatFromSequence imports as a concat (of
// unsqueezed elements with new_axis: torch.stack). Returns false for any other node.
Result<bool> import_sequence(Importer& importer, int i);
Result<bool> import_embedding_bag(Importer& importer, int i);

}  // namespace psrun::onnx_io
