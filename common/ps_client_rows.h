// PsClient's sparse rows of one exchange, per shard and table (common/ps_client_rows.cpp). An
// implementation detail of PsClient, kept here so that its buffers are reused across exchanges.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace psrun {

struct RowPlan {
    struct Part {                              // one shard's rows of one table
        std::vector<std::uint32_t> grad_ids;   // ascending, unique
        std::vector<float> grad_values;        // summed rows, grads() x width
        std::vector<std::uint16_t> grad_bf16;  // the values in bf16 when sent so (held by ZeroMQ until released)
        std::vector<std::uint32_t> pull_ids;   // ascending, unique
        std::vector<float> pulled;             // the shard's reply, pulls() x width
        std::vector<std::uint64_t> grad_keys, pull_keys;  // a keyed table's raw ids, in place of the ids
        std::size_t grads() const { return grad_ids.size() + grad_keys.size(); }
        std::size_t pulls() const { return pull_ids.size() + pull_keys.size(); }
    };
    std::vector<std::vector<Part>> parts;  // [shard][table]
    // For pull request i, position j: the shard and the index in that shard's pull_ids.
    struct Where {
        std::uint32_t shard = 0;
        std::uint32_t index = 0;
    };
    std::vector<std::uint32_t> request_tables;  // table of each request
    std::vector<std::vector<Where>> where;      // per request
    // Scratch for sorting: (id, source position).
    std::vector<std::pair<std::uint64_t, std::uint64_t>> order;
    bool any = false;     // this exchange has rows
    bool lookup = false;  // its pulls only read (wire::kFlagLookup)
};

}  // namespace psrun
