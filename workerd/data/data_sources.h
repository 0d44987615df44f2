// From --train-data/--test-data (workerd/data/data_options.h) to data a worker can train on:
// each split is loaded into memory (LabeledImages, drawn through the Sampler) or planned as a
// stream (workerd/data/stream_pipeline.h), by --stream and the split's kind:
//   a directory                       an image folder (workerd/data/image_folder.h)
//   files, comma-separated, with globs TFRecord files (no magic number: a well-framed first
//                                     record), .npz archives (zip magic) or CSV tables
// --validation-split F without --test-data holds a part of an image folder out as the test
// split. Every error is kInvalidArgument naming the file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/batch_source.h"
#include "workerd/data/data_options.h"
#include "workerd/data/labeled_images.h"
#include "workerd/data/sampler.h"
#include "workerd/data/stream_pipeline.h"

namespace psrun::worker {

// What a stream needs besides its batch size, seed and shard.
struct StreamPlan {
    PipelineConfig config;  // batch_size and shuffle_seed are set per source
    bool folder = false;    // image files with labels, else TFRecord files
    std::shared_ptr<const std::vector<std::string>> files;
    std::shared_ptr<const std::vector<std::int32_t>> labels;  // folder: per file
};

// One split, loaded or planned.
struct LoadedSplit {
    std::shared_ptr<LabeledImages> memory;  // in memory, or
    std::shared_ptr<StreamPlan> stream;     // streamed
    std::size_t size = 0;                   // examples; 0 when unknown (streamed record files)
    std::vector<std::string> class_names;   // image folders: the class folders
    std::string description;                // "image folder D: 10 classes, 60000 images, in memory"
};

struct LoadedData {
    LoadedSplit train;
    LoadedSplit test;
};

// Loads or plans both splits (`options.given()` must hold). `normalization` applies to images
// and features. Errors: kInvalidArgument naming the file or folder (a format it is not, a
// mismatch with `model`, inconsistent options).
[[nodiscard]] Result<LoadedData> load_data(const DataOptions& options, const ModelInput& model,
                                           const Normalization& normalization);

// Loads or plans one split (psrun eval's --test-data): a pass over it needs no shard.
[[nodiscard]] Result<LoadedSplit> load_test_split(const DataOptions& options, const ModelInput& model,
                                                  const Normalization& normalization);

// The training batches of worker `shard` of a streamed split.
std::unique_ptr<BatchSource> make_stream_source(const StreamPlan& plan, std::size_t batch_size, std::uint64_t seed,
                                                ShardSpec shard);
// An evaluation pass over a streamed split, in order.
std::unique_ptr<EvalSource> make_stream_eval_source(const StreamPlan& plan);

// Expands a comma list of paths and glob patterns (sorted matches). Errors name a pattern that
// matches nothing.
[[nodiscard]] Result<std::vector<std::string>> expand_file_list(const std::string& text);

}  // namespace psrun::worker
