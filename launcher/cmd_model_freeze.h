// `psrun model freeze FILE.onnx --tensors NAME[,NAME...] -o OUT.onnx` (docs/models.md
// "Buffers"): lists initializers of a file exported by a plain torch.onnx.export as constants
// (workerd/onnx/onnx_freeze.h), so a module's buffers do not train.
#pragma once

#include <CLI/CLI.hpp>

namespace psrun::launcher {

// Registers `freeze` under `model`; its callback sets exit_code: 0 written, 2 a usage error or a
// file it cannot read, write or import (message on stderr).
void add_model_freeze_command(CLI::App& model, int& exit_code);

}  // namespace psrun::launcher
