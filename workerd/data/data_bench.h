// `psrun bench data`: decoded images per second per core for each format, one JSON line each
// (docs/benchmarks.md). On `images` synthetic images (workerd/data/synthetic_images.h) of
// `shape`, encoded once, each measurement decodes them round-robin on one thread for at least
// `seconds`:
//   jpeg-decode   libjpeg-turbo's decompression alone (what tjbench measures)
//   jpeg, png     the reader's whole path: decode, colour conversion, HWC -> CHW (resize when
//                 the images are not the target's size)
//   tfrecord-jpeg, tfrecord-png  record framing, CRC, Example parsing and the decode above
//   idx           uint8 pixels to float (the in-memory path's batch filling), for scale
// and `stream-tfrecord-jpeg` runs the whole StreamPipeline with `threads` decoding threads
// (total images/s and per decoding thread). With `image` set, that file alone is decoded
// repeatedly (format by content), e.g. the file given to tjbench: JPEG-file-decode
// (libjpeg-turbo alone) and JPEG-file (the reader's whole path).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace psrun::worker {

struct DataBenchOptions {
    std::string shape = "3x64x64";
    std::string target;  // CxHxW to decode to; empty: the shape (no resizing)
    int images = 512;
    int quality = 90;
    double seconds = 2;
    int threads = 1;  // stream measurement
    std::vector<std::string> formats{"jpeg-decode",         "jpeg", "png", "tfrecord-jpeg", "tfrecord-png", "idx",
                                     "stream-tfrecord-jpeg"};
    std::string image;         // decode this file instead of the synthetic set
    std::string save_samples;  // write sample.jpg and sample.png of the set here (for tjbench)
};

// One JSON object per measurement. Errors: kInvalidArgument (bad option, unreadable --image).
[[nodiscard]] Result<std::vector<nlohmann::json>> run_data_benchmark(const DataBenchOptions& options);

}  // namespace psrun::worker
