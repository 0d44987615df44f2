// The several-input click model the recommender-table tests (table_columns_test.cpp,
// example_table_test.cpp) read their tables for: dense [2] float (primary), cat [2] ids of an
// embedding emb_cat of 50 rows, tags [3] ids (a bag) of emb_tags of 20 rows, tags_w [3, 1] float
// bag weights; one float target.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "workerd/data/column_spec.h"
#include "workerd/data/model_input.h"

namespace psrun::worker::click_fixture {

// One model input as table_inputs() describes it; `table`: the embedding reading an id input.
inline TableInput input(std::string name, bool ints, std::size_t width, std::string shape, std::int64_t rows = 0,
                        std::string table = "") {
    TableInput in;
    in.name = std::move(name);
    in.ints = ints;
    in.width = width;
    in.shape = std::move(shape);
    in.rows = rows;
    in.table = std::move(table);
    return in;
}

inline std::vector<TableInput> click_inputs() {
    return {input("dense", false, 2, "[2] float"), input("cat", true, 2, "[2] int", 50, "emb_cat"),
            input("tags", true, 3, "[3] int", 20, "emb_tags"), input("tags_w", false, 3, "[3, 1] float")};
}

inline ModelInput click_model() {
    ModelInput m{"click", 1, 1, 1, 1};
    m.input = InputKind::kFeatures;
    m.length = 2;
    m.target = TargetKind::kVector;
    m.target_length = 1;
    return m;
}

}  // namespace psrun::worker::click_fixture
