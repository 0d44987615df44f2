// `psrun eval --model-dir D|--onnx FILE [--checkpoint STEP] [--test-images F --test-labels F]
// [--dataset NAME] [--data-dir DIR] [--batch-size N] [-o DIR]` (docs/models.md "Predict and
// evaluate"): the model's accuracy on a labelled test set, per-class precision and recall, the
// confusion matrix as text, and OUT/confusion.png and OUT/eval.json (OUT: -o, else the model
// dir or the ONNX file's directory). The test set defaults to the test split of the dataset the
// run recorded in D/summary.json (mnist or fashion-mnist), else MNIST's, from --data-dir or the
// dataset's default dir (`psrun data fetch`). `--test-data F --input-columns NAME=COL,...` (and
// training's other table options) evaluates on a recommender table (workerd/table_split.h).
#pragma once

#include <CLI/CLI.hpp>

namespace psrun::launcher {

// Registers `eval`; its callback sets exit_code 0, or throws UsageError (exit 2) when it cannot
// continue: no or a damaged checkpoint, missing test data, labels that do not match the images,
// images that do not fit the model.
void add_eval_command(CLI::App& app, int& exit_code);

}  // namespace psrun::launcher
