// `psrun model check --gradients F.json`: the batch's loss and outputs, every trainable tensor's
// gradient by name (and its bf16 gradient where bf16 ran), and with --input-gradients each float
// input's dL/d(input):
//   {"loss": L, "outputs": [...], "tensors": {NAME: {"shape": [...], "gradient": [...],
//    "bf16_gradient": [...]}}, "inputs": {NAME: {"gradient": [...]}}}
// Written as it goes, not built as a JSON document first: a network of 28M parameters (Swin-T)
// took 20 s and 2.5 GB to write as a document. Numbers are float32 in their shortest text that
// reads back as the same float32; a non-finite one is null (as JSON has no NaN).
#pragma once

#include <string>

#include "workerd/nn/gradient_check.h"
#include "workerd/nn/model_description.h"

namespace psrun::launcher {

// Throws UsageError when `path` cannot be written.
void write_gradients_file(const std::string& path, const nn::ModelDescription& model, const nn::GradientCheck& check);

}  // namespace psrun::launcher
