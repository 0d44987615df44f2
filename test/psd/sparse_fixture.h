// The sparse-table tests' model and helpers (sparse_test.cpp, sparse_sync_test.cpp): a dense layer
// and one embedding table of kRows x kWidth on in-process psd shards, read back through PsClient.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include <catch2/catch.hpp>

#include "common/row_init.h"
#include "test/psd/ps_fixture.h"

namespace psrun::test::sparse {

constexpr std::uint32_t kRows = 1000, kWidth = 8;

// A dense layer and one embedding table (tensor 1) of kRows x kWidth, or the same table dense.
inline std::vector<TensorSpec> model(bool sparse) {
    std::vector<TensorSpec> t = {{"fc/w", {16, 10}}, {"emb", {kRows, kWidth}}, {"fc/b", {10}}};
    if (sparse) {
        t[1].kind = TensorKind::kRows;
        t[1].row_init = RowInit{RowInitKind::kUniform, 0.1f, 42};
    }
    return t;
}

inline std::vector<float> table_init() {
    std::vector<float> v(std::size_t{kRows} * kWidth);
    for (std::uint32_t r = 0; r < kRows; ++r)
        fill_row(model(true)[1].row_init, r, std::span<float>(v.data() + r * kWidth, kWidth));
    return v;
}

inline std::vector<std::uint32_t> all_ids() {
    std::vector<std::uint32_t> ids(kRows);
    std::iota(ids.begin(), ids.end(), 0u);
    std::reverse(ids.begin(), ids.end());  // any order
    return ids;
}

// Every row of the table, pulled through `client`, as a kRows x kWidth buffer in id order.
inline std::vector<float> pull_table(PsClient& client) {
    const auto ids = all_ids();
    const RowRequest request{1, ids};
    PulledRows rows;
    REQUIRE(client.exchange(Exchange{.pulls = {&request, 1}, .rows = &rows}));
    std::vector<float> table(std::size_t{kRows} * kWidth);
    for (std::size_t i = 0; i < ids.size(); ++i)
        std::copy_n(rows.rows(0).data() + i * kWidth, kWidth, table.data() + std::size_t{ids[i]} * kWidth);
    return table;
}

}  // namespace psrun::test::sparse
