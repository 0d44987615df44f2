// What `psrun eval` and `psrun predict` share: where the trained model comes from (a model dir's
// checkpoint or an ONNX file, workerd/inference.h), the batch size and the compute threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "workerd/inference.h"

namespace psrun::launcher {

struct ModelSourceOptions {
    std::string model_dir;
    std::string onnx;
    std::int64_t checkpoint = -1;  // a step; -1: the newest checkpoint
    bool ema = false;              // --ema: the checkpoint's moving average of the weights
    std::int64_t batch_size = 500;
    int threads = 0;  // 0: OpenMP's default
    // --normalize as the training run was given it (runs record no normalization): applied
    // after uint8 / 255, as in training. Empty: none.
    std::string normalize;
    // --raw-ids as training took it: the embeddings whose tables the checkpoint holds keyed by raw
    // 64-bit ids (their inputs are read as raw ids; docs/sparse.md "Raw ids").
    std::vector<std::string> raw_ids;
};

// Registers --model-dir, --onnx (exclusive), --checkpoint, --ema, --batch-size, --threads,
// --normalize and --raw-ids on `cmd`.
void add_model_source_options(CLI::App& cmd, ModelSourceOptions& options);

// Loads the model (and sets the compute threads). Throws UsageError, saying what to do, when
// neither or both sources are given, --checkpoint, --ema or --raw-ids goes with --onnx, or loading
// fails (no checkpoint, a damaged one, a bad ONNX file, no ONNX importer in this build, --raw-ids
// that do not name the checkpoint's keyed tables).
worker::InferenceModel load_model_source(const ModelSourceOptions& options);

// Sets `images`' normalization from --normalize. Throws UsageError for a bad value.
void apply_normalization(const ModelSourceOptions& options, worker::LabeledImages& images);

// The directory outputs default to: the model dir, or the ONNX file's directory.
std::string default_output_dir(const ModelSourceOptions& options);

}  // namespace psrun::launcher
