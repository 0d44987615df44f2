// The training and test splits a worker trains on, loaded from the training options: the MNIST
// files of --data-dir (or --dataset's default dir), or the files of --train-images ... (IDX, .npy
// or CIFAR, docs/data.md), checked against the model's input and classes.
#pragma once

#include <string>

#include "common/result.h"
#include "workerd/data/labeled_images.h"
#include "workerd/nn/model_description.h"
#include "workerd/train_options.h"

namespace psrun::worker {

struct Datasets {
    LabeledImages train;
    LabeledImages test;
    std::string name;  // --dataset, or "files" when given by --train-images ...
};

// What `model` takes: its input shape and classes, named after it in messages.
ModelInput model_input(const nn::ModelDescription& model);

// Loads both splits. Throws UsageError for inconsistent options (--train-images without
// --test-images, with --data-dir, a bad --normalize or --image-layout). Errors: a file that does
// not fit `model` or a bad file given by option: kInvalidArgument naming the file; the data dir's
// files missing or unreadable: kNotFound, saying how to fetch them.
[[nodiscard]] Result<Datasets> load_datasets(const TrainOptions& options, const ModelInput& model);

// The exit code for a load_datasets error: kExitUsage for kInvalidArgument (the user's files or
// options), kExitFailure otherwise.
int data_error_exit_code(const Error& error);

}  // namespace psrun::worker
