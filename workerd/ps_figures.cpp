#include "workerd/ps_figures.h"

#include <vector>

#include <spdlog/spdlog.h>

#include "common/ps_client.h"

namespace psrun::worker {

nlohmann::json sum_keyed_tables(const std::vector<nlohmann::json>& per_shard) {
    nlohmann::json out = nlohmann::json::object();
    for (std::size_t s = 0; s < per_shard.size(); ++s) {
        if (!per_shard[s].is_object()) continue;
        for (auto it = per_shard[s].begin(); it != per_shard[s].end(); ++it) {
            nlohmann::json& table = out[it.key()];
            if (table.is_null()) table = {{"shards", nlohmann::json::array()}};
            for (auto f = it.value().begin(); f != it.value().end(); ++f)
                if (f.value().is_number_unsigned())
                    table[f.key()] = table.value(f.key(), std::uint64_t{0}) + f.value().get<std::uint64_t>();
            nlohmann::json shard = it.value();
            shard["psd"] = s;
            table["shards"].push_back(shard);
        }
    }
    return out;
}

nlohmann::json combine_staleness(const std::vector<nlohmann::json>& per_shard) {
    nlohmann::json out;
    double mean_sum = 0;
    std::size_t answered = 0;
    for (std::size_t s = 0; s < per_shard.size(); ++s) {
        const nlohmann::json& shard = per_shard[s];
        if (!shard.is_object()) continue;
        if (out.is_null()) out = {{"shards", nlohmann::json::array()}};
        for (auto f = shard.begin(); f != shard.end(); ++f) {
            if (f.key() == "gradient_mean" || !f.value().is_number()) continue;
            nlohmann::json& have = out[f.key()];
            if (have.is_null() || f.value().get<double>() > have.get<double>()) have = f.value();
        }
        if (shard.contains("max_staleness") && !out.contains("max_staleness"))
            out["max_staleness"] = shard["max_staleness"];
        mean_sum += shard.value("gradient_mean", 0.0);
        ++answered;
        nlohmann::json own = shard;
        own["psd"] = s;
        out["shards"].push_back(std::move(own));
    }
    if (answered > 0) out["gradient_mean"] = mean_sum / static_cast<double>(answered);
    return out;
}

nlohmann::json read_ps_figures(PsClient& client, std::uint32_t shards) {
    nlohmann::json out = nlohmann::json::object();
    std::vector<nlohmann::json> keyed(shards), staleness(shards);
    for (std::uint32_t s = 0; s < shards; ++s) {
        auto stats = client.stats(s);
        if (!stats) {
            spdlog::warn("summary.json: psd {} did not answer STATS ({}): its figures are left out", s,
                         stats.error().message);
            continue;
        }
        if (s == 0) {
            nlohmann::json elastic;
            for (const char* key : {"data_chunks", "workers_dropped", "min_workers", "workers_joined", "max_workers"})
                if (stats->contains(key)) elastic[key] = (*stats)[key];
            if (!elastic.is_null()) out["elastic"] = elastic;
        }
        if (stats->contains("staleness")) staleness[s] = (*stats)["staleness"];
        if (stats->contains("keyed_tables")) keyed[s] = (*stats)["keyed_tables"];
    }
    if (auto combined = combine_staleness(staleness); !combined.is_null()) out["staleness"] = std::move(combined);
    if (auto tables = sum_keyed_tables(keyed); !tables.empty()) out["keyed_tables"] = std::move(tables);
    return out;
}

}  // namespace psrun::worker
