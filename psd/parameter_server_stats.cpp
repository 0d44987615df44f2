// What ParameterServer reports (STATS, psd's exit line): its counters, the shard's sizes, the
// keyed tables' rows and policy counters, and the async and elastic figures of their own files.
#include <nlohmann/json.hpp>

#include "common/utf8.h"
#include "psd/parameter_server.h"

namespace psrun::psd {

std::string ParameterServer::stats_json() const {
    nlohmann::json j;
    j["index"] = options_.index;
    j["instance"] = fmt::format("{:016x}", instance_);  // as in WELCOME: a waiting worker sees a restart by it
    j["mode"] = options_.sync ? "sync" : "async";
    j["table_mode"] = options_.sync && !options_.async_tables ? "sync" : "async";  // how sparse rows are applied
    j["initialized"] = ready_for_workers();
    j["step"] = shard_ ? shard_->step() : 0;
    j["shard_floats"] = shard_ ? shard_->size() : 0;
    j["optimizer_floats"] = shard_ ? shard_->optimizer_floats() : 0;  // slot floats (state tensors keep none)
    j["row_floats"] = shard_ ? shard_->rows().floats() : 0;           // this shard's rows of the sparse tables
    j["rows_created"] =
        shard_ ? shard_->rows().rows_created() : 0;  // rows pulled or pushed at least once (lazy creation)
    j["row_slot_floats"] = shard_ ? shard_->rows().slot_floats() : 0;
    j["row_average_floats"] = shard_ ? shard_->rows().average_floats() : 0;  // --ema-decay: the rows' moving average
    if (auto keyed = keyed_tables_json(); !keyed.empty())
        j["keyed_tables"] = keyed;  // this shard's part of each table keyed by raw ids
    j["rows_pushed"] = counters_.rows_pushed;
    j["rows_pulled"] = counters_.rows_pulled;
    j["param_buffers"] = shard_ ? shard_->buffer_count() : 0;
    j["workers_attached"] = workers_.count_attached();
    j["workers_done"] = workers_.count_done();
    j["workers_dead"] = workers_.dead();
    j["workers_missing"] = workers_.missing();
    j["messages"] = counters_.messages;
    j["applied"] = counters_.applied;
    j["malformed"] = counters_.malformed;
    j["unauthorized"] = counters_.unauthorized;
    j["nonfinite"] = counters_.nonfinite;
    j["stale"] = counters_.stale;
    j["errors"] = counters_.errors;
    j["handler_exceptions"] = handler_exceptions_;
    j["checkpoints"] = counters_.checkpoints;
    j["bf16_param_conversions"] = bf16_.conversions();
    j["bf16_param_reuses"] = bf16_.reuses();
    j["aborted"] = faults_.aborted();
    j["auth_denied"] = transport_->denied();
    if (!options_.sync) j["staleness"] = staleness_json();  // async: gradients' staleness, --max-staleness
    j.update(elastic_json());                               // --min-workers, data chunks
    return json_text(j);
}

nlohmann::json ParameterServer::keyed_tables_json() const {
    nlohmann::json out = nlohmann::json::object();
    if (!shard_) return out;
    const RowStore& rows = shard_->rows();
    for (std::size_t t = 0; t < rows.size(); ++t) {
        const RowIndex* index = rows.index(t);
        if (!index) continue;
        const auto& c = index->counters();
        out[tensors_.at(rows.table(t).tensor).name] = {
            {"rows", index->rows()},          {"capacity", index->capacity()},        {"admitted", c.admitted},
            {"refused", c.refused},           {"refused_full", c.refused_full},       {"evicted_full", c.evicted_full},
            {"evicted_idle", c.evicted_idle}, {"gradients_dropped", rows.dropped(t)}, {"index_bytes", index->bytes()}};
    }
    return out;
}

}  // namespace psrun::psd
