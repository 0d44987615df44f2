// Adds description layers to a ModelDescription one at a time, each parsed, checked and
// shape-inferred against what came before: the JSON parser (model_description.cpp) and the
// ONNX importer (workerd/onnx/) build models through it, so both give the same errors.
// Not thread-safe; the model must outlive the builder.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "workerd/nn/model_description.h"

namespace psrun::nn {

class GraphBuilder {
  public:
    // `model` has its inputs set; errors start with `prefix` ("model F").
    GraphBuilder(ModelDescription& model, std::string prefix);

    // Parses `layer` (docs/models.md: kind, name, inputs, tensors and the kind's fields) as
    // layer number index(), infers its shapes and appends it. Returns the node.
    Result<const Node*> add(const nlohmann::json& layer);
    // Layers added so far.
    std::size_t index() const { return model_.nodes.size(); }
    // The value a layer without "inputs" reads: the last node's first output, or the input.
    std::string previous_value() const;
    // True when `name` names a value, a node or a tensor already.
    bool taken(const std::string& name) const;

    // After the last layer: the output (`output` empty: the last node's), the loss's checks,
    // totals; a graph loss's heads (`heads`: the description's "heads", else found) and label
    // input (`labels`, or found): graph_loss.h. Errors name what does not fit.
    Result<void> finish(const std::string& output, const std::string& labels = {},
                        const std::vector<Head>* heads = nullptr);

  private:
    // The model's input names, quoted, for errors: "\"x\", \"meta\"".
    std::string input_names() const;
    // The layer's "inputs", by default the previous value (none for kinds without inputs).
    Result<std::vector<std::string>> parse_inputs(const nlohmann::json& layer, const std::string& where,
                                                  bool no_inputs) const;

    ModelDescription& model_;
    std::string prefix_;
    std::map<std::string, int> kind_counts_;
};

}  // namespace psrun::nn
