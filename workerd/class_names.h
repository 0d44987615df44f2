// What `psrun predict` and `psrun eval` need to know about a model's training data, kept in
// <model-dir>/classes.json as {"classes": ["cat", "dog"], "image_resize": "crop"}: the class
// names (index = label; image folders: the sorted class folder names, CSV: the target column's
// names; empty when the data has none) and how images were fitted to the model (--image-resize,
// for data given by --train-data; empty otherwise).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace psrun::worker {

struct DataRecord {
    std::vector<std::string> classes;
    std::string image_resize;  // "crop", "pad", "stretch", or empty
    bool empty() const { return classes.empty() && image_resize.empty(); }
};

// Writes <model_dir>/classes.json atomically (the directory is created). Errors: kIo.
[[nodiscard]] Result<void> write_data_record(const std::string& model_dir, const DataRecord& record);

// The record in <model_dir>/classes.json; empty when there is none. A damaged file:
// kInvalidArgument naming it.
[[nodiscard]] Result<DataRecord> read_data_record(const std::string& model_dir);

}  // namespace psrun::worker
