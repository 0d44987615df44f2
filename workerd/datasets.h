// The training and test splits a worker trains on, loaded from the training options: the MNIST
// files of --data-dir (or --dataset's default dir), the files of --train-images ... (IDX, .npy
// or CIFAR), or --train-data/--test-data (image folders, TFRecord files, CSV or .npz tables;
// docs/data.md), checked against the model's input and targets. A split is in memory or a
// stream; make_train_source()/make_test_source() give the Trainer its batch sources.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/class_names.h"
#include "workerd/data/batch_source.h"
#include "workerd/data/data_sources.h"
#include "workerd/data/labeled_images.h"
#include "workerd/data/mapped_npy.h"
#include "workerd/nn/model_description.h"
#include "workerd/train_options.h"

namespace psrun::worker {

struct Datasets {
    LabeledImages train;  // in memory (empty when train_stream is set)
    LabeledImages test;
    std::string name;                          // --dataset, or "files" when given by --train-images or --train-data
    std::shared_ptr<StreamPlan> train_stream;  // set when the split is streamed
    std::shared_ptr<StreamPlan> test_stream;
    // Set when a split's .npy images are memory-mapped (--train-images F.npy with --stream on, or
    // larger than --stream-memory-mb): `train`/`test` then hold only the labels and the shape.
    std::shared_ptr<const MappedNpy> train_mapped;
    std::shared_ptr<const MappedNpy> test_mapped;
    std::vector<std::string> class_names;  // image folders, CSV class names; empty otherwise
    std::string train_description;         // for the start-up log line
    std::string test_description;
    std::size_t train_size() const { return train_stream ? train_examples : train.size(); }
    std::size_t test_size() const { return test_stream ? test_examples : test.size(); }
    std::size_t train_examples = 0;  // streamed: when known (image folders), else 0
    std::size_t test_examples = 0;
};

// What `model` takes: its input shape and classes, named after it in messages. `raw_inputs`: the
// inputs read by tables keyed by raw ids (SparseTables::raw_inputs); the primary among them is
// read as raw 64-bit ids (ModelInput::raw_ids).
ModelInput model_input(const nn::ModelDescription& model, const std::vector<std::string>& raw_inputs = {});

// Loads both splits. Throws UsageError for inconsistent options (--train-images without
// --test-images, with --data-dir, a bad --normalize, --image-layout, --stream ...). Errors: a
// file that does not fit `model` or a bad file given by option: kInvalidArgument naming the
// file; the data dir's files missing or unreadable: kNotFound, saying how to fetch them. With
// --raw-ids naming an embedding of the primary input, that input is read as raw ids (from .npy
// files or --input-columns tables; other --train-data is refused, UsageError).
[[nodiscard]] Result<Datasets> load_datasets(const TrainOptions& options, const ModelInput& model);

// The training batches of `config`'s shard (batch size, seed); in-memory splits are referenced:
// `data` must outlive the source.
std::unique_ptr<BatchSource> make_train_source(const Datasets& data, const TrainerConfig& config);
// The evaluation pass over the test split (same lifetime rule).
std::unique_ptr<EvalSource> make_test_source(const Datasets& data);

// The data options of --train-data/--test-data and the streaming flags from `options`.
// Throws UsageError naming a bad flag value.
DataOptions data_options(const TrainOptions& options);

// What <model-dir>/classes.json records of `data` (workerd/class_names.h): its class names, and
// --image-resize when the data came from --train-data.
DataRecord data_record(const TrainOptions& options, const Datasets& data);

// The exit code for a load_datasets error: kExitUsage for kInvalidArgument (the user's files or
// options), kExitFailure otherwise.
int data_error_exit_code(const Error& error);

}  // namespace psrun::worker
