// `psrun data synthesize`: a labelled image data set of any size as TFRecord shards of
// tf.train.Example (image/encoded JPEG, image/class/label), for the streaming benchmarks
// (docs/benchmarks.md) and for trying a pipeline. `distinct` synthetic images
// (workerd/data/synthetic_images.h) are encoded once and written in a random order until the
// training shards hold `gigabytes`; a test shard holds `test_images` of them. Uses every core.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "workerd/data/synthetic_images.h"

namespace psrun::worker {

struct SynthesizeOptions {
    std::string out;       // directory (created)
    double gigabytes = 1;  // of training shards (10^9 bytes)
    ImageShape shape;
    int classes = 10;
    int shards = 0;       // 0: one per ~256 MB
    int quality = 90;     // JPEG
    int distinct = 4096;  // images encoded
    int test_images = 10000;
    std::uint64_t seed = 1;
};

// Writes OUT/train-SSSSS-of-NNNNN.tfrecord and OUT/test-00000-of-00001.tfrecord. Returns
// {"train_files", "train_records", "train_bytes", "test_records", "seconds", ...}. Errors: kIo
// naming the file; kInvalidArgument for bad options.
[[nodiscard]] Result<nlohmann::json> synthesize_tfrecords(const SynthesizeOptions& options);

}  // namespace psrun::worker
