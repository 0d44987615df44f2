// Parameters that torch.onnx merged because their values were equal. An eval-mode export (the
// default) deduplicates initializers by value: a fresh module's second LayerNorm writes its
// weight as Identity(first LayerNorm's weight), a fresh BatchNorm its running mean as
// Identity(its bias). Read literally the file ties them; trained so, it is another network than
// the module. A training-mode export merges only tensors that share storage, which torch's
// unique state dict already lists once, so an Identity of a float initializer that some other
// node also reads is a merge by value in practice.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "workerd/onnx/onnx_proto.h"

namespace psrun::onnx_io {

// Each Identity node of the graph whose input is a float initializer that another node reads
// too, and whose output is no initializer, input or output of the graph, is replaced by an
// initializer of its own: a copy of the input's values under the Identity's output name (the
// module's own name for it). Returns the (copy, source) pairs, in graph order.
std::vector<std::pair<std::string, std::string>> untie_merged_initializers(onnx::GraphProto& graph);

// The warning a model carries for the pairs untie_merged_initializers() returned; "" when none.
std::string merged_initializers_warning(const std::vector<std::pair<std::string, std::string>>& untied);

}  // namespace psrun::onnx_io
