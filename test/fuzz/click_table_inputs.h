// The several-input click model the table fuzz targets (columns_fuzz.cpp, example_table_fuzz.cpp)
// parse their tables for: a float input "dense" [2], id inputs "cat" [2] (50 rows) and "tags"
// [3] (20 rows) of embedding "emb", a float bag-weights input "tags_w" [3], one float target.
// Header-only, so that fuzz.sh's own build of each target needs no other source.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "workerd/data/column_spec.h"
#include "workerd/data/model_input.h"

namespace psrun::worker {

inline std::vector<TableInput> click_table_inputs() {
    std::vector<TableInput> inputs(4);
    const char* names[] = {"dense", "cat", "tags", "tags_w"};
    const std::size_t widths[] = {2, 2, 3, 3};
    const std::int64_t rows[] = {0, 50, 20, 0};
    for (std::size_t k = 0; k < 4; ++k) {
        inputs[k].name = names[k];
        inputs[k].ints = rows[k] > 0;
        inputs[k].width = widths[k];
        inputs[k].shape = "[" + std::to_string(widths[k]) + "]";
        inputs[k].rows = rows[k];
        inputs[k].table = "emb";
    }
    return inputs;
}

inline ModelInput click_table_model() {
    ModelInput model{"click", 1, 1, 1, 1, InputKind::kFeatures, 2};
    model.target = TargetKind::kVector;
    model.target_length = 1;
    return model;
}

}  // namespace psrun::worker
