// `psrun predict --model-dir D|--onnx FILE --images F... [--checkpoint STEP] [--output P.npy]
// [--batch-size N]` (docs/models.md "Predict and evaluate"): classifies images given as IDX,
// .npy, PNG or PGM files (workerd/predict_inputs.h) and prints one line per image,
//   <index or file> <class> <probability of that class>
// (index: the image's position across the IDX/.npy files given; file: for PNG/PGM), or with
// --output writes every probability as a float32 .npy array [images, classes] instead.
// `--data F --input-columns NAME=COL,...` (and training's other table options) reads the rows
// of a CSV/TSV table or TFRecord Examples instead (workerd/table_split.h), one line per row.
#pragma once

#include <CLI/CLI.hpp>

namespace psrun::launcher {

// Registers `predict`; its callback sets exit_code 0, or throws UsageError (exit 2) for a
// missing or damaged checkpoint, an unknown or damaged image file, or images of another shape
// than the model's input.
void add_predict_command(CLI::App& app, int& exit_code);

}  // namespace psrun::launcher
