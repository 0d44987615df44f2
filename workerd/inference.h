// Inference with a trained model outside a training job (`psrun eval`, `psrun predict`): a model
// and its parameters loaded from a model dir's checkpoint or an ONNX file, and the engine run
// forward-only (nn::NetworkOptions::forward_only) over a set of images in batches, giving the
// softmax probabilities per image. Pixels go through fill_batch (workerd/data/sampler.h), the
// very conversion training applies (uint8 / 255, float32 as stored, then any normalization).
// Not thread-safe; the engine runs on the OpenMP threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/checkpoint_params.h"
#include "common/result.h"
#include "workerd/data/labeled_images.h"
#include "workerd/keyed_rows.h"
#include "workerd/nn/model_description.h"

namespace psrun::worker {

struct InferenceModel {
    nn::ModelDescription model;
    // model.parameter_count floats, the engine's flat layout; with keyed tables (below), only the
    // dense tensors, in model order (each keyed table left out).
    std::vector<float> params;
    // A checkpoint's tables keyed by raw 64-bit ids (--raw-ids; workerd/keyed_rows.h), read through
    // a KeyedLookup batch by batch (workerd/keyed_lookup.h); `raw_ids` their embeddings as given.
    std::vector<KeyedRows> keyed;
    std::vector<std::string> raw_ids;
    std::string source;      // "checkpoint D/ckpt-0000000300" or "ONNX file F", for messages
    std::int64_t step = -1;  // the checkpoint's global step; -1 for an ONNX file
    std::string dataset;     // D/summary.json's "dataset" ("mnist", "fashion-mnist", "files"); empty: unknown

    // The model inputs read as raw 64-bit ids (load_input_columns' and load_table_split's
    // raw_inputs): those of the keyed tables' embeddings.
    std::vector<std::string> raw_inputs() const;
};

// The model the checkpoint of `step` (nullopt: the newest) in `model_dir` records, with its
// parameters, every tensor's CRC32C verified. Errors, each saying what to do:
//  - kNotFound: no such directory, no committed checkpoint in it, or none of `step` (naming the
//    steps there are), or (kAverage) no moving average in it;
//  - kInvalidArgument: the checkpoint is damaged (naming the file, and the newest older
//    checkpoint that verifies, if any), or its model record cannot be rebuilt;
//  - kUnsupported: `raw_ids` does not name exactly the tables the checkpoint holds keyed by raw
//    ids (check_raw_id_names, workerd/keyed_checkpoint.h), saying which --raw-ids to give or drop.
// `values`: the parameters, or psd's moving average of them (--ema-decay; common/checkpoint_params.h).
// `raw_ids`: --raw-ids as training took it; its tables come back in InferenceModel::keyed.
[[nodiscard]] Result<InferenceModel> load_checkpoint_model(const std::string& model_dir,
                                                           std::optional<std::int64_t> step,
                                                           CheckpointValues values = CheckpointValues::kParameters,
                                                           const std::vector<std::string>& raw_ids = {});

// A model imported from an ONNX file (workerd/onnx/onnx_model.h) with its initializers.
// Errors: the importer's (kIo unreadable, kInvalidArgument not ONNX or unsupported); kUnsupported
// when this build has no ONNX importer.
[[nodiscard]] Result<InferenceModel> load_onnx_model(const std::string& path);

// Softmax probabilities, images.size() rows of model.classes floats (row-major). Runs batches
// of min(batch_size, images.size()) examples; the last partial batch is padded with the first
// image and the padding discarded. REQUIRES: the images have the model's input shape and every
// label is in [0, classes) (check_fits_model). Errors: kInvalidArgument for batch_size < 1;
// the engine's (kUnsupported when oneDNN cannot build a layer).
[[nodiscard]] Result<std::vector<float>> predict_probabilities(const InferenceModel& model, const LabeledImages& images,
                                                               std::int64_t batch_size);

// One head's predictions: the softmax (softmax head) or sigmoid (sigmoid head) of its scores, or
// a value head's predictions as they are, rows of `width` floats (a per-position head's: width x
// d1 x ...), one per image.
struct HeadPrediction {
    std::string name;  // the head's value (nn::Head::value)
    nn::HeadKind kind = nn::HeadKind::kSoftmax;
    std::int64_t width = 0;
    // A per-position head's dims after the classes (nn::Head::spatial): its rows are then
    // [width, d1, ...], the softmax taken over the classes at each position.
    std::vector<std::int64_t> spatial;
    std::vector<float> probabilities;
    std::size_t row_size() const {
        std::size_t n = static_cast<std::size_t>(width);
        for (const auto d : spatial) n *= static_cast<std::size_t>(d);
        return n;
    }
};

// Every head's predictions of a graph-loss model with heads (model.heads order), in one pass
// over the images (batches as predict_probabilities). Errors as predict_probabilities', and
// kInvalidArgument for a model without heads (a built-in loss: use predict_probabilities; a
// graph loss whose graph shows none).
[[nodiscard]] Result<std::vector<HeadPrediction>> predict_heads(const InferenceModel& model,
                                                                const LabeledImages& images, std::int64_t batch_size);

// The arg-max class of each row of `probabilities` (rows of `classes` floats; the first
// maximum on ties, as the loss's predictions()).
std::vector<std::int32_t> arg_max(const std::vector<float>& probabilities, std::int64_t classes);

}  // namespace psrun::worker
