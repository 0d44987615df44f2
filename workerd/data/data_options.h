// The data options of training and evaluation beyond the IDX/.npy/CIFAR files of
// workerd/data/split_files.h (docs/data.md): image folders, TFRecord files, CSV and .npz
// tables, and how they are streamed. Plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "workerd/data/image_resize.h"
#include "workerd/data/tfrecord_reader.h"

namespace psrun::worker {

// --stream: auto streams TFRecord files and image folders whose decoded examples would exceed
// --stream-memory-mb, and loads the rest into memory; on streams every folder and TFRecord
// set; off loads everything into memory.
enum class StreamMode { kAuto, kOn, kOff };
[[nodiscard]] Result<StreamMode> parse_stream_mode(std::string_view text);  // auto|on|off

struct DataOptions {
    std::string train_data;       // --train-data / --train-dir: a folder, TFRecord files (comma list, globs), CSV, .npz
    std::string test_data;        // --test-data / --test-dir
    double validation_split = 0;  // image folders without --test-data: this fraction is the test split
    std::vector<std::string> inputs;   // --inputs: Example keys, CSV columns, .npz arrays (empty: the defaults)
    std::vector<std::string> targets;  // --targets
    ResizeMode resize = ResizeMode::kCrop;
    CorruptRecords corrupt = CorruptRecords::kError;
    StreamMode stream = StreamMode::kAuto;
    std::size_t shuffle_buffer = 10000;  // examples (streams of record files)
    std::size_t prefetch = 4;            // batches
    int threads = 0;                     // decoding threads; 0: auto
    std::size_t stream_memory_mb = 2048;
    bool given() const { return !train_data.empty() || !test_data.empty(); }
};

// Splits a comma list ("a,b,c"), dropping empty items.
std::vector<std::string> split_list(std::string_view text);

// The decoding threads --data-threads 0 means: a quarter of the cores the process may use, at
// least 1 (the rest compute).
int auto_data_threads();

}  // namespace psrun::worker
