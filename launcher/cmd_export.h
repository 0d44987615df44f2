// `psrun export --model-dir D [--checkpoint STEP] [-o FILE.onnx]` (docs/models.md "Exporting"):
// a checkpoint's parameters and the model its manifest records, as an ONNX inference graph
// (workerd/onnx/onnx_model.h).
#pragma once

#include <CLI/CLI.hpp>

namespace psrun::launcher {

// Registers `export` on `app`. Exit codes: 0 written; 2 no such checkpoint, a damaged one
// (a file fails its CRC: restore skips it too), a manifest without a model, or an unwritable
// output, each with one line on stderr naming what to do.
void add_export_command(CLI::App& app, int& exit_code);

}  // namespace psrun::launcher
